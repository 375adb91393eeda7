"""Every drill module, imported in the order the report lists them."""

from __future__ import annotations

from drills import (  # noqa: F401  (registration)
    d_crash,
    d_fencing,
    d_hostile,
    d_merges,
    d_rollout,
    d_scale,
    d_soak,
    d_team,
)
from drills.registry import REGISTRY, Drill


def ordered() -> list[Drill]:
    """Groups 1–9 in order, then the drills that feed the quantitative gates."""
    entries = list(REGISTRY.values())
    return sorted(entries, key=lambda d: (d.group == "gate", d.group, entries.index(d)))
