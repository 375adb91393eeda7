"""Held candidates and the release manager's review: list, show, approve, reject.

The held candidates are the spool's `fenced/` and `review/` folders; their records in git
(`refs/integrator/held/<submission>`, the review history) are `integrator.records.held`.

Approval never bypasses the fence: it runs the candidate through `integrate` again under
the contract the coordinator re-issued or expanded, and reports that verdict.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

import structlog
from pydantic import ValidationError

from integrator.documents.claim import Claim
from integrator.documents.submission import Submission
from integrator.documents.verdict import Decision, Verdict
from integrator.errors import (
    ConfigurationError,
    InfrastructureError,
    IntegratorError,
    UsageError,
)
from integrator.files import atomic_write
from integrator.limits import ACTOR_CHARS, REASON_CHARS, SUBMISSION_BYTES, VERDICT_BYTES
from integrator.plumbing import transaction
from integrator.records.canonical import Canonical
from integrator.records.expansions import ExpansionEntry, expansions
from integrator.records.held import (
    Action,
    ReviewAction,
    archived_ref,
    held_ref,
    history,
    write_record,
)
from integrator.review.changes import NO_PATCHES, Changes, FileDiff, changes
from integrator.review.seen import ClaimMark, check
from integrator.store.entries import codes_of, review_record
from integrator.store.mirror import Mirror, for_spool
from integrator.store.spool import (
    SUBMISSION_FILE,
    VERDICT_FILE,
    Spool,
    folder_for,
    submitted,
)
from integrator.store.submitted import read_at_most_path, read_submitted

log = structlog.get_logger("integrator.review")

REVIEW_FILE = "review.json"
REVIEW_LOCK = "review.lock"
HELD_FOLDERS = ("fenced", "review")


@dataclass(frozen=True)
class Held:
    """A candidate waiting in `fenced/` or `review/`."""

    sid: str
    folder: str
    verdict: Verdict
    submission: Submission
    raw: bytes

    def subject(self) -> tuple[str | None, str | None, int | None]:
        """(task, attempt, generation): from the verdict, else from the submitted contract.

        A verdict names them only when the contract parsed; the submission still carries the
        contract as sent, so even a CONTRACT_INVALID candidate's review is found by task.
        """
        v, contract = self.verdict, self.submission.contract
        task, attempt = contract.get("taskId"), contract.get("attemptId")
        generation = v.generation
        if generation is None:
            sent = contract.get("ownershipGeneration")
            generation = sent if type(sent) is int else None  # not a bool, not a string
        return (
            v.task_id or (task if isinstance(task, str) else None),
            v.attempt_id or (attempt if isinstance(attempt, str) else None),
            generation,
        )


def read_held(spool: Spool, folder: str, sid: str) -> Held:
    """A held submission and its verdict; ConfigurationError when the folder is damaged."""
    path = spool.folder(folder) / sid
    try:
        raw = read_submitted(submitted(path), SUBMISSION_FILE, SUBMISSION_BYTES)
        verdict = Verdict.model_validate_json(read_at_most_path(path / VERDICT_FILE, VERDICT_BYTES))
        submission = Submission.model_validate_json(raw)
    except (OSError, ValidationError, IntegratorError) as err:
        raise ConfigurationError(
            f"{path} is not a complete held submission ({type(err).__name__}); "
            "move it out of the spool and look at it by hand"
        ) from err
    return Held(sid, folder, verdict, submission, raw)


def pending(spool: Spool) -> list[Held]:
    """Every held candidate of a spool, in submission order (reads no repository).

    A damaged folder is logged and left out, so one bad entry does not hide the others.
    """
    items = []
    for folder in HELD_FOLDERS:
        for sid in spool.entries(folder):
            try:
                items.append(read_held(spool, folder, sid))
            except ConfigurationError as err:
                log.warning("review.unreadable", submission=sid, error=str(err))
    return sorted(items, key=lambda h: h.sid)


def pending_expansions(spool: Spool, repo: Path | None = None) -> list[ExpansionEntry]:
    """Expansion requests the coordinator could not grant, waiting in the spool's repository.

    They live in git (`refs/integrator/expansions/`, see `expansions.py`), not in the spool;
    empty when the spool does not name its repository and `repo` is not given.
    """
    path = repo or spool.repo_path()
    if path is None:
        return []
    try:
        with Canonical(path) as canonical:
            return expansions(canonical, pending_only=True)
    except IntegratorError as err:  # the held candidates are still worth listing
        log.warning("review.expansions_unreadable", repo=str(path), error=str(err))
        return []


def expansion_lines(spool: Spool, repo: Path | None = None) -> list[str]:
    """`review list`'s lines for pending expansion requests (none when there are none)."""
    pending_requests = pending_expansions(spool, repo)
    if not pending_requests:
        return []
    return [
        f"expansion requests waiting for the coordinator ({len(pending_requests)}):",
        *(f"  {entry.describe()}" for entry in pending_requests),
        "  grant: `integrator contract expand --id ID`; close: `integrator contract dismiss ID`",
    ]


_PAST = {"approve": "approved", "reject": "rejected", "requeue": "requeued", "hold": "held"}


def decided_on_server(canonical: Canonical, sid: str) -> ReviewAction | None:
    """The review decision of `sid` that some host recorded in git — it is no longer held
    there and its chain ends in an approve, reject or requeue — or None while it is held
    (or git knows nothing of it). Held records are the authority every host reads."""
    if canonical.ref(held_ref(sid)) is not None:
        return None
    records = history(canonical, sid)
    if not records:
        return None
    action = records[-1][1]
    return action if action.action in ("approve", "reject", "requeue") else None


def _file_decided(spool: Spool, held: Held, decided: ReviewAction) -> None:
    """File a submission another host decided under `archived/`, with that host's record
    as its `review.json`."""
    path = spool.folder(held.folder) / held.sid
    atomic_write(path / REVIEW_FILE, decided.to_json().encode() + b"\n")
    spool.move(held.sid, held.folder, "archived")
    log.info("review.decided_elsewhere", submission=held.sid, action=decided.action,
             actor=decided.actor, at=decided.at.isoformat())  # fmt: skip


def reconciled(spool: Spool, canonical: Canonical) -> list[Held]:
    """`pending`, after reading the server and filing what other hosts decided; when the
    server cannot be read, the spool's own view (said in the log), never an error: a
    listing must not go dark with the git server."""
    items = pending(spool)
    try:
        canonical.refresh()
    except IntegratorError as err:
        log.warning("review.unreconciled", error=str(err))
        return items
    still = []
    for held in items:
        decided = decided_on_server(canonical, held.sid)
        if decided is None:
            still.append(held)
        else:
            _file_decided(spool, held, decided)
    return still


def listing(spool: Spool, repo: Path | None = None) -> list[Held]:
    """`reconciled`, opening the spool's repository (`repo`, default the one it records);
    the spool's own view when there is none or it cannot be opened."""
    repo = repo or spool.repo_path()
    if repo is None:
        return pending(spool)
    try:
        with Canonical(repo) as canonical:
            return reconciled(spool, canonical)
    except IntegratorError as err:
        log.warning("review.unreconciled", error=str(err))
        return pending(spool)


def _decided_error(sid: str, decided: ReviewAction) -> UsageError:
    return UsageError(
        f"{sid} was already {_PAST.get(decided.action, decided.action)} by {decided.actor} at "
        f"{decided.at.isoformat()}"
        + (f" ({decided.reason})" if decided.reason else "")
        + "; nothing changed"
    )


class Lander(Protocol):
    def integrate(self, contract_data: bytes, candidate: str) -> Verdict: ...


def default_actor() -> str:
    import getpass
    import socket

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def _check_text(actor: str, reason: str | None) -> None:
    """Who and why are recorded in git and shown to people: bounded, and one line of who."""
    if not actor or len(actor) > ACTOR_CHARS or any(ord(ch) < 0x20 for ch in actor):
        raise UsageError(f"the actor must be one line of at most {ACTOR_CHARS} characters")
    if reason is not None and len(reason) > REASON_CHARS:
        raise UsageError(f"the reason is longer than {REASON_CHARS} characters")


class Review:
    """The release manager's operations on one spool and its canonical repository."""

    def __init__(
        self,
        spool: Spool,
        canonical: Canonical,
        mirror: Mirror | None = None,
        *,
        engine: Lander | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.spool = spool
        self.canonical = canonical
        self.mirror = mirror
        self.engine = engine
        self.clock = clock

    def pending(self) -> list[Held]:
        """What this spool holds, after filing what other hosts decided."""
        return reconciled(self.spool, self.canonical)

    def _undecided(self, sid: str) -> Held:
        """The held submission `sid`, read after the server: one another host approved,
        rejected or requeued is filed as such here and refused, naming who and when."""
        self.canonical.refresh()
        decided = decided_on_server(self.canonical, sid)
        if decided is None:
            return self.get(sid)
        found = self.spool.find(sid)
        if found is not None and found[0] in HELD_FOLDERS:
            _file_decided(self.spool, read_held(self.spool, found[0], sid), decided)
        raise _decided_error(sid, decided)

    def get(self, sid: str) -> Held:
        found = self.spool.find(sid)
        if found is None:
            raise UsageError(f"no submission {sid!r} in {self.spool.root}")
        folder, _ = found
        if folder not in HELD_FOLDERS:
            raise UsageError(f"submission {sid} is in {folder}/, not held for review")
        return read_held(self.spool, folder, sid)

    @staticmethod
    def task_of(held: Held) -> str | None:
        task = held.verdict.task_id or held.submission.contract.get("taskId")
        return task if isinstance(task, str) else None

    def live_claim(self, held: Held) -> Claim | None:
        """The claim the coordinator holds now for the candidate's task (None: none)."""
        task = self.task_of(held)
        return self.canonical.claim(task) if task is not None else None

    def live_contract(self, held: Held, seen: ClaimMark | None = None) -> bytes:
        """The contract the coordinator holds now for the candidate's task; with `seen`,
        ClaimMoved unless that claim is the one the reviewer was shown."""
        claim = self.live_claim(held)
        check(self.task_of(held), seen, claim)
        if claim is None:
            raise UsageError(
                f"no claim for the task of {held.sid}; pass --contract with the contract the "
                "coordinator re-issued or expanded"
            )
        return claim.contract.to_json().encode()

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        """One review action at a time on this spool: an approve that is integrating and a
        reject of the same submission must not both act (the reject would be recorded
        while the approve lands the code). Held across the whole action, re-reading the
        submission inside; the kernel drops the lock if the process dies."""
        fd = os.open(self.spool.root / REVIEW_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def approve(
        self,
        sid: str,
        actor: str,
        contract: bytes | None = None,
        reason: str | None = None,
        *,
        seen: ClaimMark | None = None,
    ) -> Verdict:
        """Run the held candidate through the fence again under a re-issued contract (by
        default the live claim's; with `seen`, only when it is the claim shown)."""
        _check_text(actor, reason)
        if self.engine is None:
            raise UsageError("approve needs the integration engine")
        with self._exclusive():
            held = self._undecided(sid)
            data = contract if contract is not None else self.live_contract(held, seen)
            verdict = self.engine.integrate(data, held.submission.candidate)
            digest = verdict.contract_digest
            self._record(held, "approve", actor, reason, verdict, digest)
        return verdict

    def reject(self, sid: str, actor: str, reason: str, *, seen: ClaimMark | None = None) -> None:
        """Archive a held candidate with the reason; nothing is integrated. With `seen`,
        refused (ClaimMoved) unless the task's live claim is the one shown."""
        _check_text(actor, reason)
        if not reason.strip():
            raise UsageError("a rejection needs a reason")
        with self._exclusive():
            held = self._undecided(sid)
            check(self.task_of(held), seen, self.live_claim(held))
            self._record(held, "reject", actor, reason, None, held.verdict.contract_digest)

    def _record(
        self,
        held: Held,
        action: Action,
        actor: str,
        reason: str | None,
        verdict: Verdict | None,
        digest: str | None,
    ) -> None:
        self.canonical.refresh()
        now = self.clock()
        canonical = self.canonical
        old = canonical.ref(held_ref(held.sid))
        entry = ReviewAction(
            submission=held.sid,
            action=action,
            actor=actor,
            at=now,
            reason=reason,
            decision=verdict.decision if verdict else None,
            codes=codes_of(verdict) if verdict else [],
            contract_digest=digest,
            previous=old,
        )
        commit = write_record(
            canonical.repo, entry, verdict or held.verdict, held.raw, held.submission.candidate
        )
        still_held = verdict is not None and verdict.decision is not Decision.ACCEPTED
        if still_held:
            ops = [transaction.update(held_ref(held.sid), commit, old)]
        else:
            ops = [
                transaction.update(
                    archived_ref(held.sid), commit, canonical.ref(archived_ref(held.sid))
                )
            ]
            if old is not None:
                ops.append(transaction.delete(held_ref(held.sid), old))
        canonical.updater.apply(ops)
        path = self.spool.folder(held.folder) / held.sid
        atomic_write(path / REVIEW_FILE, entry.to_json().encode() + b"\n")
        if verdict is not None:
            atomic_write(path / VERDICT_FILE, verdict.to_json().encode() + b"\n")
        destination = folder_for(verdict.decision) if verdict is not None else "archived"
        if destination != held.folder:
            self.spool.move(held.sid, held.folder, destination)
        if self.mirror is not None:
            task, attempt, generation = held.subject()
            record = review_record(
                held.sid,
                action,
                actor,
                now,
                verdict,
                reason,
                task_id=task,
                attempt_id=attempt,
                generation=generation,
                candidate=held.submission.candidate,
            )
            self.mirror.record([record])
            with contextlib.suppress(InfrastructureError):
                self.mirror.flush(retry=False)  # else the backlog keeps it for the daemon

    def diff(self, held: Held, *, patches: bool = True) -> tuple[str | None, list[FileDiff]]:
        """(base used, per-file patches with the violations that name each file).

        With `patches=False` only the changed paths, statuses and modes are read (no blob
        contents beyond rename detection); `changes` weighs them and makes patches only
        under a limit, from one diff.
        """
        found = self.changes(held, patch_limit=None if patches else NO_PATCHES)
        return found.base, found.files

    def changes(self, held: Held, *, patch_limit: int | None = None) -> Changes:
        """The candidate's changes, with patches when its blobs weigh at most `patch_limit`."""
        base = held.verdict.base or held.submission.contract.get("baseCommit")
        return changes(
            self.canonical,
            held.submission.candidate,
            base,
            held.verdict.violations,
            patch_limit=patch_limit,
        )


@contextlib.contextmanager
def open_review(
    spool_dir: Path,
    repo: Path | None,
    mirror_file: Path | None,
    *,
    engine: Callable[[Canonical], Lander] | None = None,
) -> Iterator[Review]:
    """The `Review` every action runs on: the spool, its repository (`repo`, default the
    one the spool records), the registry mirror; `engine` makes the integration engine
    approve needs, from the open repository."""
    spool = Spool(spool_dir).existing()
    repo = repo or spool.repo_path()
    if repo is None:
        raise UsageError(f"{spool.root} does not record its repository yet; pass --repo")
    mirror = for_spool(spool.root, mirror_file)
    with Canonical(repo) as canonical:
        try:
            yield Review(spool, canonical, mirror, engine=engine(canonical) if engine else None)
        finally:
            mirror.close()
