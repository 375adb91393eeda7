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
    """Every overlapping pattern pair and every resource both sides claim (shared aside)."""
    found = [
        Overlap("path", a, b) for a in paths_a for b in list(paths_b) if patterns_overlap(a, b)
    ]
    shared = set(shared_resources)
    theirs = set(resources_b)
    found.extend(
        Overlap("resource", r, r)
        for r in dict.fromkeys(resources_a)
        if r in theirs and r not in shared
    )
    return found
