"""integrator: a fencing integration gate for repositories that many coding agents write at once.

The public API (`integrator.gate`, `integrator.integrate`, the claim operations, the
verdict types) lives in `integrator.api` and is imported on first use, so the command line
and the agents' hooks do not pay for it.
"""

import os
import sys

# `python -m integrator` puts the current folder first on sys.path, and integrator runs in
# folders others wrote (an agent's worktree for the guard, a candidate's checkout for the
# gate): a `typing.py` there would run as ours. Drop that entry before importing anything
# (this module has no `from __future__` import for the same reason: it imports a module).
# Python 3.11's -P does the same from the command line; installed hooks pass it too.
if sys.argv[:1] == ["-m"] and not sys.flags.safe_path and sys.path[:1] == [os.getcwd()]:
    del sys.path[0]

from typing import TYPE_CHECKING, Any

from integrator.version import __version__ as __version__

if TYPE_CHECKING:
    from integrator.api import *  # noqa: F403

_API = frozenset(
    {
        "Canonical", "Claim", "ClaimConflictError", "Code", "ConfigurationError",
        "ContractError", "Decision", "ExpansionRequest", "InfrastructureError",
        "IntegratorError", "IssueRequest", "OwnershipContract", "Policy", "Preparation",
        "RefLockedError", "RefMovedError", "ReviewRequired", "UsageError", "Verdict",
        "Violation", "expand", "gate", "init", "integrate", "integrate_many", "issue",
        "parse_contract", "parse_policy", "reclaim", "renew", "revoke",
    }
)  # fmt: skip


def __getattr__(name: str) -> Any:
    if name in _API:
        from integrator import api

        return getattr(api, name)
    raise AttributeError(f"module 'integrator' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})
