"""The promoter: validate queue heads, move the target to those that pass, eject culprits.

One `round` reads the queue between the target and its head and the results known, asks
the pure `next_step` what to do, and does one kind of thing:

- **promote**: one transaction moves `refs/heads/<target>` from the value read to the
  newest passing head (a fast-forward along the queue's first-parent chain), appends a
  record to `refs/integrator/promotion/<target>` (its lease serializes promoters) and
  deletes the validation refs of the heads now promoted (their results stay reachable from
  the record);
- **eject**: the first landing whose head failed (right after a passing one) is taken
  out: the later landings are re-merged onto the last good head (each proven again), and
  one transaction moves the queue from the head read to the rebuilt one, appends the
  record, creates `refs/integrator/ejected/<target>/<landing>` for each landing taken out
  and deletes the validation refs of the heads that left the queue. A landing that arrived
  meanwhile makes the queue's compare-and-swap fail: the next round rebuilds again;
- **validate**: run the command on the heads asked for (or, external mode, request them).

Every ref move is a compare-and-swap through the canonical repository's updater: a local
`update-ref` transaction, or in remote mode one atomic push with a lease per ref.
"""

from __future__ import annotations

import threading
from pathlib import Path

import structlog

from integrator import faults
from integrator.documents.policy import Validation
from integrator.documents.promotion import (
    Covered,
    Ejected,
    EjectionRecord,
    PromotionRecord,
    ValidationResult,
)
from integrator.documents.verdict import Code
from integrator.errors import ConfigurationError, IntegratorError, RefMovedError
from integrator.landing.engine import Integrator
from integrator.plumbing import git, transaction
from integrator.promotion import linger, validate
from integrator.promotion import scratch as scratch_folders
from integrator.promotion.bisect import Step, next_step
from integrator.promotion.metrics import PromotionMetrics
from integrator.promotion.rebuild import rebuild
from integrator.promotion.rounds import RECENT, Round, lingering
from integrator.promotion.runner import RunOutcome
from integrator.promotion.scoped import Memo
from integrator.promotion.scoped_round import scoped_round
from integrator.promotion.scopes import next_window
from integrator.promotion.state import QueueState, read_state
from integrator.records import validation_cache, validations
from integrator.records.canonical import Canonical

log = structlog.get_logger("integrator.promote")
PRUNE_EVERY = 64  # promotions between two prunings of the result cache


class Promoter:
    """Promotion for one canonical repository's target (one thread uses it)."""

    def __init__(
        self,
        canonical: Canonical,
        *,
        metrics: PromotionMetrics | None = None,
        scratch: Path | None = None,
    ) -> None:
        self.canonical = canonical
        self.landing = Integrator(canonical).landing
        self.metrics = metrics or PromotionMetrics()
        self.scratch = scratch
        swept = scratch_folders.sweep(scratch)  # checkouts of promoters that died
        if swept:
            log.info("promote.swept", folders=len(swept), where=str(swept[0].parent))
        self.runs = 0  # command runs by this promoter
        self.flaky = 0  # final passes after failed runs (flaky_reruns)
        self.cache_hits = 0  # heads decided by a result of the same key
        self.rounds: list[Round] = []
        self._lingering: str | None = None  # the end of the hold last logged
        self._probes = 0  # validations since the last ejection or full promotion
        self.windows: dict[str | None, int] = {}  # adaptive: each scope's window now
        self.recent: dict[str | None, list[bool]] = {}  # each scope's latest final results
        self._failed_before: set[tuple[int, str | None]] = set()
        self.memo = Memo()
        self._promotions = 0
        self._ejected: dict[
            str, str | None
        ] = {}  # ejection record → its candidate (VALIDATION_FAILED)
        self._flaky_scopes: set[str | None] = set()  # scopes with a flaky run since an ejection
        self._hits: set[tuple[str, str | None]] = set()

    def config(self) -> Validation | None:
        return self.canonical.policy_state().policy.validation

    # -- one round --------------------------------------------------------------------------

    def round(self) -> Round:
        """One step of promotion (reads everything fresh)."""
        canonical = self.canonical
        canonical.refresh()
        if canonical.rolled_back is not None:  # nothing promoted onto a head forced back
            raise ConfigurationError(canonical.rolled_back)
        config = self.config()
        if config is None:
            return self._done(Round("idle", False, {"why": "the policy has no [validation]"}))
        state = read_state(canonical)
        self.metrics.unpromoted.set(state.pending)
        self.metrics.promoted_at(canonical.commit(state.promoted).commit_time)
        try:
            settled = validations.settled_refs(canonical, state.target, state.promoted, state.queue)
            if settled:  # records of heads already promoted, left by a promoter cut short
                canonical.updater.apply([transaction.delete(r, o) for r, o in settled.items()])
                log.info("promote.swept", refs=len(settled))
            return self._done(self._decide(state, config))
        except RefMovedError as moved:
            log.info("promote.contended", ref=moved.ref, error=str(moved))
            return self._done(Round("contended", True, {"ref": moved.ref}))

    def _decide(self, state: QueueState, config: Validation) -> Round:
        if config.scope and config.mode == "command":
            return scoped_round(self, state, config)
        if config.mode == "command":
            self._cached(state, config)
        known = state.final(provisional=config.flaky_reruns > 0)
        step = next_step(
            state.pending, known, max_batch=self.window(None, config),
            concurrency=config.concurrency,
        )  # fmt: skip
        if step.promote is not None:
            return self._promote(state, step.promote)
        if step.eject is not None:
            failing = state.results.get(state.landings[step.eject - 1].staging)
            if failing is not None and validate.provisional(failing[1], config):
                return self.confirm(state, step.eject, None, failing[1], config)
            return self._eject(state, step.eject)
        if not step.validate:
            return Round("idle", False, {"pending": state.pending})
        window = self.window(None, config)
        until = linger.queue_hold(self.canonical, state.landings, known, window, config.linger)
        return self._validate(state, step, config) if until is None else lingering({None: until})

    def window(self, scope: str | None, config: Validation) -> int:
        """The landings one validation of `scope` covers now (max_batch unless adaptive)."""
        if not config.adaptive:
            return config.max_batch
        return self.windows.setdefault(scope, max(1, config.max_batch // 2))

    def _cached(self, state: QueueState, config: Validation) -> None:
        """Heads with no result of their own take one of the same tree from the cache."""
        fails_after = validation_cache.last_ejection(self.canonical, state.target)
        for landing in state.landings:
            if landing.staging in state.results and state.results[landing.staging][1].final:
                continue
            hit = validation_cache.lookup(
                self.canonical, state.target, self._key(landing.staging, config),
                fails_after=fails_after,
            )  # fmt: skip
            if hit is not None:
                state.results[landing.staging] = hit
                self.hit(landing.staging, None)

    def hit(self, head: str, scope: str | None) -> None:
        """Count a head decided by the cache (once per head and scope)."""
        if (head, scope) in self._hits:
            return
        if len(self._hits) > 100_000:
            self._hits.clear()
        self._hits.add((head, scope))
        self.cache_hits += 1
        self.metrics.cache_hits.labels(scope or "").inc()

    def _key(self, head: str, config: Validation) -> str:
        tree = str(self.canonical.commit(head).tree_id)
        return validation_cache.key_of(tree, None, config.command, config.toolchain)

    def _done(self, result: Round) -> Round:
        at = str(result.detail["at"]) if result.action == "linger" else None
        if at is not None and at != self._lingering:
            # Said once per hold (a running promoter asks again at every poll).
            log.info("promote.linger", until=at, scopes=result.detail["scopes"])
        self._lingering = at
        self.rounds.append(result)
        if len(self.rounds) > 1000:
            del self.rounds[:500]
        return result

    def _validate(self, state: QueueState, step: Step, config: Validation) -> Round:
        if config.mode == "external":
            wanted, changed = validate.request_heads(self.canonical, state, step.validate, config)
            waiting = [r.head for r in wanted]
            return Round("request" if changed else "wait", changed, {"waiting": waiting})
        probing = False in state.final(provisional=config.flaky_reruns > 0).values()
        jobs = [
            validate.Job(i, None, self._key(state.head(i), config), probe=probing)
            for i in step.validate
        ]
        recorded = validate.run_heads(
            self.canonical, state, jobs, config, scratch=self.scratch,
            on_run=self._count, bisecting=False in state.final().values(),
        )  # fmt: skip
        self._probes += len(step.validate)
        finals = {r.head: r.final.status for r in recorded if r.final is not None}
        return Round("validate" if recorded else "wait", bool(recorded), {"results": finals})

    def count_run(self, job: validate.Job, outcome: RunOutcome, final: bool) -> None:
        self._count(job, outcome, final)

    def confirm(
        self,
        state: QueueState,
        index: int,
        scope: str | None,
        result: ValidationResult,
        config: Validation,
    ) -> Round:
        """Rerun a probe's provisional failure of head `index` before it ejects anything."""
        key = result.key or (self._key(state.head(index), config) if scope is None else None)
        job = validate.Job(index, scope, key, probe=result.probe, confirm=result.attempt)
        recorded = validate.run_heads(
            self.canonical, state, [job], config, scratch=self.scratch, on_run=self._count,
            bisecting=True,
        )  # fmt: skip
        finals = {r.head: r.final.status for r in recorded if r.final is not None}
        return Round("confirm" if recorded else "wait", bool(recorded), {"results": finals})

    def _count(self, job: validate.Job, outcome: RunOutcome, final: bool) -> None:
        self.runs += 1
        label = job.scope or ""
        self.metrics.runs.inc()
        self.metrics.results.labels("pass" if outcome.passed else "fail").inc()
        self.metrics.ci_seconds.labels(label).inc(outcome.duration_s)
        if not outcome.passed and not final:
            self.metrics.retried.inc()
            last = (job.probe or job.provisional) and _retries(self) == 0
            if not last:  # a provisional failure's rerun is a job of its own (confirm)
                self._failed_before.add((job.index, job.scope))
        if final:
            before = job.confirm > 0 or (job.index, job.scope) in self._failed_before
            flaky = outcome.passed and before
            self._failed_before.discard((job.index, job.scope))
            config = self.config()
            if flaky and config is not None and config.flaky_reruns:
                self._flaky_scopes.add(job.scope)  # for the ejection that ends this bisection
                self.flaky += 1
                self.metrics.flaky.labels(label).inc()
            recent = self.recent.setdefault(job.scope, [])
            recent.append(outcome.passed)
            del recent[:-RECENT]
            if config is not None and config.adaptive and not job.probe:
                now = self.window(job.scope, config)
                self.windows[job.scope] = next_window(now, outcome.passed, config.max_batch)

    # -- promote ----------------------------------------------------------------------------

    def promote_to(self, state: QueueState, index: int, rests_on: list[str]) -> Round:
        """Move the target to head `index`, recording the result commits it rests on."""
        return self._promote(state, index, rests_on)

    def _promote(self, state: QueueState, index: int, rests_on: list[str] | None = None) -> Round:
        canonical = self.canonical
        target_ref = canonical.target_ref
        new = state.head(index)
        landings = state.covering(index)
        results = [state.results[c.staging] for c in landings if c.staging in state.results]
        record = PromotionRecord(
            action="promote", target=state.target, at=canonical.clock(), actor=validate.actor(),
            before=state.promoted, after=new, landings=landings,
            validations=rests_on if rests_on is not None else [commit for commit, _ in results],
        )  # fmt: skip
        ref = validations.promotion_ref(state.target)
        old_record = state.record  # the lease: nothing promoted or ejected since the read
        commit = validations.write_promotion(canonical, record, old_record)
        ops = [
            transaction.update(target_ref, new, state.promoted),
            transaction.update(ref, commit, old_record),
            *(
                transaction.delete(validations.validation_ref(state.target, c.staging), oid)
                for c in landings
                for oid in [canonical.ref(validations.validation_ref(state.target, c.staging))]
                if oid is not None
            ),
            *self._scoped_deletes(state, landings),
        ]
        self._apply(ops, "before-promote")
        now = canonical.clock().timestamp()
        for c in landings:
            self.metrics.time_to_promote(now - canonical.commit(c.staging).commit_time)
        self.metrics.batch.observe(len(landings))
        self.metrics.innocent.inc(self._innocent(state.target, landings))
        self.metrics.promotions.inc()
        self.metrics.promoted_at(canonical.commit(new).commit_time)
        if index == state.pending:
            self._probes = 0
        self._promotions += 1
        if self._promotions % PRUNE_EVERY == 0:
            validation_cache.prune(canonical, state.target)
        log.info(
            "promote.promoted", target=target_ref, before=state.promoted, after=new,
            landings=len(landings), record=commit,
        )  # fmt: skip
        return Round("promote", True, {"before": state.promoted, "after": new,
                                       "landings": len(landings)})  # fmt: skip

    def _innocent(self, target: str, landings: list[Covered]) -> int:
        """How many of `landings` carry a candidate an earlier VALIDATION_FAILED ejection
        took out (each ejection record read once)."""
        canonical = self.canonical
        for landing, oid in validations.ejections(canonical, target).items():
            if oid not in self._ejected:
                found = validations.read_ejection(canonical, target, landing)
                failed = found is not None and found.ejected.code is Code.VALIDATION_FAILED
                self._ejected[oid] = found.ejected.candidate if failed and found else None
        ejected = {c for c in self._ejected.values() if c}
        return sum(1 for c in landings if c.candidate in ejected)

    def _scoped_deletes(
        self, state: QueueState, landings: list[Covered]
    ) -> list[transaction.RefOp]:
        """Deleting every scope's result refs of these heads (their results stay in the
        cache and reachable from the record)."""
        heads = {c.staging for c in landings}
        found = validations.scoped_refs(self.canonical, state.target, heads)
        return [transaction.delete(ref, oid) for ref, oid in found.items()]

    def apply(self, ops: list[transaction.RefOp], point: str) -> None:
        self._apply(ops, point)

    def _apply(self, ops: list[transaction.RefOp], point: str) -> None:
        if git.durable(self.canonical.repo):
            git.sync_objects(self.canonical.repo)
        faults.point(point)
        self.canonical.updater.apply(ops)

    # -- eject ------------------------------------------------------------------------------

    def eject_at(
        self,
        state: QueueState,
        index: int,
        failing: tuple[str, ValidationResult] | None,
        flaky_seen: bool,
        rests_on: list[str],
    ) -> Round:
        """Eject landing `index`, whose scope's result `failing` is the evidence."""
        return self._eject(state, index, failing, flaky_seen, rests_on)

    def _eject(
        self,
        state: QueueState,
        index: int,
        failing: tuple[str, ValidationResult] | None = None,
        flaky_seen: bool | None = None,
        rests_on: list[str] | None = None,
    ) -> Round:
        canonical = self.canonical
        culprit = state.landings[index - 1]
        failing = failing or state.results.get(culprit.staging)
        if flaky_seen is None:
            flaky_seen = any(r.flaky for _, r in state.results.values())
        scope = failing[1].scope if failing else None
        flaky_seen = flaky_seen or scope in self._flaky_scopes
        self._flaky_scopes.discard(scope)
        good = state.head(index - 1)
        log_bytes = validations.log_of(canonical, failing[0]) if failing else b""
        detail = _failure_detail(failing[1] if failing else None, log_bytes)
        runs_failed = (
            sum(1 for _, r in validations.chain(canonical, failing[0]) if r.status == "fail")
            if failing else None
        )  # fmt: skip
        first = validate_ejected(culprit, failing[0] if failing else None, detail).model_copy(
            update={
                "scope": failing[1].scope if failing else None, "failed_runs": runs_failed,
                "flaky_seen": flaky_seen,
            }
        )  # fmt: skip
        built = rebuild(self.landing, good, state.landings[index:], {culprit.landing})
        ejected = [first, *built.ejected]
        now = canonical.clock()
        depth = self._probes
        record = PromotionRecord(
            action="eject", target=state.target, at=now, actor=validate.actor(),
            before=state.queue, after=built.head,
            validations=rests_on if rests_on is not None
            else [commit for commit, _ in state.results.values()],
            ejected=ejected, rebuilt=built.rebuilt, depth=depth,
        )  # fmt: skip
        ref = validations.promotion_ref(state.target)
        old_record = state.record  # the lease: nothing promoted or ejected since the read
        commit = validations.write_promotion(canonical, record, old_record)
        ops = [
            transaction.update(canonical.queue_ref, built.head, state.queue),
            transaction.update(ref, commit, old_record),
        ]
        for item in ejected:
            evidence = EjectionRecord(
                target=state.target, at=now, ejected=item, good=good,
                failing=culprit.staging if item is first else None,
            )  # fmt: skip
            evidence_oid = validations.write_ejection(
                canonical, evidence, log_bytes if item is first else None
            )
            ref_name = validations.ejected_ref(state.target, item.landing)
            ops.append(transaction.update(ref_name, evidence_oid, canonical.ref(ref_name)))
        for landing in state.landings[index - 1 :]:
            name = validations.validation_ref(state.target, landing.staging)
            old = canonical.ref(name)
            if old is not None:
                ops.append(transaction.delete(name, old))
        ops += self._scoped_deletes(state, state.landings[index - 1 :])
        self._apply(ops, "before-rebuild")
        faults.point("after-rebuild")
        self.metrics.ejections.labels(first.code.value).inc()
        for item in built.ejected:
            self.metrics.ejections.labels(item.code.value).inc()
        self.metrics.depth.observe(depth)
        self._probes = 0
        log.info(
            "promote.ejected", culprit=culprit.staging, task=culprit.task_id,
            also=[e.task_id for e in built.ejected], rebuilt=len(built.rebuilt),
            queue=built.head, bisection_depth=depth, record=commit,
        )  # fmt: skip
        return Round("eject", True, {
            "ejected": [e.wire() for e in ejected], "rebuilt": len(built.rebuilt),
            "queue": built.head, "depth": depth,
        })  # fmt: skip

    # -- loops ------------------------------------------------------------------------------

    def run(self, *, once: bool, poll: float = 2.0, stop: threading.Event | None = None) -> int:
        """Rounds until nothing is left to do (`once`) or until `stop` is set; returns how
        many rounds made progress. Errors of a round are logged and retried after `poll`."""
        stop = stop or threading.Event()
        progressed = 0
        while not stop.is_set():
            try:
                done = self.round()
            except IntegratorError as err:
                log.error("promote.round_failed", error=str(err))
                if once:
                    raise
                stop.wait(poll)
                continue
            if done.progress:
                progressed += 1
                continue
            if once:
                break
            stop.wait(poll)
        return progressed


def _retries(promoter: Promoter) -> int:
    config = promoter.config()
    return config.retries if config is not None else 0


def _failure_detail(result: ValidationResult | None, log_bytes: bytes) -> str:
    from integrator.escape import visible

    if result is None:
        return "its queue head failed validation"
    how = (
        "timed out" if result.timed_out
        else f"exited {result.exit_code}" if result.exit_code is not None
        else result.detail or "failed"
    )  # fmt: skip
    lines = log_bytes.decode("utf-8", "replace").strip().splitlines()[-20:]
    tail = visible("\n".join(lines), keep_newlines=True)[-1500:]
    where = f" (log: {result.log_url})" if result.log_url else ""
    return (
        f"validation of queue head {result.head[:12]} (tree {result.tree[:12]}) {how} after "
        f"{result.attempt} attempt(s), the head before it passed{where}"
        + (f"; last lines:\n{tail}" if tail else "")
    )


def validate_ejected(culprit: Covered, result_commit: str | None, detail: str) -> Ejected:
    return Ejected(
        landing=culprit.landing, staging=culprit.staging, code=Code.VALIDATION_FAILED,
        detail=detail, candidate=culprit.candidate, task_id=culprit.task_id,
        attempt_id=culprit.attempt_id, validation=result_commit,
    )  # fmt: skip
