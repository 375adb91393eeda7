"""The public Python API: what a program embedding integrator calls.

Everything here is also reachable as `integrator.<name>` (imported lazily, so the command
line stays light). The command line is built on the same functions; the verdicts are the
documents `integrator gate --json` prints.

    import integrator

    verdict = integrator.gate("path/to/repo", Path("billing.json"), "HEAD")
    if verdict.decision is integrator.Decision.ACCEPTED:
        ...

Errors are the `integrator.errors` hierarchy; each carries the command line's exit code.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from integrator.clock import Clock, utcnow
from integrator.documents.claim import Claim
from integrator.documents.contract import OwnershipContract, parse_contract
from integrator.documents.expansion import ExpansionRequest
from integrator.documents.policy import Policy, PolicyState, parse_policy
from integrator.documents.verdict import Code, Decision, Verdict, Violation
from integrator.errors import (
    ClaimConflictError,
    ConfigurationError,
    ContractError,
    InfrastructureError,
    IntegratorError,
    RefLockedError,
    RefMovedError,
    ReviewRequired,
    UsageError,
)
from integrator.landing.engine import Integrator
from integrator.records.canonical import Canonical
from integrator.records.claims import Claims, IssueRequest
from integrator.records.expansions import Expansions
from integrator.records.prepare import Preparation, prepare

__all__ = [
    "Canonical",
    "Claim",
    "ClaimConflictError",
    "Code",
    "ConfigurationError",
    "ContractError",
    "Decision",
    "ExpansionRequest",
    "InfrastructureError",
    "IntegratorError",
    "IssueRequest",
    "OwnershipContract",
    "Policy",
    "Preparation",
    "RefLockedError",
    "RefMovedError",
    "ReviewRequired",
    "UsageError",
    "Verdict",
    "Violation",
    "expand",
    "gate",
    "init",
    "integrate",
    "integrate_many",
    "issue",
    "parse_contract",
    "parse_policy",
    "reclaim",
    "renew",
    "revoke",
]

ContractInput = OwnershipContract | bytes | Path


def _contract_bytes(contract: ContractInput) -> bytes:
    """The contract document as the engine reads it (a file is read, a model serialised)."""
    if isinstance(contract, OwnershipContract):
        return contract.to_json().encode("utf-8")
    if isinstance(contract, Path):
        try:
            return contract.read_bytes()
        except OSError as err:
            raise UsageError(f"cannot read {contract}: {err.strerror}") from err
    return contract


def init(
    repo: str | Path,
    *,
    target: str | None = None,
    policy: str | None = None,
    update_checkout: bool = False,
) -> Preparation:
    """Prepare a canonical repository (queue ref, policy ref, settings); idempotent.

    `policy` is a policy document (TOML text); the default policy when omitted. A work
    tree that has the target checked out is refused (a ConfigurationError) unless
    `update_checkout` keeps it in step with every move of the target.
    """
    return prepare(repo, target=target, policy_text=policy, update_checkout=update_checkout)


def gate(
    repo: str | Path,
    contract: ContractInput,
    candidate: str,
    *,
    policy: Policy | None = None,
    now: datetime | None = None,
    static: bool = False,
) -> Verdict:
    """The one-shot gate (what CI runs): the verdict on `candidate`; no ref moves.

    `policy` replaces the repository's policy (for a repository without `integrator
    init`, as with `integrator gate --policy`). In a repository without claim refs the
    verdict carries CLAIM_UNVERIFIED (review) unless `static` asks for the contract's own
    rules only.
    """
    with Canonical(repo) as canonical:
        canonical.refresh()
        override = None
        if policy is not None:
            override = PolicyState(policy, 0, "")
        engine = Integrator(canonical, policy_override=override, static=static)
        return engine.evaluate(_contract_bytes(contract), candidate, now=now).verdict


def integrate(repo: str | Path, contract: ContractInput, candidate: str) -> Verdict:
    """Gate `candidate`, merge it onto the queue head and land it in one ref transaction."""
    return integrate_many(repo, [(contract, candidate)])[0]


def integrate_many(repo: str | Path, items: Sequence[tuple[ContractInput, str]]) -> list[Verdict]:
    """Integrate several candidates in order; all that pass land in one ref transaction."""
    with Canonical(repo) as canonical:
        engine = Integrator(canonical)
        return engine.integrate_many([(_contract_bytes(c), cand) for c, cand in items])


def issue(
    repo: str | Path,
    request: IssueRequest,
    *,
    force_shared: bool = False,
    clock: Clock = utcnow,
) -> OwnershipContract:
    """Issue a contract and register its claim (refused when it overlaps a live claim)."""
    with Canonical(repo, clock=clock) as canonical:
        return Claims(canonical).issue(request, force_shared=force_shared)


def renew(repo: str | Path, task_id: str, until: datetime, *, clock: Clock = utcnow) -> Claim:
    """Extend the lease of a live claim; the contract and its generation stay."""
    with Canonical(repo, clock=clock) as canonical:
        return Claims(canonical).renew(task_id, until)


def reclaim(
    repo: str | Path,
    task_id: str,
    *,
    force: bool = False,
    holder: str | None = None,
    clock: Clock = utcnow,
) -> OwnershipContract:
    """Take over an expired lease: generation + 1, a new attempt; the old one is fenced."""
    with Canonical(repo, clock=clock) as canonical:
        return Claims(canonical).reclaim(task_id, force=force, holder=holder)


def revoke(
    repo: str | Path,
    task_id: str,
    reason: str = "revoked by the coordinator",
    *,
    clock: Clock = utcnow,
) -> Claim:
    """Revoke a live claim: nothing of its attempt can land any more."""
    with Canonical(repo, clock=clock) as canonical:
        return Claims(canonical).revoke(task_id, reason)


def expand(
    repo: str | Path, request: ExpansionRequest, *, clock: Clock = utcnow
) -> OwnershipContract:
    """Grant an expansion request as generation + 1 (ReviewRequired when it cannot be)."""
    with Canonical(repo, clock=clock) as canonical:
        return Expansions(canonical).expand(request)
