"""The promoter's decision: from the results known so far, what to do next (pure).

The unpromoted part of the queue is numbered from the target: head 0 is the target itself
(validated, or it would not be the target), head i is the queue after the i-th unpromoted
landing. `results` holds the final validation result of some heads (True: passed). The
answer is a `Step`: the head to promote to (the newest that passed), the landing to eject
(the first failing one, once a passing head sits right before a failing one), and the heads
to validate next.

Without a failure known past the newest passing head, the next batch heads are validated:
the newest head covering at most `max_batch` landings, and with `concurrency` above 1 the
heads of the batches after it, speculatively (each becomes the next promotion if it passes).
Once a batch head failed, the landings between the newest passing head and the first
failing one are bisected, with `concurrency` heads splitting the interval at once: an
interval of w landings takes ⌈log₂ w⌉ validations one at a time, ⌈log_{c+1} w⌉ rounds of c.

Results need not be monotone (a flaky suite passes again later): the newest passing head is
promoted whatever failed before it, and only a failure right after a pass ejects anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """What to do now. Everything is relative to the target (head 0)."""

    promote: int | None = None  # move the target to this head (it passed)
    eject: int | None = None  # this landing made its head fail: take it out of the queue
    validate: tuple[int, ...] = ()  # validate these heads (at once)

    @property
    def idle(self) -> bool:
        return self.promote is None and self.eject is None and not self.validate


def newest_pass(results: Mapping[int, bool]) -> int:
    """The newest passing head of `results` (0: the target)."""
    return max((j for j, ok in results.items() if ok), default=0)


def next_step(
    pending: int, results: Mapping[int, bool], *, max_batch: int, concurrency: int
) -> Step:
    """The next step for `pending` unpromoted landings given the known `results`."""
    if max_batch < 1 or concurrency < 1:
        raise ValueError("max_batch and concurrency must be at least 1")
    if pending <= 0:
        return Step()
    known = {i: ok for i, ok in results.items() if 1 <= i <= pending}
    good = newest_pass(known)
    promote = good or None
    fails = sorted(i for i, ok in known.items() if not ok and i > good)
    if not fails:
        if good == pending:
            return Step(promote=promote)
        heads: list[int] = []
        head = good
        while len(heads) < concurrency and head < pending:
            head = min(pending, head + max_batch)
            heads.append(head)  # past `good` and not failed: unknown
        return Step(promote=promote, validate=tuple(heads))
    first = fails[0]
    if first == good + 1:
        return Step(promote=promote, eject=first)
    return Step(promote=promote, validate=split(good, first, concurrency))


def split(good: int, bad: int, parts: int) -> tuple[int, ...]:
    """`parts` heads (at most) strictly between `good` and `bad`, cutting it evenly."""
    width = bad - good
    points = {good + (width * j) // (parts + 1) for j in range(1, parts + 1)}
    return tuple(sorted(p for p in points if good < p < bad))


def first_failing(pending: int, fails: Mapping[int, bool]) -> int | None:
    """The brute-force answer the bisection must find: the first landing whose head fails,
    when failures are monotone (`fails[i]` for every head 1..pending)."""
    return next((i for i in range(1, pending + 1) if fails[i]), None)
