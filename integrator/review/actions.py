"""Held candidates and the release manager's review: list, show, approve, reject.

The held candidates are the spool's `fenced/` and `review/` folders; their records in git
(`refs/integrator/held/<submission>`, the review history) are `integrator.records.held`.

Approval never bypasses the fence: it runs the candidate through `integrate` again under
the contract the coordinator re-issued or expanded, and reports that verdict.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

import structlog

from integrator.documents.claim import Claim
from integrator.documents.verdict import Decision, Verdict
from integrator.errors import (
    InfrastructureError,
    IntegratorError,
    UsageError,
)
from integrator.files import atomic_write
from integrator.limits import ACTOR_CHARS, REASON_CHARS
from integrator.plumbing import transaction
from integrator.records.canonical import Canonical
from integrator.records.expansions import ExpansionEntry, expansions
from integrator.records.held import (
    Action,
    ReviewAction,
    archived_ref,
    held_ref,
    write_record,
)
from integrator.review.changes import NO_PATCHES, Changes, FileDiff, changes
from integrator.review.held import HELD_FOLDERS, REVIEW_FILE, Held, exclusive, pending, read_held
from integrator.review.reconcile import (
    decided_error,
    decided_on_server,
    file_decided,
    listing,
    reconciled,
)
from integrator.review.seen import ClaimMark, check
from integrator.store import republish
from integrator.store.entries import codes_of, review_record
from integrator.store.mirror import Mirror, for_spool
from integrator.store.spool import (
    VERDICT_FILE,
    Spool,
    folder_for,
)

log = structlog.get_logger("integrator.review")

# What the review's callers import from here (the held copies and the reconciliation
# live in `review.held` and `review.reconcile`).
__all__ = [
    "HELD_FOLDERS", "REVIEW_FILE", "Held", "Lander", "Review", "decided_on_server",
    "default_actor", "expansion_lines", "listing", "open_review", "pending",
    "pending_expansions", "read_held", "reconciled",
]  # fmt: skip


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
        return reconciled(self.spool, self.canonical, self.mirror)

    def _undecided(self, sid: str) -> Held:
        """The held submission `sid`, read after the server: one another host approved,
        rejected or requeued is filed as such here and refused, naming who and when."""
        self.canonical.refresh()
        decided = decided_on_server(self.canonical, sid)
        if decided is None:
            return self.get(sid)
        found = self.spool.find(sid)
        if found is not None and found[0] in HELD_FOLDERS:
            held = read_held(self.spool, found[0], sid)
            file_decided(self.spool, held, decided, self.canonical, self.mirror)
        raise decided_error(sid, decided[1])

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

    def _exclusive(self) -> contextlib.AbstractContextManager[None]:
        """The spool's review lock (`review.held.exclusive`), for actions kept elsewhere."""
        return exclusive(self.spool)

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
        with exclusive(self.spool):
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
        with exclusive(self.spool):
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
            canonical, entry, verdict or held.verdict, held.raw, held.submission.candidate
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
        if verdict is not None and republish.from_intake(self.spool.folder(destination) / held.sid):
            # Its verdict on the intake is the one that held it: the daemon serving the
            # intake publishes this one at its next drain.
            republish.ask(self.spool.root, held.sid)
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
