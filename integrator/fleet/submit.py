"""The submission client, agent side: hand a candidate commit to the daemon through its
spool or an intake, and read the verdict back (`integrator submit`, `integrator status` and
the MCP server's `submit` / `read_verdict` all call these).

Only git processes here (no libgit2): agents submit after every task and must start light.
"""

from __future__ import annotations

import getpass
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from integrator import jsontext
from integrator.documents import envelope
from integrator.documents.attempt_key import AttemptKey
from integrator.documents.rules import ContractRules, rules_from_bytes
from integrator.errors import EXIT_USAGE, ContractError, InfrastructureError
from integrator.fleet import intake
from integrator.fleet.keys import NoKey, find_key
from integrator.plumbing import git
from integrator.plumbing.bundles import create_bundle
from integrator.store.spool import (
    BUNDLE_FILE,
    DECIDED,
    REJECTION_FILE,
    VERDICT_FILE,
    Spool,
    new_id,
)

T = TypeVar("T")

# Where a decided submission is: filed by the daemon, or archived/ once a release manager
# rejected it (its verdict stays beside it: still decided, never "queued" again).
FILED = DECIDED


def submitter(repo: Path) -> dict[str, Any]:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return envelope.submitter(user, socket.gethostname(), os.getpid(), str(repo))


def _submission(
    document: dict[str, Any],
    candidate: str,
    repo: Path,
    now: datetime,
    *,
    bundle: bool,
    urgent: bool,
    signature: dict[str, str] | None = None,
) -> bytes:
    """The submission document of `candidate` under the contract `document`."""
    who = submitter(repo)
    name = BUNDLE_FILE if bundle else None
    try:
        return envelope.submission_json(
            document, candidate, who, now, bundle=name, urgent=urgent, signature=signature
        )
    except ValueError as err:  # what the daemon's reader would refuse, refused here
        raise ContractError(f"contract is invalid: {err}", [str(err)]) from err


def _resolve(data: bytes, rev: str, repo: Path) -> tuple[ContractRules, str, Path, str]:
    """The contract's rules, its base commit, the clone and the candidate commit `rev`
    names there.

    A contract is refused here when the guard's plain reading of it fails (schema, task,
    generation, globs) or its base is not a commit id; the daemon's gate judges the rest
    and fences what fails there (CONTRACT_INVALID), so nothing is lost.
    """
    rules = rules_from_bytes(data)
    base = rules.document.get("baseCommit")
    if not isinstance(base, str) or envelope.OBJECT_ID_RE.fullmatch(base) is None:
        raise ContractError("contract is invalid: baseCommit: not a commit id", ["baseCommit"])
    repo_path = repo.resolve()
    return rules, base, repo_path, git.rev_parse_commit(repo_path, rev)


def publish(
    spool: Spool,
    data: bytes,
    rev: str,
    repo: Path,
    bundle: bool,
    *,
    urgent: bool = False,
    key: Path | None = None,
) -> dict[str, object]:
    """Write one submission into the spool, signed with the attempt key (`key`, or the one
    fleet/keys.py finds); the `--json` document `integrator submit` prints (the MCP
    server's `submit` returns the same document)."""
    rules, base, repo_path, candidate = _resolve(data, rev, repo)
    signer = find_key(rules.document, repo_path, key)
    now = datetime.now(UTC)
    with spool.draft(now) as draft:
        if bundle:
            create_bundle(repo_path, candidate, base, draft / BUNDLE_FILE)
        submission = _submission(
            rules.document, candidate, repo_path, now, bundle=bundle, urgent=urgent,
            signature=_signed(signer, draft.name, candidate),
        )  # fmt: skip
        sid = spool.publish(draft, submission, urgent=urgent)
    doc: dict[str, object] = {
        "submission": sid, "candidate": candidate, "path": str(spool.folder("new") / sid)
    }  # fmt: skip
    if isinstance(signer, NoKey):
        doc["unsigned"] = str(signer)
    return doc


def _signed(signer: AttemptKey | NoKey, sid: str, candidate: str) -> dict[str, str] | None:
    return None if isinstance(signer, NoKey) else signer.signature(sid, candidate)


@dataclass(frozen=True)
class Pushed:
    """A submission pushed to an intake: its id, the candidate, and the clone it came from
    (where its verdict is fetched into)."""

    submission: str
    candidate: str
    repo: Path
    unsigned: str | None = None  # why it went in unsigned (no attempt key was found)


def to_intake(
    url: str,
    data: bytes,
    rev: str,
    repo: Path,
    *,
    urgent: bool = False,
    key: Path | None = None,
) -> Pushed:
    """Push one submission to the intake at `url`: the candidate and `submission.json`
    (signed with the attempt key) in one commit under refs/integrator/submit/<task>/<id>."""
    rules, _, repo_path, candidate = _resolve(data, rev, repo)
    signer = find_key(rules.document, repo_path, key)
    task_id = rules.task_id
    now = datetime.now(UTC)
    sid = new_id(now)
    submission = _submission(
        rules.document, candidate, repo_path, now, bundle=False, urgent=urgent,
        signature=_signed(signer, sid, candidate),
    )  # fmt: skip
    message = f"submission {sid} of task {task_id}\n"
    commit = intake.submission_commit(repo_path, submission, candidate, message)
    intake.push_submission(url, repo_path, task_id, sid, commit)
    if isinstance(signer, NoKey):
        return Pushed(sid, candidate, repo_path, str(signer))
    intake.remember_verdict_keys(repo_path, signer.verdict_keys)
    return Pushed(sid, candidate, repo_path)


def poll(
    look: Callable[[], T | None],
    timeout: float,
    late: str,
    *,
    first: float = 0.02,
    most: float = 0.5,
) -> T:
    """Call `look` until it finds something and return that; once `timeout` seconds have
    passed with nothing found, InfrastructureError(`late`). It looks at least once (a
    timeout of 0 is one look); the pause between looks grows from `first` to `most`."""
    deadline = time.monotonic() + timeout
    delay = first
    while True:
        found = look()
        if found is not None:
            return found
        if time.monotonic() >= deadline:
            raise InfrastructureError(late)
        time.sleep(delay)
        delay = min(delay * 1.5, most)


def wait_published(
    url: str,
    repo: Path,
    task_id: str,
    sid: str,
    timeout: float,
    *,
    candidate: str | None = None,
    looked: Callable[[int, str | None], None] | None = None,
) -> intake.Published:
    """Poll the intake until a verdict for submission `sid` of task `task_id` is published
    (on `candidate`, when given: another candidate's verdict there is an error). A verdict
    no trusted verdict key signed is not one: waited past, and named if time runs out.
    `looked` is told after each look that found none: how many looks so far, and why the
    last verdict seen was not believed (None when none was seen): progress."""
    untrusted: list[str] = []
    looks = 0

    def look() -> intake.Published | None:
        nonlocal looks
        found = intake.find_verdict(
            url, repo, task_id, sid, candidate=candidate, untrusted=untrusted
        )
        looks += 1
        if found is None and looked is not None:
            looked(looks, untrusted[-1] if untrusted else None)
        return found

    try:
        return poll(
            look,
            timeout,
            f"no verdict for {sid} of task {task_id} on {url} within {timeout:g} s; it is "
            "still queued (is a daemon serving the intake?)",
            first=0.1,
            most=1.0,
        )
    except InfrastructureError as err:
        if untrusted:
            raise InfrastructureError(
                f"no trusted verdict for {sid} of task {task_id} on {url} within {timeout:g} "
                f"s: {untrusted[-1]} (a daemon replaces it when it decides)"
            ) from err
        raise


def wait_filed(
    spool: Spool, sid: str, timeout: float, *, waiting: Callable[[], None] | None = None
) -> tuple[str, Path]:
    """Poll until the daemon files `sid`: the folder it is in, and its path (`waiting` is
    called at each look that finds nothing: progress). A held copy is first filed as
    another host decided it, when the server says one did (a release manager's approval
    there lands it; this spool must not keep telling FENCED)."""

    def look() -> tuple[str, Path] | None:
        found = filed(spool, sid)
        if found is None and waiting is not None:
            waiting()
        return found

    found = poll(
        look,
        timeout,
        f"no verdict for {sid} within {timeout:g} s; it is still queued (is the daemon running?)",
    )
    if found[0] in ("fenced", "review"):
        from integrator.review.reconcile import reconcile_one

        reconcile_one(spool, sid)
        found = filed(spool, sid) or found
    return found


def filed(spool: Spool, sid: str) -> tuple[str, Path] | None:
    """The folder the daemon filed `sid` in, and its path; None while it is still queued."""
    for folder in FILED:
        path = spool.folder(folder) / sid
        if path.is_dir():
            return folder, path
    return None


def verdict_document(sid: str, folder: str, path: Path) -> tuple[dict[str, Any], int]:
    """The `--wait --json` document of a filed submission, and the exit code it means."""
    rejected = folder == "rejected"
    data = (path / (REJECTION_FILE if rejected else VERDICT_FILE)).read_bytes()
    return document_of(sid, rejected, data, folder)


def document_of(
    sid: str, rejected: bool, data: bytes, folder: str | None = None
) -> tuple[dict[str, Any], int]:
    """The document (and exit code) of a verdict or rejection, as filed or published."""
    if rejected:
        rejection: dict[str, Any] = jsontext.loads(data)
        return rejection, EXIT_USAGE
    from integrator.documents.verdict import (
        Verdict,  # only when waiting: keeps submit's start-up short
    )

    verdict = Verdict.model_validate_json(data)
    doc: dict[str, Any] = {"submission": sid, "verdict": verdict.wire()}
    if folder is not None:
        doc["folder"] = folder
    return doc, verdict.exit_code


def staging_of(doc: dict[str, Any]) -> str | None:
    """The staging commit a filed or published verdict names: an ACCEPTED one's landing,
    or the queue commit an ejected one was taken out as (FENCED VALIDATION_FAILED); None
    for a verdict that never landed and for a rejection."""
    verdict = doc.get("verdict")
    staging = verdict.get("stagingCommit") if isinstance(verdict, dict) else None
    return staging if isinstance(staging, str) else None


def landing(spool: Spool, sid: str) -> dict[str, object] | None:
    """Where a landed submission's landing is now: on the queue (maybe rebuilt after an
    ejection, under another staging commit), promoted to the target, reverted, or ejected
    (its verdict FENCED since). None when it never landed or there is no queue to look in."""
    found = filed(spool, sid)
    repo = spool.repo_path()
    if found is None or found[0] == "rejected" or repo is None:
        return None
    doc, _ = verdict_document(sid, *found)
    staging = staging_of(doc)
    if staging is None:
        return None
    from integrator.records.landings import whereabouts

    return whereabouts(repo, staging)


def intake_landing(
    url: str, repo: Path, doc: dict[str, Any], canonical: str | None = None
) -> dict[str, object] | None:
    """`landing` for a verdict published on the intake at `url`: read from the canonical
    server's refs, fetched into `repo` (`fleet.server_landing`). A server that cannot be
    read is InfrastructureError (exit 4: an ACCEPTED verdict's landing is not known), except
    beside a verdict that is not ACCEPTED (an ejection's FENCED): that one is told alone."""
    staging = staging_of(doc)
    if staging is None:
        return None
    from integrator.fleet import server_landing

    try:
        return server_landing.whereabouts(url, repo, staging, canonical)
    except InfrastructureError:
        if doc["verdict"].get("decision") == "ACCEPTED":
            raise
        return None


SETTLED = ("promoted", "ejected", "reverted", "gone")  # the states `--until promoted` ends on
OFF_TARGET = ("ejected", "reverted")  # landed once, but its change is not on the target


def lifecycle_code(code: int, where: dict[str, object] | None, until: str) -> int:
    """The exit code of a verdict read with its landing (docs/lifecycle.md): an ACCEPTED
    verdict (0) is 1 when its landing was reverted or ejected since, and with `--until
    promoted` whenever the landing is not on the target."""
    from integrator.errors import EXIT_FENCED, EXIT_OK

    state = (where or {}).get("state")
    if code == EXIT_OK and (state in OFF_TARGET or (until == "promoted" and state != "promoted")):
        return EXIT_FENCED
    return code


def _settled(
    look: Callable[[], dict[str, object] | None],
    sid: str,
    timeout: float,
    *,
    first: float = 0.1,
    most: float = 1.0,
    waiting: Callable[[dict[str, object]], None] | None = None,
) -> dict[str, object] | None:
    def settled() -> dict[str, object] | tuple[()] | None:
        where = look()
        if where is None:
            return ()  # no landing (any more) to wait on: the caller reads the verdict again
        if where["state"] in SETTLED:
            return where
        if waiting is not None:
            waiting(where)
        return None

    found = poll(
        settled,
        timeout,
        f"{sid} is ACCEPTED and on the queue, but not promoted within {timeout:g} s (is a "
        "promoter running? `integrator queue status` shows what it waits on)",
        first=first,
        most=most,
    )
    return found if isinstance(found, dict) else None


def wait_settled(
    spool: Spool,
    sid: str,
    timeout: float,
    *,
    waiting: Callable[[dict[str, object]], None] | None = None,
) -> dict[str, object] | None:
    """Poll until a landed submission's landing is promoted, ejected, reverted or gone; its
    whereabouts, or None once it has none (there is no queue to look in). `waiting` is
    given the whereabouts at each look that finds it still waiting (progress)."""
    return _settled(lambda: landing(spool, sid), sid, timeout, waiting=waiting)


def wait_settled_intake(
    url: str, repo: Path, sid: str, doc: dict[str, Any], timeout: float, canonical: str | None
) -> dict[str, object] | None:
    """`wait_settled` for a verdict `doc` published on the intake: the landing read from
    the canonical server at every look (one ls-remote and one fetch: looks slow down to one
    every 5 s, a promotion takes a validation run)."""

    def look() -> dict[str, object] | None:
        return intake_landing(url, repo, doc, canonical)

    return _settled(look, sid, timeout, first=0.5, most=5.0)
