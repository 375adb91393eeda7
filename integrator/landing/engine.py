"""The integration engine: gate a candidate, merge it onto the queue head, land it atomically.

`Integrator.check` is the read-only gate (what `integrator gate` and CI run);
`Integrator.integrate` also merges, writes the staging commit and, in one
`git update-ref --stdin` transaction, verifies the policy ref, moves the queue ref (and the
target when it follows the queue) and consumes the claim. A stale attempt can never land:
the claim it read is part of the compare-and-swap.
"""

from __future__ import annotations

import random
import time
from collections.abc import Generator, Iterable, Iterator, Sequence
from datetime import datetime

from integrator import faults
from integrator.documents.policy import PolicyState
from integrator.documents.verdict import Code, Decision, Verdict, Violation
from integrator.errors import (
    ConfigurationError,
    QueuePausedError,
    RefLockedError,
    RefMovedError,
)
from integrator.fence.trees import TreeReader
from integrator.landing.batch import land_batch
from integrator.landing.context import LandingContext
from integrator.landing.evaluation import Complete, Evaluation, Stopped
from integrator.landing.gate import Gate
from integrator.landing.history import QueueHistory
from integrator.landing.workers import EvaluationPool, Payload
from integrator.plumbing import git
from integrator.plumbing.packs import ObjectBuffer, Repacker
from integrator.records.canonical import Canonical
from integrator.records.claims import Claims
from integrator.records.queue_control import paused

LOCK_RETRIES = 2


class Integrator:
    """Gate and land candidates against one canonical repository."""

    def __init__(
        self,
        canonical: Canonical,
        *,
        policy_override: PolicyState | None = None,
        static: bool = False,
        repacker: Repacker | None = None,
        pool: EvaluationPool | None = None,
    ) -> None:
        self.canonical = canonical
        self.pool = pool  # evaluation in worker processes (the daemon's), or none
        # Inline unless the caller runs long (the daemon's merges packs in a child process).
        self.repacker = repacker or Repacker(background=False)
        self.repo = canonical.repo
        objects = ObjectBuffer(canonical.repo)
        trees = TreeReader(canonical.repo, objects.read)
        history = QueueHistory(canonical)
        self.gate = Gate(canonical, history, trees, policy_override=policy_override, static=static)
        self.landing = LandingContext(
            canonical=canonical,
            objects=objects,
            trees=trees,
            claims=Claims(canonical),
            history=history,
            durable=git.durable(canonical.repo),
        )

    def reload_policy(self) -> None:
        """Forget cached policy and claim documents (after SIGHUP or `policy set`)."""
        self.canonical.forget_documents()

    def candidate_problem(self, candidate: str) -> str | None:
        """Why `candidate` cannot be judged here (absent, or not a commit), None when it
        can: the daemon rejects such a submission instead of fencing it, since nothing of
        its ownership was judged."""
        kind = git.object_kind(self.canonical.repo, candidate, strict=True)
        if kind == "commit":
            return None
        where = "is not in the repository the daemon reads" if kind is None else f"is a {kind}"
        return (
            f"the candidate {candidate} {where}: push the candidate commit where the daemon "
            "reads it, or submit with --bundle"
        )

    # -- the read-only gate -----------------------------------------------------------------

    def check(self, contract_data: bytes, candidate: str) -> Verdict:
        return self.evaluate(contract_data, candidate).verdict

    def evaluate(
        self, contract_data: bytes, candidate: str, *, now: datetime | None = None
    ) -> Evaluation:
        """Every check of the gate, cheapest first (see `integrator.landing.gate`)."""
        return self.gate.evaluate(contract_data, candidate, now=now)

    # -- landing ------------------------------------------------------------------------------

    def integrate(self, contract_data: bytes, candidate: str) -> Verdict:
        """Gate, merge, write the staging commit, and land it in one ref transaction."""
        return self.integrate_many([(contract_data, candidate)])[0]

    def integrate_many(self, items: Sequence[tuple[bytes, str]]) -> list[Verdict]:
        """Integrate several candidates, in order, landing all that pass in one transaction.

        Each candidate is gated on its own and merged onto the queue head as left by the
        ones before it; every landing's claim is verified and consumed in the same
        `update-ref` transaction that moves the queue to the last staging commit. If a ref
        moved underneath, the batch is planned again from the new refs (bounded). A
        view the daemon fetched for this batch is read as it is (`Canonical.refresh`).
        """
        self.canonical.refresh(reuse=True)
        if not self.canonical.initialized:
            raise ConfigurationError(
                f"{self.canonical.path} is not prepared for integration; run integrator init"
            )
        if self.canonical.rolled_back is not None:
            raise ConfigurationError(self.canonical.rolled_back)
        control = paused(self.canonical)
        if control is not None:
            raise QueuePausedError(
                f"landings on {self.canonical.target} are paused by {control.actor} since "
                f"{control.at.isoformat()}: {control.reason or 'no reason given'} "
                "(integrator queue resume)"
            )
        if self.canonical.policy_state().policy.integration.target_follows_queue:
            # A landing that would be refused for a checkout of the target is refused
            # before anything is evaluated or written; the transaction checks again.
            self.canonical.hold_for_checkout()
        results: list[Verdict | None] = [None] * len(items)
        pending: list[tuple[int, Complete]] = []

        def accepted() -> Generator[Complete, None, None]:
            """Each evaluation as it is known; the landing plans one while others are made."""
            for index, evaluation in enumerate(self._evaluations(items)):
                if (
                    isinstance(evaluation, Complete)
                    and evaluation.accepted
                    and not evaluation.verdict.recovered
                ):
                    if not pending:
                        faults.point("after-check")
                    pending.append((index, evaluation))
                    yield evaluation
                else:
                    results[index] = evaluation.verdict

        stream = accepted()
        try:
            self._land(stream, pending, results)
        finally:
            stream.close()  # a landing that raised: the workers' state is released now
        self.repacker.poke(self.repo)
        assert all(v is not None for v in results)
        return [v for v in results if v is not None]

    def _evaluations(self, items: Sequence[tuple[bytes, str]]) -> Iterator[Evaluation]:
        if self.pool is None:
            return (self.evaluate(data, candidate) for data, candidate in items)
        return self.pool.evaluations(
            items,
            now=self.canonical.clock(),
            rewritten=self.canonical.rewritten,
            local=self.evaluate,
            rebuild=self._rebuild,
        )

    def _rebuild(self, payload: Stopped | Payload) -> Evaluation:
        """A worker's evaluation with this process's commit and policy objects."""
        if isinstance(payload, Stopped):
            return payload
        canonical = self.canonical
        policy = payload.policy
        if policy is None:  # sent by its ref value
            policy = canonical.policy_state(payload.policy_oid)
        return Complete(
            verdict=payload.verdict,
            data=payload.data,
            contract=payload.contract,
            candidate=canonical.commit(payload.candidate),
            base=canonical.commit(payload.base),
            diff=payload.diff,
            claim=payload.claim,
            policy=policy,
            policy_oid=payload.policy_oid,
            resources=payload.resources,
            violations=payload.violations,
        )

    def _land(
        self,
        first: Iterable[Complete],
        pending: list[tuple[int, Complete]],
        results: list[Verdict | None],
    ) -> None:
        """Land the accepted evaluations `first` yields (each recorded in `pending` as it
        is), re-planning after a lost compare-and-swap (bounded)."""
        attempt = 0
        locked = 0
        batch: Iterable[Complete] = first
        while True:
            try:
                outcome = land_batch(self.landing, batch)
            except RefLockedError:
                # Contention with a live integrator usually clears within git's own lock
                # timeout; a lock that outlives a few more tries is reported, never deleted.
                batch = [ev for _, ev in pending]
                locked += 1
                if locked > LOCK_RETRIES:
                    raise
                time.sleep(random.uniform(0.05, 0.2))
                continue
            # Someone landed first, or an evaluation saw a newer policy than the batch
            # read: the next round re-reads every ref. If only the queue (and the target
            # following it) advanced, it merges again; if a claim or the policy moved,
            # that candidate is fenced with REF_MOVED naming the ref.
            still: list[tuple[int, Complete]] = []
            for (index, ev), verdict in zip(pending, outcome.verdicts, strict=True):
                if verdict is None:
                    still.append((index, ev))
                else:
                    results[index] = verdict
            pending = still
            if not pending:
                return
            attempt += 1
            if attempt > self._retries(pending):
                assert outcome.moved is not None  # land_batch says why any must wait
                for index, ev in pending:
                    results[index] = self._ref_moved(ev, outcome.moved, attempt)
                return
            batch = [ev for _, ev in pending]

    @staticmethod
    def _retries(pending: Sequence[tuple[int, Complete]]) -> int:
        return pending[0][1].policy.policy.integration.queue_retries if pending else 0

    def _ref_moved(self, evaluation: Complete, moved: RefMovedError, attempts: int) -> Verdict:
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
