"""The pure bisection step against a brute-force oracle (hypothesis): a simulated queue of
landings, one or none of which breaks every head that holds it, driven only by
`next_step` — it ejects exactly the culprit, promotes everything else, never promotes a
head that did not pass, and stays within its validation budget."""

from __future__ import annotations

import math
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from integrator.promotion.bisect import Step, first_failing, next_step, split


def _simulate(
    landings: int,
    fails: set[int],
    *,
    max_batch: int,
    concurrency: int,
    flaky: random.Random | None = None,
) -> tuple[list[int], list[int], int]:
    """Drive `next_step` over a queue whose heads fail when they hold a landing of `fails`
    (or, with `flaky`, at random). Returns (ejected, promoted, validations run)."""
    queue = list(range(1, landings + 1))
    promoted = 0
    results: dict[tuple[int, ...], bool] = {}
    ejected: list[int] = []
    runs = 0
    for _ in range(10 * landings + 20):
        pending = len(queue) - promoted
        known = {
            i - promoted: results[tuple(queue[:i])]
            for i in range(promoted + 1, len(queue) + 1)
            if tuple(queue[:i]) in results
        }
        step = next_step(pending, known, max_batch=max_batch, concurrency=concurrency)
        if step.promote is not None:
            assert known[step.promote] is True  # only ever a head that passed
            promoted += step.promote
            continue
        if step.eject is not None:
            e = step.eject
            assert known[e] is False and (e == 1 or known[e - 1] is True)
            ejected.append(queue.pop(promoted + e - 1))
            continue
        if not step.validate:
            assert pending == 0
            return ejected, queue[:promoted], runs
        assert len(step.validate) <= concurrency
        for v in step.validate:
            assert 1 <= v <= pending and v not in known
            head = tuple(queue[: promoted + v])
            results[head] = flaky.random() < 0.7 if flaky else not (set(head) & fails)
            runs += 1
    raise AssertionError("the promoter did not settle")


@settings(max_examples=300, deadline=None)
@given(
    landings=st.integers(1, 40),
    culprit=st.integers(0, 40),
    max_batch=st.integers(1, 48),
)
def test_one_culprit_is_found_in_log_validations(
    landings: int, culprit: int, max_batch: int
) -> None:
    """One at a time, the culprit (if any) is the landing ejected, all others are promoted,
    and the runs are at most the batches plus ⌈log₂ batch⌉ plus one re-validation."""
    fails = {culprit} if 1 <= culprit <= landings else set()
    ejected, promoted, runs = _simulate(landings, fails, max_batch=max_batch, concurrency=1)
    oracle = first_failing(
        landings, {i: i >= culprit and bool(fails) for i in range(1, landings + 1)}
    )
    assert ejected == ([oracle] if oracle is not None else [])
    assert sorted(promoted) == sorted(set(range(1, landings + 1)) - fails)
    batch = min(max_batch, landings)
    bound = math.ceil(landings / max_batch) + (math.ceil(math.log2(batch)) + 1 if fails else 0)
    assert runs <= bound
    if fails and max_batch >= landings:
        assert runs <= math.ceil(math.log2(landings)) + 2


@settings(max_examples=200, deadline=None)
@given(
    landings=st.integers(1, 30),
    fails=st.sets(st.integers(1, 30), max_size=5),
    max_batch=st.integers(1, 32),
    concurrency=st.integers(1, 6),
)
def test_several_culprits_with_speculation_are_all_ejected(
    landings: int, fails: set[int], max_batch: int, concurrency: int
) -> None:
    """With several culprits and several heads at once, exactly the culprits are ejected,
    in queue order, and everything else is promoted."""
    fails = {f for f in fails if f <= landings}
    ejected, promoted, _ = _simulate(landings, fails, max_batch=max_batch, concurrency=concurrency)
    assert ejected == sorted(fails)
    assert sorted(promoted) == sorted(set(range(1, landings + 1)) - fails)


@settings(max_examples=200, deadline=None)
@given(
    landings=st.integers(1, 25),
    seed=st.integers(0, 2**32),
    max_batch=st.integers(1, 30),
    concurrency=st.integers(1, 4),
)
def test_arbitrary_results_never_promote_a_failure(
    landings: int, seed: int, max_batch: int, concurrency: int
) -> None:
    """Whatever the results (a suite that fails and passes at random), the steps settle,
    promote only heads that passed and eject only right after a pass."""
    ejected, promoted, _ = _simulate(
        landings, set(), max_batch=max_batch, concurrency=concurrency, flaky=random.Random(seed)
    )
    assert sorted(ejected + promoted) == list(range(1, landings + 1))


def test_the_steps_read_plainly() -> None:
    """A few steps spelled out: the batch head first, then the midpoint, then the culprit
    with the last good head promoted, the split points within the interval."""
    assert next_step(0, {}, max_batch=8, concurrency=1) == Step()
    assert next_step(12, {}, max_batch=12, concurrency=1) == Step(validate=(12,))
    assert next_step(12, {}, max_batch=4, concurrency=3) == Step(validate=(4, 8, 12))
    assert next_step(12, {12: False}, max_batch=12, concurrency=1) == Step(validate=(6,))
    assert next_step(12, {12: False, 6: True}, max_batch=12, concurrency=1) == Step(
        promote=6, validate=(9,)
    )
    assert next_step(12, {7: False, 6: True}, max_batch=12, concurrency=1) == Step(
        promote=6, eject=7
    )
    assert next_step(12, {1: False}, max_batch=12, concurrency=1) == Step(eject=1)
    assert split(0, 12, 3) == (3, 6, 9)
    assert split(4, 6, 5) == (5,)
