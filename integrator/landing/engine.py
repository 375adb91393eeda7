"""The integration engine: gate a candidate, merge it onto the queue head, land it atomically.

`Integrator.check` is the read-only gate (what `integrator gate` and CI run);
`Integrator.integrate` also merges, writes the staging commit and, in one
`git update-ref --stdin` transaction, verifies the policy ref, moves the queue ref (and the
target when it follows the queue) and consumes the claim. A stale attempt can never land:
the claim it read is part of the compare-and-swap.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pygit2

from integrator import faults
from integrator.documents.contract import OwnershipContract, parse_contract
from integrator.documents.policy import PolicyState
from integrator.documents.verdict import Code, Decision, ResourceUse, Verdict, Violation
from integrator.errors import ConfigurationError, ContractError, RefLockedError, RefMovedError
from integrator.fence import checks
from integrator.fence.diff import RecomputedDiff, recompute
from integrator.fence.trees import MalformedTree, TreeReader
from integrator.landing.batch import HEAD_SETTLE, land_batch
from integrator.repo import git
from integrator.repo.canonical import Canonical, Claim
from integrator.repo.claims import Claims
from integrator.repo.packs import ObjectBuffer, maybe_repack

TRAILER_CANDIDATE = "Integrator-Candidate"
LOCK_RETRIES = 2


@dataclass
class Evaluation:
    """What the read-only gate established; enough to merge and land without re-reading."""

    verdict: Verdict
    data: bytes = b""
    contract: OwnershipContract | None = None
    candidate: pygit2.Commit | None = None
    base: pygit2.Commit | None = None
    diff: RecomputedDiff | None = None
    claim: Claim | None = None
    policy: PolicyState | None = None
    policy_oid: str | None = None
    resources: tuple[ResourceUse, ...] = ()
    violations: tuple[Violation, ...] = ()

    @property
    def accepted(self) -> bool:
        return self.verdict.decision is Decision.ACCEPTED

    def with_violations(
        self, extra: Sequence[Violation], *, decision: Decision | None = None, **fields: Any
    ) -> Verdict:
        """This evaluation's verdict with more violations and fields (landing results)."""
        assert self.policy is not None
        return checks.make_verdict(
            self.contract,
            [*self.violations, *extra],
            candidate=self.verdict.candidate,
            policy_digest=self.policy.digest,
            resources=self.resources,
            diff=self.diff,
            decision=decision,
            **fields,
        )


def _invalid(detail: str, candidate: str, policy_digest: str | None) -> Verdict:
    return checks.make_verdict(
        None,
        [Violation(code=Code.CONTRACT_INVALID, detail=detail)],
        candidate=candidate,
        policy_digest=policy_digest,
    )


def _legacy(data: bytes) -> bool:
    """A JSON object that looks like a contract but carries no ownership generation."""
    try:
        doc = json.loads(data)
    except ValueError:
        return False
    return isinstance(doc, dict) and "taskId" in doc and "ownershipGeneration" not in doc


def trailers(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in message.splitlines():
        key, sep, value = line.partition(": ")
        if sep and key.startswith("Integrator-"):
            out[key] = value.strip()
    return out


class Integrator:
    """Gate and land candidates against one canonical repository."""

    def __init__(self, canonical: Canonical, *, policy_override: PolicyState | None = None) -> None:
        self.canonical = canonical
        self.repo = canonical.repo
        self.policy_override = policy_override
        self.claims = Claims(canonical)
        self.durable = git.durable(canonical.repo)
        self.objects = ObjectBuffer(canonical.repo)
        self.trees = TreeReader(canonical.repo, self.objects.read)
        # Commits known to be on the queue's first-parent chain: a base found here needs
        # no merge-base computation (the common case: agents start from a queue head).
        self._queue_chain: set[str] = set()
        self._queue_tip: str | None = None

    def reload_policy(self) -> None:
        """Forget cached policy and claim documents (after SIGHUP or `policy set`)."""
        self.canonical._policies.clear()
        self.canonical._claims.clear()

    # -- the read-only gate -----------------------------------------------------------------

    def check(self, contract_data: bytes, candidate: str) -> Verdict:
        return self.evaluate(contract_data, candidate).verdict

    def evaluate(
        self, contract_data: bytes, candidate: str, *, now: datetime | None = None
    ) -> Evaluation:
        """Checks 1–5 of DESIGN.md, cheapest first; stops at the first failing stage."""
        canonical = self.canonical
        now = now or canonical.clock()
        live = self.policy_override is None and canonical.initialized
        policy_oid = canonical.ref(git.POLICY_REF) if live else None
        policy = self.policy_override or canonical.policy_state(policy_oid)
        try:
            contract = parse_contract(contract_data)
        except ContractError as err:
            if _legacy(contract_data):
                verdict = checks.make_verdict(
                    None,
                    [
                        Violation(
                            code=Code.LEGACY_SUBMISSION,
                            detail="the submission carries no ownership generation; "
                            "it may only be reviewed, never landed automatically",
                        )
                    ],
                    candidate=candidate,
                    policy_digest=policy.digest,
                )
                return Evaluation(verdict)
            return Evaluation(_invalid("; ".join(err.errors) or str(err), candidate, policy.digest))

        # A shallow clone without a configured id cannot prove the repository: every
        # verdict here then carries REPO_UNVERIFIED (review), whatever else it says.
        unverified = checks.check_identity_known(canonical.identity)

        def done(violations: list[Violation], **extra: Any) -> Evaluation:
            extra.setdefault("candidate", candidate)
            return Evaluation(
                checks.make_verdict(
                    contract, [*violations, *unverified], policy_digest=policy.digest, **extra
                ),
                contract=contract,
            )

        violations = checks.check_identity(contract, canonical.identity)
        if violations:
            return done(violations)
        claim: Claim | None = None
        if live or canonical.has_claims():
            claim = canonical.claim(contract.task_id)
            violations = checks.check_live(
                contract, claim.view if claim else None, policy.digest, now
            )
            if claim is not None and claim.view.state == "consumed":
                earlier = self.earlier_landing(contract, claim, candidate)
                if earlier is not None:
                    return Evaluation(earlier, contract=contract, claim=claim)
        else:
            violations = checks.check_static_lease(contract, now)
        if violations:
            return done(violations)
        cand = self._commit(candidate)
        if cand is None:
            return done(
                [Violation(code=Code.CANDIDATE_MISSING, detail=f"{candidate} is not a commit here")]
            )
        base_present = git.has_object(self.repo, contract.base_commit)
        base_is_ancestor = base_present and self._is_ancestor(contract.base_commit, cand)
        violations = checks.check_history(
            base=contract.base_commit,
            base_present=base_present,
            base_is_ancestor=base_is_ancestor,
            shallow=self.repo.is_shallow,
        )
        if violations:
            return done(violations, candidate=str(cand.id))
        base = self._commit(contract.base_commit)
        assert base is not None
        try:
            diff = recompute(
                self.repo,
                base.tree,
                cand.tree,
                rename_limit=policy.policy.integration.rename_limit,
                reader=self.trees,
            )
        except MalformedTree as err:
            return done(
                [Violation(code=Code.UNSAFE_PATH, detail=f"{err}; git fsck would reject it")],
                candidate=str(cand.id),
            )
        violations, resources = checks.check_diff(contract, diff, policy.policy)
        violations.extend(unverified)
        verdict = checks.make_verdict(
            contract,
            violations,
            candidate=str(cand.id),
            policy_digest=policy.digest,
            resources=resources,
            diff=diff,
        )
        return Evaluation(
            verdict,
            data=contract_data,
            contract=contract,
            candidate=cand,
            base=base,
            diff=diff,
            claim=claim,
            policy=policy,
            policy_oid=policy_oid,
            resources=tuple(resources),
            violations=tuple(violations),
        )

    def _is_ancestor(self, base: str, commit: pygit2.Commit) -> bool:
        """Whether `base` is `commit` or one of its ancestors (cheap when it is a parent)."""
        if str(commit.id) == base or any(str(p) == base for p in commit.parent_ids):
            return True
        return bool(self.repo.descendant_of(commit.id, pygit2.Oid(hex=base)))

    def on_queue(self, base: str, head: pygit2.Commit) -> bool:
        """Whether `base` is an ancestor of (or equal to) the queue head `head`."""
        tip = str(head.id)
        if tip != self._queue_tip:
            # Walk the first-parent chain back to the part already known. The cache holds
            # the chain of the previous tip: reaching that tip means the queue only moved
            # forward; reaching any other known commit means it was moved back or rewritten
            # (by hand), and what the cache holds past that point is no longer on it.
            walked, joined = self._first_parents(head, self._queue_chain)
            if joined != self._queue_tip:
                walked, _ = self._first_parents(head, set())
                self._queue_chain.clear()
            if len(self._queue_chain) > 1_000_000:
                self._queue_chain.clear()
            self._queue_chain.update(walked)
            self._queue_tip = tip
        if base in self._queue_chain:
            return True
        return self._is_ancestor(base, head)

    def _first_parents(
        self, head: pygit2.Commit, known: set[str], limit: int = 10_000
    ) -> tuple[list[str], str | None]:
        """First-parent ids from `head` back to the first in `known` (returned apart)."""
        walked: list[str] = []
        commit: pygit2.Commit | None = head
        while commit is not None and len(walked) < limit:
            oid = str(commit.id)
            if oid in known:
                return walked, oid
            walked.append(oid)
            parents = commit.parent_ids
            nxt = self.repo.get(parents[0]) if parents else None
            commit = nxt if isinstance(nxt, pygit2.Commit) else None
        return walked, None

    def _commit(self, rev: str) -> pygit2.Commit | None:
        try:
            obj = self.repo.revparse_single(rev)
            commit = obj.peel(pygit2.Commit)
        except (KeyError, ValueError, pygit2.GitError):
            return None
        return commit if isinstance(commit, pygit2.Commit) else None

    def earlier_landing(
        self, contract: OwnershipContract, claim: Claim, candidate: str
    ) -> Verdict | None:
        """The ACCEPTED verdict of a landing that already happened for this candidate.

        Only when `claim` was consumed by this very candidate under this very contract:
        the same commit under another generation's contract is not the same landing.
        """
        staging = claim.view.staging_commit
        if staging is None or claim.view.candidate is None:
            return None
        if claim.view.contract_digest != contract.digest:
            return None
        cand = self._commit(candidate)
        if cand is None or str(cand.id) != claim.view.candidate:
            return None
        commit = self._commit(staging)
        if commit is None or trailers(commit.message).get(TRAILER_CANDIDATE) != str(cand.id):
            return None
        # A landing the queue no longer holds (moved back by hand) is not a landing to
        # report: the claim stays consumed, and the live checks say so. Another
        # integrator's transaction renames the claim ref before the queue ref, so a queue
        # that does not hold it yet is read again before it is believed.
        for pause in (0.0, *HEAD_SETTLE):
            time.sleep(pause)
            queue = self.canonical.ref(self.canonical.queue_ref)
            if queue is not None and self.on_queue(staging, self.canonical.commit(queue)):
                break
        else:
            return None
        return checks.recovered_verdict(contract, str(cand.id), str(commit.tree_id), staging)

    # -- landing ------------------------------------------------------------------------------

    def integrate(self, contract_data: bytes, candidate: str) -> Verdict:
        """Gate, merge, write the staging commit, and land it in one ref transaction."""
        return self.integrate_many([(contract_data, candidate)])[0]

    def integrate_many(self, items: Sequence[tuple[bytes, str]]) -> list[Verdict]:
        """Integrate several candidates, in order, landing all that pass in one transaction.

        Each candidate is gated on its own and merged onto the queue head as left by the
        ones before it; every landing's claim is verified and consumed in the same
        `update-ref` transaction that moves the queue to the last staging commit. If a ref
        moved underneath, the batch is planned again from the new refs (bounded).
        """
        if not self.canonical.initialized:
            raise ConfigurationError(
                f"{self.canonical.path} is not prepared for integration; run integrator init"
            )
        results: list[Verdict | None] = [None] * len(items)
        pending: list[tuple[int, Evaluation]] = []
        for index, (data, candidate) in enumerate(items):
            evaluation = self.evaluate(data, candidate)
            if evaluation.accepted and not evaluation.verdict.recovered:
                pending.append((index, evaluation))
            else:
                results[index] = evaluation.verdict
        if pending:
            faults.point("after-check")
        attempt = 0
        locked = 0
        while pending:
            try:
                outcome = land_batch(self, [ev for _, ev in pending])
            except RefLockedError:
                # Contention with a live integrator usually clears within git's own lock
                # timeout; a lock that outlives a few more tries is reported, never deleted.
                locked += 1
                if locked > LOCK_RETRIES:
                    raise
                time.sleep(random.uniform(0.05, 0.2))
                continue
            if outcome.moved is None:
                for (index, _), verdict in zip(pending, outcome.verdicts, strict=True):
                    results[index] = verdict
                break
            # Someone landed first. The next round re-reads every ref: if only the queue
            # (and the target following it) advanced, it merges again; if a claim or the
            # policy moved, that candidate is fenced with REF_MOVED naming the ref.
            attempt += 1
            still: list[tuple[int, Evaluation]] = []
            for (index, ev), verdict in zip(pending, outcome.verdicts, strict=True):
                if verdict is None:
                    still.append((index, ev))
                else:
                    results[index] = verdict
            pending = still
            retries = self._retries(pending)
            if attempt > retries:
                for index, ev in pending:
                    results[index] = self._ref_moved(ev, outcome.moved, attempt)
                break
        maybe_repack(self.repo)
        assert all(v is not None for v in results)
        return [v for v in results if v is not None]

    @staticmethod
    def _retries(pending: Sequence[tuple[int, Evaluation]]) -> int:
        policies = [ev.policy for _, ev in pending if ev.policy is not None]
        return policies[0].policy.integration.queue_retries if policies else 0

    def _ref_moved(self, evaluation: Evaluation, moved: RefMovedError, attempts: int) -> Verdict:
        contract = evaluation.contract
        assert contract is not None
        assert evaluation.policy is not None
        detail = f"{moved}"
        if moved.ref == self.canonical.queue_ref:
            detail += f" after {attempts} attempts"
        violations = [Violation(code=Code.REF_MOVED, resource=moved.ref, detail=detail)]
        # Say why the claim or policy moved, when the live checks can tell.
        again = self.evaluate(evaluation.data, str(evaluation.verdict.candidate))
        if again.verdict.recovered:
            return again.verdict  # another integrator landed this very candidate meanwhile
        violations.extend(v for v in again.verdict.violations if v.code is not Code.REF_MOVED)
        return evaluation.with_violations(violations, decision=Decision.FENCED)
