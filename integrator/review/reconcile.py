"""What other hosts decided: a held candidate that a release manager approved, rejected or
requeued on another host is filed here as that host filed it.

Several hosts decide the same intake submission and each holds its own copy in `fenced/`
or `review/`; the records in git (`refs/integrator/held/<id>`, then `archived/<id>`) are
the one authority they all read. A copy whose server record says it was decided is filed
by that record: an approval's copy takes the approval's verdict (ACCEPTED: `accepted/`,
with `recovered`: this host did not decide it), a rejection's or a requeue's goes to
`archived/`; either way the decision's `review.json` beside it and a review row in this
host's registry, so `status --spool`, `history` and the review page say what every other
channel says.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import structlog
from pydantic import ValidationError

from integrator.documents.verdict import Verdict
from integrator.errors import InfrastructureError, IntegratorError, UsageError
from integrator.files import atomic_write
from integrator.records.canonical import Canonical
from integrator.records.held import ReviewAction, held_ref, history
from integrator.review.held import HELD_FOLDERS, REVIEW_FILE, Held, exclusive, pending, read_held
from integrator.store.entries import review_record
from integrator.store.mirror import Mirror, for_spool
from integrator.store.spool import VERDICT_FILE, Spool, folder_for

log = structlog.get_logger("integrator.review")

_PAST = {"approve": "approved", "reject": "rejected", "requeue": "requeued", "hold": "held"}

Decided = tuple[str, ReviewAction]  # the record commit and the decision it holds

__all__ = [
    "Decided", "decided_error", "decided_on_server", "file_decided", "listing", "reconcile_one",
    "reconciled",
]  # fmt: skip


def decided_on_server(canonical: Canonical, sid: str) -> Decided | None:
    """The review decision of `sid` that some host recorded in git — it is no longer held
    there and its chain ends in an approve, reject or requeue — with its record commit, or
    None while it is held (or git knows nothing of it). Held records are the authority
    every host reads."""
    if canonical.ref(held_ref(sid)) is not None:
        return None
    records = history(canonical, sid)
    if not records:
        return None
    commit, action = records[-1]
    if canonical.authority_problem(held_ref(sid), commit) is not None:
        return None  # a decision no trusted key signed is no decision (docs/security.md)
    return (commit, action) if action.action in ("approve", "reject", "requeue") else None


def _decided_verdict(canonical: Canonical, commit: str, action: ReviewAction) -> Verdict | None:
    """The verdict an approval recorded (None for a rejection or requeue, or a record
    without a readable one: that copy is archived as decided)."""
    if action.action != "approve" or action.decision is None:
        return None
    try:
        verdict = Verdict.model_validate_json(canonical.blob_at(commit, VERDICT_FILE))
    except (KeyError, ValueError, ValidationError):
        return None
    return verdict.model_copy(update={"recovered": True})


def file_decided(
    spool: Spool,
    held: Held,
    decided: Decided,
    canonical: Canonical,
    mirror: Mirror | None = None,
) -> None:
    """File a held copy that another host decided as that host's record says (the caller
    holds the spool's review lock), and tell this host's registry (`mirror`, default the
    spool's own)."""
    commit, action = decided
    path = spool.folder(held.folder) / held.sid
    verdict = _decided_verdict(canonical, commit, action)
    atomic_write(path / REVIEW_FILE, action.to_json().encode() + b"\n")
    if verdict is not None:
        atomic_write(path / VERDICT_FILE, verdict.to_json().encode() + b"\n")
    destination = folder_for(verdict.decision) if verdict is not None else "archived"
    spool.move(held.sid, held.folder, destination)
    log.info("review.decided_elsewhere", submission=held.sid, action=action.action,
             actor=action.actor, at=action.at.isoformat(), filed=destination)  # fmt: skip
    task, attempt, generation = held.subject()
    record = review_record(
        held.sid, action.action, action.actor, action.at, verdict, action.reason,
        task_id=task, attempt_id=attempt, generation=generation,
        candidate=held.submission.candidate,
    )  # fmt: skip
    own = mirror is None
    target = mirror if mirror is not None else for_spool(spool.root, None)
    try:
        target.record([record])
        with contextlib.suppress(InfrastructureError):
            target.flush(retry=False)  # else the backlog keeps it for the daemon
    finally:
        if own:
            target.close()


def reconciled(spool: Spool, canonical: Canonical, mirror: Mirror | None = None) -> list[Held]:
    """`pending`, after reading the server and filing what other hosts decided; when the
    server cannot be read, the spool's own view (said in the log), never an error: a
    listing must not go dark with the git server."""
    items = pending(spool)
    if not items:
        return items
    try:
        canonical.refresh()
    except IntegratorError as err:
        log.warning("review.unreconciled", error=str(err))
        return items
    still = []
    with exclusive(spool):
        for held in items:
            decided = decided_on_server(canonical, held.sid)
            if decided is None:
                still.append(held)
            elif (spool.folder(held.folder) / held.sid).is_dir():  # not filed meanwhile
                file_decided(spool, held, decided, canonical, mirror)
    return still


def listing(spool: Spool, repo: Path | None = None, mirror: Mirror | None = None) -> list[Held]:
    """`reconciled`, opening the spool's repository (`repo`, default the one it records);
    the spool's own view when there is none or it cannot be opened."""
    repo = repo or spool.repo_path()
    if repo is None:
        return pending(spool)
    try:
        with Canonical(repo) as canonical:
            return reconciled(spool, canonical, mirror)
    except IntegratorError as err:
        log.warning("review.unreconciled", error=str(err))
        return pending(spool)


def reconcile_one(spool: Spool, sid: str) -> None:
    """File `sid` as another host decided it, when this spool still holds it and the server
    says it was decided (`status --spool` asks before it answers). The server unreadable
    is said in the log and leaves the spool's own answer."""
    found = spool.find(sid)
    repo = spool.repo_path()
    if found is None or found[0] not in HELD_FOLDERS or repo is None:
        return
    try:
        with Canonical(repo) as canonical:
            canonical.refresh()
            decided = decided_on_server(canonical, sid)
            if decided is None:
                return
            with exclusive(spool):
                found = spool.find(sid)
                if found is not None and found[0] in HELD_FOLDERS:
                    file_decided(spool, read_held(spool, found[0], sid), decided, canonical)
    except IntegratorError as err:
        log.warning("review.unreconciled", submission=sid, error=str(err))


def decided_error(sid: str, decided: ReviewAction) -> UsageError:
    return UsageError(
        f"{sid} was already {_PAST.get(decided.action, decided.action)} by {decided.actor} at "
        f"{decided.at.isoformat()}"
        + (f" ({decided.reason})" if decided.reason else "")
        + "; nothing changed"
    )
