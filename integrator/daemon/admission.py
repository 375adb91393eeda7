"""The intake's door: what the daemon decides about a submission ref before anything of it
enters the spool (integrator.daemon.intake calls these at every poll).

A submission on an intake is (task, id) — the two components of its ref — and what it
carries is its `submission.json` blob. Nothing a submitter chose is read before it is
measured, nothing is read twice in one poll, and a poll reads at most
INTAKE_POLL_SUBMISSIONS refs' worth and INTAKE_POLL_BYTES of documents, taking refs in
rounds across tasks (each task's oldest first), so a flood under one task waits behind
everyone else's first submission instead of in front of it. What can never be decided is
answered at its own ref with a small rejection (`Refusal`), never copied into the spool.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import pygit2

from integrator import jsontext, refnames
from integrator.fleet.intake import SUBMISSION_FILE
from integrator.limits import SUBMISSION_BYTES

# Why a submission ref is answered with a rejection at the door (none names anything a
# submitter chose; the rejection is published at the ref's own verdict ref).
NO_DOCUMENT = (
    f"the submission commit holds no regular file {SUBMISSION_FILE} (a commit whose tree "
    f"has it, the candidate as its parent: integrator submit --intake makes one)"
)
ID_IN_USE = (
    "the submission id is already in use by another submission (of another task, or another "
    "document); submit again: integrator submit makes a new id each time"
)
DUPLICATE = (
    f"the same {SUBMISSION_FILE} was already submitted under another id: it is decided once, there"
)
WRONG_TASK = (
    "its contract is of another task than the ref names: a submission goes to "
    f"{refnames.SUBMIT}<the contract's taskId>/<id>"
)


def too_large(size: int) -> str:
    return f"{SUBMISSION_FILE} is {size} bytes, more than {SUBMISSION_BYTES}"


@dataclass(frozen=True)
class Measured:
    """A submission commit's document as its headers tell (nothing read yet): the blob
    and its size, or why there is no document to read."""

    blob: str = ""
    size: int = 0
    problem: str | None = None


def measure(repo: pygit2.Repository, commit: str) -> Measured:
    """The `submission.json` of submission commit `commit`, measured by object headers."""
    try:
        obj = repo[commit]
        if not isinstance(obj, pygit2.Commit):
            return Measured(problem=NO_DOCUMENT)
        entry = obj.tree[SUBMISSION_FILE]
        kind, size = repo.odb.read_header(entry.id)
    except (KeyError, ValueError, pygit2.GitError):
        return Measured(problem=NO_DOCUMENT)
    if kind != pygit2.enums.ObjectType.BLOB or entry.filemode != pygit2.enums.FileMode.BLOB:
        return Measured(problem=NO_DOCUMENT)
    if size > SUBMISSION_BYTES:
        return Measured(str(entry.id), size, too_large(size))
    return Measured(str(entry.id), size)


def contract_task(data: bytes) -> str | None:
    """The `contract.taskId` a submission document states, None when it states none the
    plain reading finds (the spool's reader then judges the document)."""
    try:
        doc = jsontext.loads(data)
    except ValueError:
        return None
    contract = doc.get("contract") if isinstance(doc, dict) else None
    task = contract.get("taskId") if isinstance(contract, dict) else None
    return task if isinstance(task, str) else None


def blob_id(data: bytes) -> str:
    """The id git gives `data` as a blob."""
    return str(pygit2.hash(data))


@dataclass(frozen=True)
class Pending:
    """One submission ref on the intake, as fetched: task, id, and the commit it names.
    Its identity is all three: the same id under another task, or another commit under the
    same name, is another submission."""

    task_id: str
    sid: str
    commit: str

    @property
    def name(self) -> str:
        """`<task>/<id>`, as the ref names it (for logs and errors)."""
        return f"{self.task_id}/{self.sid}"


def rounds(items: Iterable[Pending], seen: Mapping[Pending, int]) -> list[Pending]:
    """`items` in rounds across tasks: every task's first, then every task's second, …;
    within a task and within a round, oldest first — the poll at which this daemon first
    saw the ref (`seen`), then the id (a time the submitter chose, so only second)."""

    def age(item: Pending) -> tuple[int, str, str]:
        return seen.get(item, 0), item.sid, item.task_id

    by_task: dict[str, list[Pending]] = {}
    for item in sorted(items, key=age):
        by_task.setdefault(item.task_id, []).append(item)
    ranked = [
        (rank, age(item), item) for group in by_task.values() for rank, item in enumerate(group)
    ]
    ranked.sort(key=lambda r: (r[0], r[1]))
    return [item for _, _, item in ranked]
