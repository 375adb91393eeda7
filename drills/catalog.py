"""Every drill module, imported in the order the report lists them."""

from __future__ import annotations

from drills import d_crash, d_fencing, d_hostile, d_merges, d_scale  # noqa: F401  (registration)
from drills.registry import REGISTRY, Drill


def ordered() -> list[Drill]:
    return list(REGISTRY.values())
