"""What was decided, read back from git: the landings on the queue and the held submissions.

Nothing here is a new record: every fact was written when the decision was made.

- A **landing** is a staging commit on the queue's first-parent chain. Its trailers name
  the candidate, base, task, attempt, contract digest and policy digest; the claim commit
  that consumed it (on `refs/integrator/claims/<task>`) holds the contract, and that
  commit's parent is the claim as the gate read it; the policy ref's chain holds the policy
  the digest names. The staging commit's parent is the queue head it was merged onto, and
  its tree is what landed. A landing's verdict is not kept in git: its codes and resource
  determinations are the gate's pure functions of those facts, so they are derived again.
- A **held** submission is the chain under `refs/integrator/held/<id>` (or
  `refs/integrator/archived/<id>` once its review ended). Its first record holds the
  verdict the daemon reached — with the queue head a merge was tried on — and the
  submission: the contract as sent and the candidate.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from pydantic import ValidationError

from integrator import jsontext, refnames
from integrator.documents.claim import Claim
from integrator.documents.policy import PolicyState
from integrator.documents.submission import Submission
from integrator.documents.trailers import TRAILER_CANDIDATE, trailers
from integrator.documents.verdict import Code, Verdict
from integrator.errors import ConfigurationError, IntegratorError, UsageError
from integrator.plumbing import git
from integrator.records import claims
from integrator.records.archive_index import archived_entries
from integrator.records.canonical import Canonical
from integrator.records.held import history
from integrator.store.spool import SUBMISSION_FILE, VERDICT_FILE

WALK_LIMIT = 100_000  # staging commits (and held records) read at most, newest first

Kind = Literal["landing", "held"]


@dataclass(frozen=True, kw_only=True)
class Recorded:
    """One decided submission and the facts it was decided on."""

    kind: Kind
    key: str  # the staging commit (a landing) or the submission id (held)
    at: datetime  # when it was decided
    contract: bytes  # the contract as the gate read it
    candidate: str
    head: str | None  # the queue head it was (or would have been) merged onto
    policy: PolicyState | None  # the policy it was decided under (None: not in the history)
    claim: Claim | None  # the claim as the gate read it (a landing: the one it consumed)
    verdict: Verdict | None = None  # held: the verdict recorded; a landing has none in git
    tree: str | None = None  # a landing: the tree that landed
    task_id: str | None = None
    attempt_id: str | None = None
    state: str = "landed"  # landed, held or archived
    submission: Submission | None = None

    @property
    def landed(self) -> bool:
        return self.kind == "landing"

    @property
    def legacy(self) -> bool:
        return self.verdict is not None and any(
            v.code is Code.LEGACY_SUBMISSION for v in self.verdict.violations
        )

    def describe(self) -> str:
        what = f"staging {self.key[:12]}" if self.landed else f"submission {self.key}"
        return f"{what} (task {self.task_id or '-'}, candidate {self.candidate[:12]})"


class PolicyHistory:
    """Every policy the policy ref ever held, by digest (its chain, oldest commit last)."""

    def __init__(self, canonical: Canonical) -> None:
        self.by_digest: dict[str, PolicyState] = {}
        oid = canonical.ref(refnames.POLICY)
        while oid is not None and len(self.by_digest) < WALK_LIMIT:
            try:
                state = canonical.policy_state(oid)
            except (IntegratorError, KeyError, ValueError):
                break  # a damaged old policy: the newer ones are still known
            self.by_digest.setdefault(state.digest, state)
            parents = canonical.commit(oid).parent_ids
            oid = str(parents[0]) if parents else None

    def get(self, digest: str | None) -> PolicyState | None:
        return self.by_digest.get(digest) if digest else None


class ClaimChains:
    """Each task's claim chain, read once: who consumed what, and which claim said what."""

    def __init__(self, canonical: Canonical) -> None:
        self.canonical = canonical
        self._chains: dict[str, list[tuple[str, dict[str, object]]]] = {}

    def chain(self, task: str) -> list[tuple[str, dict[str, object]]]:
        """(commit, claim.json) newest first; empty for an unknown or unreadable task."""
        found = self._chains.get(task)
        if found is None:
            try:
                found = [(c, state) for c, state, _ in claims.history(self.canonical, task)]
            except (IntegratorError, KeyError, ValueError):
                found = []
            self._chains[task] = found
        return found

    def consumed_by(self, task: str, staging: str) -> tuple[str, str | None] | None:
        """(the consuming claim commit, its parent: the claim the gate read) of `staging`."""
        for oid, state in self.chain(task):
            if state.get("state") == "consumed" and state.get("stagingCommit") == staging:
                parents = self.canonical.commit(oid).parent_ids
                return oid, str(parents[0]) if parents else None
        return None

    def claim_with(self, task: str, digest: str | None) -> Claim | None:
        """The newest claim commit of `task` holding the contract `digest` (its grants)."""
        if digest is None:
            return None
        for oid, state in self.chain(task):
            if state.get("contractDigest") == digest:
                try:
                    return self.canonical.claim_at(oid)
                except (IntegratorError, KeyError, ValueError):
                    return None
        return None


def _time(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


class Records:
    """The recorded submissions of one canonical repository, read on demand."""

    def __init__(self, canonical: Canonical) -> None:
        self.canonical = canonical
        self.policies = PolicyHistory(canonical)
        self.chains = ClaimChains(canonical)
        self._queue: list[tuple[str, datetime]] | None = None

    def queue(self) -> list[tuple[str, datetime]]:
        """(commit, commit time) along the queue's first parents, newest first (bounded)."""
        if self._queue is None:
            out: list[tuple[str, datetime]] = []
            oid = self.canonical.ref(self.canonical.queue_ref)
            while oid is not None and len(out) < WALK_LIMIT:
                commit = self.canonical.commit(oid)
                out.append((oid, _time(commit.commit_time)))
                oid = str(commit.parent_ids[0]) if commit.parent_ids else None
            self._queue = out
        return self._queue

    def head_at(self, moment: datetime) -> str | None:
        """The queue head as it stood at `moment` (the newest commit no later than it)."""
        for oid, at in self.queue():
            if at <= moment:
                return oid
        chain = self.queue()
        return chain[-1][0] if chain else None

    def landings(self, since: datetime | None = None) -> list[Recorded]:
        """Every landing on the queue decided at or after `since`, oldest first."""
        out = []
        for oid, at in self.queue():
            if since is not None and at < since:
                continue
            commit = self.canonical.commit(oid)
            found = trailers(commit.message)
            candidate = found.get(TRAILER_CANDIDATE)
            task = found.get("Integrator-Task")
            if candidate is None or task is None:
                continue  # the initial commit, or one made outside the queue
            out.append(self.landing(oid, task, candidate, found, at))
        out.reverse()
        return out

    def landing(
        self, staging: str, task: str, candidate: str, found: dict[str, str], at: datetime
    ) -> Recorded:
        commit = self.canonical.commit(staging)
        consumed = self.chains.consumed_by(task, staging)
        contract = b""
        claim = None
        if consumed is not None:
            contract = self.canonical.blob_at(consumed[0], "contract.json")
            claim = self.canonical.claim_at(consumed[1]) if consumed[1] else None
        return Recorded(
            kind="landing",
            key=staging,
            at=at,
            contract=contract,
            candidate=candidate,
            head=str(commit.parent_ids[0]) if commit.parent_ids else None,
            policy=self.policies.get(found.get("Integrator-Policy-Digest")),
            claim=claim,
            tree=str(commit.tree_id),
            task_id=task,
            attempt_id=found.get("Integrator-Attempt"),
        )

    def held(self, since: datetime | None = None) -> list[Recorded]:
        """Every held or archived submission decided at or after `since`, oldest first."""
        names: dict[str, str] = {}
        for prefix, state in ((refnames.HELD, "held"), (refnames.ARCHIVED, "archived")):
            for ref in sorted(git.refs_under(self.canonical.repo, prefix)):
                names.setdefault(ref.removeprefix(prefix), state)
        # Archived reviews folded into refs/integrator/archive/archived (`integrator refs
        # archive`) are records too: their chains are read from the archive.
        for entry in archived_entries(self.canonical, "archived"):
            names.setdefault(entry.name, "archived")
        out = []
        for sid, state in list(names.items())[:WALK_LIMIT]:
            record = self.held_one(sid, state)
            if record is not None and (since is None or record.at >= since):
                out.append(record)
        return sorted(out, key=lambda r: (r.at, r.key))

    def held_one(self, sid: str, state: str) -> Recorded | None:
        """The first record of a held submission (None when it cannot be read)."""
        chain = history(self.canonical, sid)
        if not chain:
            return None
        first, action = chain[0]
        try:
            verdict = Verdict.model_validate_json(self.canonical.blob_at(first, VERDICT_FILE))
            submission = Submission.model_validate_json(
                self.canonical.blob_at(first, SUBMISSION_FILE)
            )
        except (KeyError, ValidationError, ConfigurationError):
            return None
        return self.from_verdict(
            "held",
            sid,
            action.at,
            submission.contract_bytes(),
            submission.candidate,
            verdict,
            state=state,
            submission=submission,
        )

    def from_verdict(
        self,
        kind: Kind,
        key: str,
        at: datetime,
        contract: bytes,
        candidate: str,
        verdict: Verdict,
        *,
        state: str,
        submission: Submission | None = None,
        head: str | None = None,
    ) -> Recorded:
        """A decision known by its verdict (a held record, or one the daemon just made)."""
        task = verdict.task_id or _task_of(contract)
        claim = self.chains.claim_with(task, verdict.contract_digest) if task else None
        if kind == "landing" and verdict.staging_commit and task:
            consumed = self.chains.consumed_by(task, verdict.staging_commit)
            if consumed is not None and consumed[1]:
                claim = self.canonical.claim_at(consumed[1])
        return Recorded(
            kind=kind,
            key=key,
            at=at,
            contract=contract,
            candidate=candidate,
            head=verdict.queue_head or head or self.head_at(at),
            policy=self.policies.get(verdict.policy_digest),
            claim=claim,
            verdict=verdict,
            tree=verdict.tree if kind == "landing" else None,
            task_id=task,
            attempt_id=verdict.attempt_id,
            state=state,
            submission=submission,
        )

    def every(self, since: datetime | None = None) -> list[Recorded]:
        """Landings and held submissions together, in the order they were decided."""
        return merge_by_time(self.landings(since), self.held(since))


def merge_by_time(*groups: Iterable[Recorded]) -> list[Recorded]:
    return sorted((r for g in groups for r in g), key=lambda r: (r.at, r.kind, r.key))


def _task_of(contract: bytes) -> str | None:
    try:
        doc = jsontext.loads(contract)
    except ValueError:
        return None
    task = doc.get("taskId") if isinstance(doc, dict) else None
    return task if isinstance(task, str) else None


def parse_since(text: str, now: datetime) -> datetime:
    """`--since`: an RFC 3339 time, or a duration back from `now` (`7d`, `36h`)."""
    from integrator.clock import parse_duration, parse_timestamp

    try:
        return parse_timestamp(text)
    except ValueError:
        pass
    try:
        return now - parse_duration(text)
    except ValueError as err:
        raise ValueError(f"{text!r} is neither an RFC 3339 time nor a duration like 7d") from err


def since_option(text: str | None, now: datetime) -> datetime | None:
    """The `--since` option of `report observe` and `shadow`: None when it is not given;
    UsageError names a value that is neither a time nor a duration."""
    if not text:
        return None
    try:
        return parse_since(text, now)
    except ValueError as err:
        raise UsageError(f"--since: {err}") from err
