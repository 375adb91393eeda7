"""The policy ref: `refs/integrator/policy` holds `policy.toml` and its `generation`.

Setting a policy bumps the generation and, in the same ref transaction, revokes every
live claim: contracts must be reissued under the new policy digest.
"""

from __future__ import annotations

from integrator import refnames
from integrator.documents.claim import POLICY_REVOKE_EVENT
from integrator.documents.policy import PolicyState, parse_policy
from integrator.plumbing import transaction
from integrator.plumbing.packs import ObjectBuffer, flush_loose, tree_bytes
from integrator.records.canonical import Canonical, signature
from integrator.records.claims import Claims, index_commit


def write_policy_commit(
    canonical: Canonical,
    text: str,
    generation: int,
    parent: str | None,
    event: str,
    reason: str | None = None,
) -> str:
    buffer = ObjectBuffer(canonical.repo)
    policy = buffer.add("blob", text.encode())
    serial = buffer.add("blob", f"{generation}\n".encode())
    entries = {b"generation": (b"100644", serial), b"policy.toml": (b"100644", policy)}
    tree = buffer.add("tree", tree_bytes(entries))
    sig = signature(canonical.clock())
    parents = [bytes.fromhex(parent)] if parent else []
    message = f"policy {event}: generation {generation}\n"
    if reason:
        message += f"\n{reason}\n"
    commit = canonical.authority_commit(buffer, refnames.POLICY, tree, parents, sig, message)
    flush_loose(buffer)
    return commit


def set_policy(
    canonical: Canonical, text: str, *, event: str = "set", reason: str | None = None
) -> tuple[PolicyState, list[str]]:
    """Replace the policy, bump its generation, revoke every live claim; one transaction.

    `event` and `reason` name the change in the policy commit's message (`policy observe
    migrations`, and why)."""
    parse_policy(text)
    canonical.refresh()
    # The claims index read before the live claims are: a claim made live meanwhile moves
    # it, and this transaction fails instead of leaving that claim live under the old policy.
    index = canonical.ref(refnames.CLAIMS_INDEX)
    old_oid = canonical.ref(refnames.POLICY)
    old = canonical.policy_state(old_oid, signed=False)  # a signed one may replace it
    generation = old.generation + 1
    commit = write_policy_commit(canonical, text, generation, old_oid, event, reason)
    ops = [transaction.update(refnames.POLICY, commit, old_oid)]
    claims = Claims(canonical)
    revoked: list[str] = []
    now = canonical.clock()
    for claim in canonical.claims():
        if claim.view.state != "live":
            continue
        reason = f"policy changed to generation {generation}; reissue the contract"
        revoke = claims.revoke_commit(claim, reason, now, event=POLICY_REVOKE_EVENT)
        ops.append(transaction.update(Canonical.claim_ref(claim.view.task_id), revoke, claim.oid))
        revoked.append(claim.view.task_id)
    buffer = ObjectBuffer(canonical.repo)
    serial = index_commit(canonical, index, f"policy generation {generation}", now, objects=buffer)
    flush_loose(buffer)
    ops.append(transaction.update(refnames.CLAIMS_INDEX, serial, index))
    canonical.updater.apply(ops)
    return canonical.policy_state(commit), revoked
