"""The limits a contract (and an expansion request) is admitted under.

Their defaults are constants of `integrator/limits.py`; the policy's `[limits]` section may
set each up to its ceiling (`limits.CEILINGS`). Every place that *admits* a contract — the
gate, `contract issue` and every operation that issues one, `contract expand`, `revert` —
checks it against the limits of the policy in force. Readers of what was admitted already
(claim refs, a worktree's binding, the write guard's copy, held submissions shown to a
person) read up to the ceilings only: what they read passed an admission, and a policy change
revokes every unconsumed claim, so a live claim always passed the policy in force.
"""

from __future__ import annotations

from typing import NamedTuple

from integrator.limits import (
    CEILINGS,
    CONTRACT_BYTES,
    EXPANSION_BYTES,
    MAX_GLOB_LENGTH,
    MAX_GLOBS,
    MAX_RESOURCES,
)


class ContractLimits(NamedTuple):
    """One value per limit; the field names are the policy's `[limits]` keys."""

    contract_bytes: int = CONTRACT_BYTES
    max_globs: int = MAX_GLOBS
    max_resources: int = MAX_RESOURCES
    max_glob_length: int = MAX_GLOB_LENGTH
    expansion_bytes: int = EXPANSION_BYTES

    def changed(self) -> dict[str, int]:
        """The values that differ from the defaults, by key."""
        return {
            name: value
            for name, value in self._asdict().items()
            if value != getattr(DEFAULT_LIMITS, name)
        }


def where(key: str, limits: ContractLimits) -> str:
    """How a refusal names the limit it applied: its key and whether the policy set it."""
    if getattr(limits, key) == getattr(DEFAULT_LIMITS, key):
        return f"limits.{key}, the default"
    return f"limits.{key} of the policy"


DEFAULT_LIMITS = ContractLimits()
CEILING_LIMITS = ContractLimits(**CEILINGS)
KEYS: tuple[str, ...] = ContractLimits._fields
