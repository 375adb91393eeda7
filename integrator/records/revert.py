"""Writing an explicit revert commit (objects only: no ref moves here).

The revert of a landed staging commit S is a commit whose parent is S and whose tree is
S's parent's: its diff is exactly the landing, undone. It is a candidate like any other —
`integrator.rollout.revert` issues a claim for it and sends it through the gate.
"""

from __future__ import annotations

from integrator.errors import ConfigurationError
from integrator.records.canonical import Canonical, signature


def write_revert(canonical: Canonical, staging: str, message: str) -> str:
    """The revert commit of `staging` (parent `staging`, tree of `staging`'s parent)."""
    commit = canonical.commit(staging)
    if len(commit.parent_ids) != 1:
        raise ConfigurationError(f"{staging} is not a staging commit (it has no one parent)")
    before = canonical.commit(str(commit.parent_ids[0]))
    sig = signature(canonical.clock())
    oid = canonical.repo.create_commit(None, sig, sig, message, before.tree_id, [commit.id])
    return str(oid)
