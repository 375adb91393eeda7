"""The conservative overlap rule between ownership globs and resource sets.

Two patterns overlap when the literal folder prefix of one contains the other's
(compared component by component, case-insensitively). An unanchored pattern (`*.env`,
`README`) has the root as its prefix and so overlaps everything. Two patterns whose
prefixes diverge at some component cannot both match one file, which is why a search of
the target tree for a file matching both would never find more than this rule: it is
implied. Deny lists are ignored on purpose: overlap must never be missed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from integrator.paths import literal_prefix


def _parts(prefix: str) -> list[str]:
    return [p.casefold() for p in prefix.split("/") if p]


def patterns_overlap(a: str, b: str) -> bool:
    pa = _parts(literal_prefix(a))
    pb = _parts(literal_prefix(b))
    shorter, longer = (pa, pb) if len(pa) <= len(pb) else (pb, pa)
    return longer[: len(shorter)] == shorter


@dataclass(frozen=True)
class Overlap:
    kind: str  # "path" or "resource"
    mine: str
    theirs: str

    def describe(self) -> str:
        if self.kind == "path":
            return f"pattern {self.mine!r} overlaps {self.theirs!r}"
        return f"resource {self.mine} is claimed by both"


def find_overlaps(
    paths_a: Iterable[str],
    resources_a: Iterable[str],
    paths_b: Iterable[str],
    resources_b: Iterable[str],
    *,
    shared_resources: Iterable[str] = (),
) -> list[Overlap]:
    """Every overlapping pattern pair and every resource both sides claim (shared aside).

    Pairs come in the order of `paths_a`, then of `paths_b`, exactly those
    `patterns_overlap` admits, but found through an index of `paths_b`'s prefixes: two
    contracts naming 2,000 paths one by one cost 4,000 lookups per prefix depth, not
    4,000,000 comparisons (31 s, once two agents claimed that way at the same time).
    """
    others = list(paths_b)
    index = _PrefixIndex(others)
    found = [
        Overlap("path", a, others[i]) for a in paths_a for i in index.overlapping(_prefix_of(a))
    ]
    shared = set(shared_resources)
    theirs = set(resources_b)
    found.extend(
        Overlap("resource", r, r)
        for r in dict.fromkeys(resources_a)
        if r in theirs and r not in shared
    )
    return found


def _prefix_of(pattern: str) -> tuple[str, ...]:
    return tuple(_parts(literal_prefix(pattern)))


class _PrefixIndex:
    """Patterns by their literal prefix (casefolded components): `overlapping(p)` is the
    positions of every pattern whose prefix is `p`, above `p` or below it."""

    def __init__(self, patterns: list[str]) -> None:
        self.at: dict[tuple[str, ...], list[int]] = {}  # prefix → patterns with exactly it
        self.below: dict[tuple[str, ...], list[int]] = {}  # → patterns with a longer one
        for position, pattern in enumerate(patterns):
            prefix = _prefix_of(pattern)
            self.at.setdefault(prefix, []).append(position)
            for depth in range(len(prefix)):
                self.below.setdefault(prefix[:depth], []).append(position)

    def overlapping(self, prefix: tuple[str, ...]) -> list[int]:
        hits = [i for depth in range(len(prefix) + 1) for i in self.at.get(prefix[:depth], ())]
        hits.extend(self.below.get(prefix, ()))
        return sorted(hits)
