"""One round of the promoter when the policy declares validation scopes.

It reads the scoped view (`scoped.read_view`), asks the pure `scopes.plan` what to do, and
does it through the promoter's own effects: promote (the record rests on one result per
scope the promoted landings touch), eject (the culprit one scope's bisection found; the
other scopes' landings are rebuilt and keep their results, their projections unchanged),
reorder (a rebuild that moves the landings of scopes not failing before a failing scope's
suspects: no landing is taken out, and none needs a run again), or validate each scope's
heads at once within the run budget.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import structlog

from integrator.documents.policy import Validation
from integrator.documents.promotion import PromotionRecord, ValidationResult
from integrator.landing.context import LandingContext
from integrator.plumbing import transaction
from integrator.promotion import linger, validate
from integrator.promotion.bisect import newest_pass
from integrator.promotion.metrics import PromotionMetrics
from integrator.promotion.rebuild import rebuild
from integrator.promotion.rounds import Round, lingering
from integrator.promotion.runner import RunOutcome
from integrator.promotion.scoped import Memo, ScopedView, read_view
from integrator.promotion.scopes import ScopeMap, plan
from integrator.promotion.state import QueueState
from integrator.records import validations
from integrator.records.canonical import Canonical

log = structlog.get_logger("integrator.promote")


class Effects(Protocol):
    """What the scoped round needs of the promoter."""

    canonical: Canonical
    landing: LandingContext
    metrics: PromotionMetrics
    memo: Memo
    recent: dict[str | None, list[bool]]
    scratch: Path | None

    def window(self, scope: str | None, config: Validation) -> int: ...
    def hit(self, head: str, scope: str | None) -> None: ...
    def promote_to(self, state: QueueState, index: int, rests_on: list[str]) -> Round: ...
    def eject_at(
        self,
        state: QueueState,
        index: int,
        failing: tuple[str, ValidationResult] | None,
        flaky_seen: bool,
        rests_on: list[str],
    ) -> Round: ...
    def apply(self, ops: list[transaction.RefOp], point: str) -> None: ...
    def count_run(self, job: validate.Job, outcome: RunOutcome, final: bool) -> None: ...
    def confirm(
        self,
        state: QueueState,
        index: int,
        scope: str | None,
        result: ValidationResult,
        config: Validation,
    ) -> Round: ...


def scoped_round(p: Effects, state: QueueState, config: Validation) -> Round:
    """One scoped round (reads are the caller's; every move is a compare-and-swap)."""
    scopes = ScopeMap(config.scope)
    view = read_view(p.canonical, state, config, scopes, p.memo)
    for head, scope in view.hits:
        p.hit(head, scope)
    budget = config.budget or config.concurrency * len(scopes.names)
    rates = {s: (1 - sum(r) / len(r)) if (r := p.recent.get(s)) else 0.0 for s in scopes.names}
    windows = {s: p.window(s, config) for s in scopes.names}
    holds = linger.scope_holds(
        p.canonical, state.landings, view.members, view.results, windows, config.linger
    )
    held = {scope for scope in holds if scope is not None}
    step = plan(
        view.members, scopes.names, view.results, windows=windows,
        concurrency=config.concurrency, budget=budget, rates=rates, hold=held,
    )  # fmt: skip
    if step.promote is not None:
        return p.promote_to(state, step.promote, view.commits_for(step.promote))
    if step.eject is not None:
        index, scope = step.eject
        count = view.count(scope, index)
        failing = view.found[scope].get(count)
        if failing is not None and validate.provisional(failing[1], config):
            # Confirmed where it was recorded, or at the head of the same projection now.
            heads = {state.head(i): i for i in range(1, state.pending + 1)}
            at = heads.get(failing[1].head, view.head_of(scope, count))
            return p.confirm(state, at, scope, failing[1], config)
        flaky = any(r.flaky for _, r in view.found[scope].values())
        rests_on = [commit for found in view.found.values() for commit, _ in found.values()]
        return p.eject_at(state, index, failing, flaky, rests_on)
    if step.reorder is not None:
        moved = _reorder(p, state, *step.reorder)
        if moved is not None:
            return moved
        # A landing that cannot move keeps its place: the queue stays as it is, and each
        # scope's heads are validated where they are.
        step = plan(
            view.members, scopes.names, view.results, windows=windows,
            concurrency=config.concurrency, budget=budget, rates=rates, reorder=False,
            hold=held,
        )  # fmt: skip
    if not step.validate:
        return lingering(holds) if holds else Round("idle", False, {"pending": state.pending})
    return _validate(p, state, view, step.validate, config, budget)


def _validate(
    p: Effects,
    state: QueueState,
    view: ScopedView,
    wanted: tuple[tuple[str, int], ...],
    config: Validation,
    budget: int,
) -> Round:
    failing = {s for s, r in view.results.items() if False in r.values()}
    confirms = _confirms(state, view, config)[:budget]
    batch = config.flaky_reruns > 0  # a batch head's failure is rerun beside the bisection
    jobs = confirms + [
        validate.Job(
            head,
            scope,
            view.key_at(scope, head),
            probe=scope in failing,
            provisional=batch and scope not in failing,
        )
        for scope, head in wanted[: max(0, budget - len(confirms))]
    ]
    bisecting = any(False in r.values() for r in view.results.values())
    recorded = validate.run_heads(
        p.canonical, state, jobs, config, scratch=p.scratch,
        on_run=p.count_run, bisecting=bisecting, workers=budget,
    )  # fmt: skip
    for r in recorded:
        if r.final is None and r.commit is not None:
            found = validations.read_result(p.canonical, r.commit)
            if found is not None and found.key and validate.provisional(found, config):
                p.memo.provisional[found.key] = (r.commit, found)
    finals = {
        f"{r.final.scope}:{r.head[:12]}": r.final.status for r in recorded if r.final is not None
    }
    return Round("validate" if recorded else "wait", bool(recorded), {"results": finals})


def _confirms(state: QueueState, view: ScopedView, config: Validation) -> list[validate.Job]:
    """The reruns of batch heads whose one run failed (`flaky_reruns`): each is rerun in
    the round that starts its scope's bisection, beside the bisection's first probes, so a
    real failure costs no round of its own (and a flaky one is found before it ejects)."""
    heads = {state.head(i): i for i in range(1, state.pending + 1)}
    out = []
    for scope, known in view.results.items():
        good = newest_pass(known)
        first = min((j for j, ok in known.items() if not ok and j > good), default=None)
        if first is None or first == good + 1:
            continue  # nothing failing, or the ejection's own confirmation decides it
        result = view.found[scope][first][1]
        if result.probe or not validate.provisional(result, config):
            continue
        at = heads.get(result.head, view.head_of(scope, first))
        out.append(validate.Job(at, scope, view.keys[scope][first], confirm=result.attempt))
    return out


def _reorder(p: Effects, state: QueueState, first: int, order: tuple[int, ...]) -> Round | None:
    """Rebuild the queue from head `first - 1` with the landings in `order` (None: refused,
    a landing cannot move)."""
    canonical = p.canonical
    good = state.head(first - 1)
    later = [state.landings[i - 1] for i in order]
    built = rebuild(p.landing, good, later, set())
    if built.ejected:
        # A landing that cannot move (its base held a suspect, or it no longer merges
        # there) keeps its place: the queue stays as it is, and the bisection goes on.
        log.info("promote.reorder_refused", landings=[e.task_id for e in built.ejected])
        return None
    record = PromotionRecord(
        action="reorder", target=state.target, at=canonical.clock(), actor=validate.actor(),
        before=state.queue, after=built.head, rebuilt=built.rebuilt,
    )  # fmt: skip
    ref = validations.promotion_ref(state.target)
    commit = validations.write_promotion(canonical, record, state.record)
    ops = [
        transaction.update(canonical.queue_ref, built.head, state.queue),
        transaction.update(ref, commit, state.record),
    ]
    moved = state.landings[first - 1 :]
    for landing in moved:
        name = validations.validation_ref(state.target, landing.staging)
        old = canonical.ref(name)
        if old is not None:
            ops.append(transaction.delete(name, old))
    heads = {c.staging for c in moved}
    for name, oid in validations.scoped_refs(canonical, state.target, heads).items():
        ops.append(transaction.delete(name, oid))
    p.apply(ops, "before-rebuild")
    log.info(
        "promote.reordered", first=first, moved=len(order), queue=built.head, record=commit,
        order=[state.landings[i - 1].task_id for i in order],
    )  # fmt: skip
    return Round("reorder", True, {"queue": built.head, "rebuilt": len(built.rebuilt)})
