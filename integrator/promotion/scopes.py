"""Validation scopes: which scopes a landing belongs to, and the scoped promoter's decision
(pure).

A landing belongs to every scope whose paths its diff touches; a path in no scope belongs
to every scope (there is no catch-all to forget to declare: an undeclared path is tested by
every suite). Each scope's suite is taken to depend only on its own paths and the paths in
no scope — its *projection* of the tree — so a scope's result at a head depends only on
which of the scope's landings the head holds. Each scope is then a queue of its own: its
landings in queue order, numbered 1..k, its results by that number, and `next_step`
decides it as it decides an unscoped queue.

`plan` combines them:

- **promote** to the newest head h where every scope touched since the target passed at
  the number of its landings h holds;
- **eject** the first culprit any scope found (only that scope's bisection decides it);
- **reorder**: while a scope bisects, the landings of the other scopes are moved before
  that scope's suspects (its landings past its last pass), so they are promoted without
  waiting for the bisection; their own results stay valid (their projections do not change);
- **validate** each scope's heads, at the newest queue head holding exactly the scope's
  landings the step names (so scopes' results meet at common heads), within a budget of
  runs; a scope that failed recently speculates no batches (its bisections still split
  `concurrency` ways).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from integrator.documents.policy import ValidationScope
from integrator.paths import PathMatcher
from integrator.promotion.bisect import Step, newest_pass, next_step

SPECULATE_BELOW = 0.1  # a scope failing more often than this validates one head at a time


class ScopeMap:
    """The policy's scopes as matchers; the scopes of a path are memoized."""

    def __init__(self, scopes: Sequence[ValidationScope]) -> None:
        self.names = tuple(s.name for s in scopes)
        self._matchers = [(s.name, PathMatcher.of(s.paths)) for s in scopes]
        self._memo: dict[str, frozenset[str]] = {}

    def of_path(self, path: str) -> frozenset[str]:
        """The scopes of one path: those matching it, or every scope when none does."""
        found = self._memo.get(path)
        if found is None:
            hit = frozenset(name for name, m in self._matchers if m.covers(path))
            found = hit or frozenset(self.names)
            if len(self._memo) < 1_000_000:
                self._memo[path] = found
        return found

    def of_paths(self, paths: Iterable[str]) -> frozenset[str]:
        """The scopes of a landing that changed `paths`."""
        out: set[str] = set()
        for path in paths:
            out |= self.of_path(path)
            if len(out) == len(self.names):
                break
        return frozenset(out)


@dataclass(frozen=True)
class Plan:
    """What the scoped promoter does now; heads and landings are numbered from the target."""

    promote: int | None = None
    eject: tuple[int, str] | None = None  # (landing, the scope whose suite failed)
    reorder: tuple[int, tuple[int, ...]] | None = None  # (first position, landings from it)
    validate: tuple[tuple[str, int], ...] = ()  # (scope, head)
    why: dict[str, str] = field(default_factory=dict)

    @property
    def idle(self) -> bool:
        return (
            self.promote is None
            and self.eject is None
            and self.reorder is None
            and not self.validate
        )


def positions(members: Sequence[frozenset[str]], scope: str) -> list[int]:
    """The queue positions (1-based) of a scope's landings, oldest first."""
    return [i for i, found in enumerate(members, 1) if scope in found]


def counts_at(members: Sequence[frozenset[str]], scope: str) -> list[int]:
    """For each head 0..n, how many of the scope's landings it holds."""
    out = [0]
    for found in members:
        out.append(out[-1] + (scope in found))
    return out


def bisecting(results: Mapping[int, bool]) -> bool:
    """Whether a failure is known past the newest passing head (a bisection is due)."""
    good = newest_pass(results)
    return any(not ok and j > good for j, ok in results.items())


def promotable(
    members: Sequence[frozenset[str]],
    names: Sequence[str],
    results: Mapping[str, Mapping[int, bool]],
) -> int:
    """The newest head where every scope it touches passed at its count (0: none)."""
    counts = {s: counts_at(members, s) for s in names}
    for head in range(len(members), 0, -1):
        if all(
            counts[s][head] == 0 or results.get(s, {}).get(counts[s][head]) is True for s in names
        ):
            return head
    return 0


def plan(
    members: Sequence[frozenset[str]],
    names: Sequence[str],
    results: Mapping[str, Mapping[int, bool]],
    *,
    windows: Mapping[str, int],
    concurrency: int,
    budget: int,
    rates: Mapping[str, float] | None = None,
    reorder: bool = True,
    hold: AbstractSet[str] = frozenset(),
) -> Plan:
    """The scoped promoter's next step for the unpromoted landings' scopes `members`
    (`reorder` False: none, the queue keeps its order — a reorder was refused; `hold`: the
    scopes whose next batch waits for more landings, `linger`)."""
    rates = rates or {}
    head = promotable(members, names, results)
    if head:
        return Plan(promote=head)
    steps = {}
    later: set[int] = set()  # positions past their scope's next batch head
    for scope in names:
        mine = positions(members, scope)
        known = results.get(scope, {})
        failing = bisecting(known)
        # A bisection splits its interval `concurrency` ways whatever the failure rate (it
        # finds the culprit in fewer rounds); a scope failing often speculates no batches.
        speculate = concurrency if failing or rates.get(scope, 0.0) <= SPECULATE_BELOW else 1
        steps[scope] = (
            mine,
            next_step(
                len(mine), results.get(scope, {}), max_batch=max(1, windows.get(scope, 1)),
                concurrency=speculate,
            ),
        )  # fmt: skip
        batch = steps[scope][1].validate
        if scope in hold and not failing:
            # Its landings wait, and other scopes' landings move before them meanwhile.
            steps[scope] = (mine, Step(promote=steps[scope][1].promote))
            later.update(mine[newest_pass(known) :])
        elif batch and not failing:
            later.update(mine[batch[0] :])
    culprits = [
        (mine[step.eject - 1], scope) for scope, (mine, step) in steps.items() if step.eject
    ]
    if culprits:
        return Plan(eject=min(culprits))
    moved = _reorder(members, names, results, later) if reorder else None
    if moved is not None:
        return Plan(reorder=moved)
    wanted: list[tuple[int, str, int]] = []  # (rank, scope, head)
    for scope, (mine, step) in steps.items():
        for rank, j in enumerate(step.validate):
            at = mine[j] - 1 if j < len(mine) else len(members)
            wanted.append((rank, scope, at))
    wanted.sort(key=lambda item: (item[0], item[2]))
    return Plan(validate=tuple((scope, at) for _, scope, at in wanted[:budget]))


def _reorder(
    members: Sequence[frozenset[str]],
    names: Sequence[str],
    results: Mapping[str, Mapping[int, bool]],
    later: AbstractSet[int] = frozenset(),
) -> tuple[int, tuple[int, ...]] | None:
    """Landings of scopes not failing moved before the suspects of failing scopes (their
    landings past the last pass), and before the landings `later` (past their scope's next
    batch head), when any sits behind one; the moved keep their order."""
    suspects: set[int] = set(later)
    for scope in names:
        known = results.get(scope, {})
        good = newest_pass(known)
        if bisecting(known):
            suspects.update(positions(members, scope)[good:])
    if not suspects:
        return None
    first = min(suspects)
    tail = range(first, len(members) + 1)
    free = [i for i in tail if i not in suspects]
    if not free:
        return None  # nothing waits behind a suspect
    held = [i for i in tail if i in suspects]
    return first, tuple(free + held)


def next_window(window: int, passed: bool, max_batch: int) -> int:
    """The adaptive window: doubled after a pass, halved after a failure, within
    1..max_batch (Zuul's window with `window-increase-type: exponential`).

    Culprits come independently of one another, so a failure says little about the next
    batch: growing back by one a pass kept a scope at small batches long after its one
    culprit was ejected. Doubling settles where a batch passes about half the time (a
    window near ln 2 / p for a share p of culprits); halving still shrinks it fast in a
    scope that keeps failing (docs/validation.md, "The adaptive window")."""
    grown = window * 2 if passed else window // 2
    return max(1, min(max_batch, grown))
