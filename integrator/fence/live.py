"""The checks that need no diff: identity, the live claim, the history, the grants.

Pure functions from what was read (the parsed contract, the claim as its ref holds it, the
policy digest, `now`) to violations. They run first, so a flood of stale submissions
costs a ref read and a cached claim each.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from integrator import refnames
from integrator.documents.claim import ClaimView, Grant
from integrator.documents.contract import OwnershipContract
from integrator.documents.verdict import Code, Violation


def check_identity(contract: OwnershipContract, repo_id: str | None) -> list[Violation]:
    if repo_id is not None and contract.repo != repo_id:
        return [
            Violation(
                code=Code.REPO_MISMATCH,
                detail=f"contract names repository {contract.repo}, this one is {repo_id}",
            )
        ]
    return []


def check_identity_known(repo_id: str | None) -> list[Violation]:
    if repo_id is None:
        return [
            Violation(
                code=Code.REPO_UNVERIFIED,
                detail="the repository identity cannot be derived here (shallow clone); "
                "set `git config integrator.repoId <id>` (see `git config integrator.repoId` "
                "in the canonical repository) or fetch the full history",
            )
        ]
    return []


def check_claim_known() -> list[Violation]:
    """A repository without claim refs (a CI clone) cannot say whether the contract is the
    authorized one: review, unless the caller asked for a static check."""
    return [
        Violation(
            code=Code.CLAIM_UNVERIFIED,
            detail=f"no claim refs here ({refnames.CLAIMS}*), so the contract was checked "
            "against its own rules only, not against the live claim: fetch them (git fetch "
            f"origin '{refnames.ALL_REFSPEC}') or pass --static to ask for "
            "exactly that",
        )
    ]


def check_rewritten(task_id: str, rewritten: dict[str, tuple[str, str]]) -> list[Violation]:
    """A claim chain only grows: a claim ref that no longer descends from the commit this
    mirror last saw was rewritten on the server, and nothing of its task may land."""
    if task_id not in rewritten:
        return []
    before, now = rewritten[task_id]
    return [
        Violation(
            code=Code.CLAIM_REWRITTEN,
            detail=f"{refnames.CLAIMS}{task_id} moved from {before[:12]} to {now[:12]}, "
            "which does not descend from it: the claim was rewritten on the server",
        )
    ]


def check_signed(task_id: str, oid: str, problem: str | None) -> list[Violation]:
    """A claim that no trusted authority key signed (docs/security.md, "Authority keys")
    was written by someone who can write the server's refs but holds no key: nothing of
    its task may land, as for a claim rewritten."""
    if problem is None:
        return []
    return [
        Violation(
            code=Code.CLAIM_REWRITTEN,
            detail=f"{refnames.CLAIMS}{task_id} at {oid[:12]} is not a claim a trusted "
            f"authority key signed ({problem}): it was written on the server by someone "
            "without the coordinator's key",
        )
    ]


def check_live(
    contract: OwnershipContract,
    claim: ClaimView | None,
    policy_digest: str,
    now: datetime,
) -> list[Violation]:
    """The live-claim checks: generation, digest, state, lease, policy. No diff needed."""
    if claim is None:
        return [
            Violation(
                code=Code.CLAIM_MISSING,
                detail=f"no claim {refnames.CLAIMS}{contract.task_id}; "
                "the coordinator must issue the contract first",
            )
        ]
    out: list[Violation] = []
    gen = contract.ownership_generation
    if claim.generation > gen:
        out.append(
            Violation(
                code=Code.STALE_GENERATION,
                detail=f"contract generation {gen} is older than the live generation "
                f"{claim.generation} (attempt {claim.attempt_id})",
            )
        )
        return out
    if claim.generation != gen or claim.contract_digest != contract.digest:
        out.append(
            Violation(
                code=Code.CONTRACT_DIGEST_MISMATCH,
                detail=f"contract {contract.digest} (generation {gen}) is not the live "
                f"contract {claim.contract_digest} (generation {claim.generation})",
            )
        )
        return out
    if claim.state == "consumed":
        out.append(
            Violation(
                code=Code.CLAIM_CONSUMED,
                detail=f"claim already consumed by staging commit {claim.staging_commit}",
            )
        )
    elif claim.state == "revoked":
        out.append(
            Violation(
                code=Code.CLAIM_REVOKED,
                detail=f"claim revoked: {claim.reason or 'by the coordinator'}",
            )
        )
    if claim.state == "live" and now >= claim.lease_expires_at:
        out.append(
            Violation(
                code=Code.LEASE_EXPIRED,
                detail=f"lease held by {contract.lease.holder} expired at "
                f"{claim.lease_expires_at.isoformat()}",
            )
        )
    if contract.policy_digest != policy_digest:
        out.append(
            Violation(
                code=Code.POLICY_CHANGED,
                detail=f"contract was issued under policy {contract.policy_digest}, "
                f"the live policy is {policy_digest}",
            )
        )
    return out


def check_static_lease(contract: OwnershipContract, now: datetime) -> list[Violation]:
    """Without claims (a plain repository), the contract's own lease still bounds it."""
    if now >= contract.lease.expires_at:
        return [
            Violation(
                code=Code.LEASE_EXPIRED,
                detail=f"lease held by {contract.lease.holder} expired at "
                f"{contract.lease.expires_at.isoformat()}",
            )
        ]
    return []


def check_history(
    *, base: str, base_present: bool, base_is_ancestor: bool, shallow: bool
) -> list[Violation]:
    if not base_present:
        where = "this shallow clone" if shallow else "the repository"
        return [
            Violation(
                code=Code.BASE_MISSING,
                detail=f"base commit {base} is not in {where}; fetch it (or deepen the clone)",
            )
        ]
    if not base_is_ancestor:
        if shallow:
            return [
                Violation(
                    code=Code.BASE_MISSING,
                    detail=f"cannot prove base {base} is an ancestor of the candidate: "
                    "history is cut by a shallow clone",
                )
            ]
        return [
            Violation(
                code=Code.BASE_NOT_ANCESTOR,
                detail=f"base commit {base} is not an ancestor of the candidate",
            )
        ]
    return []


def check_grants(edits: Sequence[tuple[str, str, Grant]] | None) -> list[Violation]:
    """Commits that changed a granted path without building on the state the grant
    inspected (they were written before it); None: the history was too long to verify."""
    if edits is None:
        return [
            Violation(
                code=Code.EDIT_BEFORE_GRANT,
                detail="the candidate's history is too long to verify that no granted path "
                "was edited before its grant",
            )
        ]
    return [
        Violation(
            code=Code.EDIT_BEFORE_GRANT,
            path=path,
            detail=f"commit {commit[:12]} changed {path}, which generation {grant.generation} "
            f"granted, without building on the workspace the grant inspected "
            f"({(grant.head or '')[:12]}): it was written before the claim allowed it",
        )
        for commit, path, grant in edits
    ]
