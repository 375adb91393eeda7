"""Held candidates' records: `refs/integrator/held/<submission>` and its history.

A FENCED or REVIEW candidate is kept alive by `refs/integrator/held/<submission>`, which
points at a chain of *record* commits: each holds `action.json` (what was done, by whom,
why), `verdict.json` and `submission.json`, has the previous record (if any) as its first
parent and the candidate as its last parent. So `git log` of the ref is the review history
and the candidate's objects cannot be pruned while it waits. Once a review ends (accepted
on approval, or rejected) the chain moves to `refs/integrator/archived/<submission>`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import pygit2
from pydantic import Field, ValidationError

from integrator import refnames
from integrator.documents.contract import Model
from integrator.documents.verdict import Code, Decision, Verdict
from integrator.plumbing import transaction
from integrator.plumbing.packs import ObjectBuffer, flush_loose, tree_bytes
from integrator.records.archive_index import record_tip
from integrator.records.canonical import Canonical, signature
from integrator.store.entries import codes_of
from integrator.store.spool import SUBMISSION_FILE, VERDICT_FILE

Action = Literal["hold", "approve", "reject", "requeue"]


class ReviewAction(Model):
    """`integrator.review-action.v1`: one entry of a held candidate's history."""

    schema_: Literal["integrator.review-action.v1"] = Field(
        default="integrator.review-action.v1", alias="schema"
    )
    submission: str
    action: Action
    actor: str
    at: datetime
    reason: str | None = None
    decision: Decision | None = None
    codes: list[str] = Field(default_factory=list)
    contract_digest: str | None = None
    previous: str | None = None


def held_ref(sid: str) -> str:
    return f"{refnames.HELD}{sid}"


def archived_ref(sid: str) -> str:
    return f"{refnames.ARCHIVED}{sid}"


def _is_commit(repo: pygit2.Repository, oid: str) -> bool:
    try:
        return repo.odb.read_header(oid)[0] == pygit2.enums.ObjectType.COMMIT
    except (KeyError, ValueError, pygit2.GitError):  # absent, or not an object id
        return False


def write_record(
    canonical: Canonical,
    action: ReviewAction,
    verdict: Verdict | None,
    submission: bytes,
    candidate: str | None,
    *,
    objects: ObjectBuffer | None = None,
) -> str:
    """Write (objects only, no ref) the record commit for `action`.

    With `objects` the record stays pending there (the daemon writes a batch's records as
    one pack); otherwise it is written at once. Signed, with this host's authority key when
    it has one, for the submission's held ref wherever the record is found later (held,
    archived, or folded into the archive).
    """
    repo = canonical.repo
    buffer = objects if objects is not None else ObjectBuffer(repo)
    files = {
        b"action.json": (b"100644", buffer.add("blob", action.to_json().encode() + b"\n")),
        SUBMISSION_FILE.encode(): (b"100644", buffer.add("blob", submission)),
    }
    if verdict is not None:
        verdict_blob = buffer.add("blob", verdict.to_json().encode() + b"\n")
        files[VERDICT_FILE.encode()] = (b"100644", verdict_blob)
    tree = buffer.add("tree", tree_bytes(files))
    parents = [bytes.fromhex(action.previous)] if action.previous else []
    if candidate and _is_commit(repo, candidate):
        # The candidate as the record's last parent keeps its objects alive; anything but
        # a commit there (a submission may name a blob) would break fsck, gc and clones.
        parents.append(bytes.fromhex(candidate))
    outcome = f"{action.decision.value} {' '.join(action.codes)}".strip() if action.decision else ""
    message = f"{action.action} {action.submission}: {outcome or action.reason or ''}".rstrip()
    message += "\n\n"
    if action.reason:
        message += f"{action.reason}\n\n"
    message += f"Integrator-Submission: {action.submission}\nIntegrator-Review-Action: "
    message += f"{action.action}\nIntegrator-Actor: {action.actor}\n"
    if candidate:
        message += f"Integrator-Candidate: {candidate}\n"
    sig = signature(action.at)
    ref = held_ref(action.submission)
    commit = canonical.authority_commit(buffer, ref, tree, parents, sig, message)
    if objects is None:
        flush_loose(buffer)
    return commit


def hold_op(
    canonical: Canonical,
    sid: str,
    verdict: Verdict,
    submission: bytes,
    now: datetime,
    *,
    objects: ObjectBuffer | None = None,
) -> transaction.RefOp:
    """The ref update that holds a FENCED/REVIEW candidate (appends when already held)."""
    old = canonical.ref(held_ref(sid))
    action = ReviewAction(
        submission=sid,
        action="hold",
        actor="integrator",
        at=now,
        decision=verdict.decision,
        codes=codes_of(verdict),
        contract_digest=verdict.contract_digest,
        previous=old,
    )
    # A candidate fenced for unsafe names or malformed trees is recorded, not kept
    # reachable: objects git fsck rejects would break every clone that checks transfers.
    unsafe = any(v.code is Code.UNSAFE_PATH for v in verdict.violations)
    commit = write_record(
        canonical,
        action,
        verdict,
        submission,
        None if unsafe else verdict.candidate,
        objects=objects,
    )
    return transaction.update(held_ref(sid), commit, old)


def history(canonical: Canonical, sid: str) -> list[tuple[str, ReviewAction]]:
    """(commit, action) of a held or archived candidate's records, oldest first."""
    oid = canonical.ref(held_ref(sid)) or record_tip(canonical, "archived", sid)
    out: list[tuple[str, ReviewAction]] = []
    while oid:
        try:
            action = ReviewAction.model_validate_json(canonical.blob_at(oid, "action.json"))
        except (KeyError, ValidationError):
            break
        out.append((oid, action))
        oid = action.previous
    out.reverse()
    return out
