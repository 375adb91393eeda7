"""The coordinator's contract operations as `integrator contract` reports them: issuing
(registered when the repository is initialized), renewing until a time or for a duration, a
claim's summary, the document `contract show` prints and the rows of `contract list`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from integrator.clock import parse_duration, parse_timestamp
from integrator.documents.attempt_key import AttemptKey
from integrator.documents.claim import Claim
from integrator.documents.contract import OwnershipContract
from integrator.documents.expansion import parse_request
from integrator.errors import ClaimConflictError, ConfigurationError, UsageError
from integrator.records.archive_index import (
    archive_ref,
    archived_claim,
    archived_count,
    archived_entries,
)
from integrator.records.attempt_keys import stored_key
from integrator.records.canonical import Canonical
from integrator.records.claims import (
    Claims,
    IssueRequest,
    build_contract,
    history,
)
from integrator.records.expansions import (
    ExpansionEntry,
    Expansions,
    archived_expansions,
    expansions,
    find_expansion,
)


def summary(claim: Claim) -> dict[str, object]:
    """One claim as `contract renew|revoke|show|list` print it."""
    view = claim.view
    return {
        "taskId": view.task_id,
        "attemptId": view.attempt_id,
        "generation": view.generation,
        "state": view.state,
        "leaseExpiresAt": view.lease_expires_at.isoformat(),
        "holder": claim.contract.lease.holder,
        "contractDigest": view.contract_digest,
        "paths": list(claim.contract.paths),
        "resources": list(claim.contract.resources),
        "stagingCommit": view.staging_commit,
        "claimCommit": claim.oid,
    }


def issue_contract(
    repo: str | Path, request: IssueRequest, *, force_shared: bool = False
) -> tuple[OwnershipContract, bool]:
    """(the contract, whether its claim was registered): registered in a repository
    prepared with `integrator init`, only built in one that is not."""
    with Canonical(repo) as canonical:
        if canonical.initialized:
            return Claims(canonical).issue(request, force_shared=force_shared), True
        return build_contract(canonical, request, 1, canonical.clock()), False


def issued_key_of(repo: str | Path, contract: OwnershipContract) -> AttemptKey | None:
    """The private attempt key `repo` issued `contract` with (from its key store)."""
    with Canonical(repo) as canonical:
        return stored_key(canonical, contract)


def renew_contract(repo: str | Path, task_id: str, until: str) -> tuple[Claim, datetime]:
    """Renew `task_id`'s lease until `until`, an RFC 3339 time or a duration from now:
    (the claim, the new expiry)."""
    with Canonical(repo) as canonical:
        try:
            when = parse_timestamp(until)
        except ValueError:
            try:
                when = canonical.clock() + parse_duration(until)
            except ValueError as err:
                raise UsageError(f"--until: {err}") from err
        return Claims(canonical).renew(task_id, when), when


def reclaim_contract(
    repo: str | Path,
    task_id: str,
    *,
    force: bool = False,
    holder: str | None = None,
    lease: timedelta,
    base: str | None = None,
) -> OwnershipContract:
    """Take over `task_id`'s expired lease (any lease with `force`): the new contract."""
    with Canonical(repo) as canonical:
        return Claims(canonical).reclaim(
            task_id, force=force, holder=holder, lease=lease, base=base
        )


def expand_contract(repo: str | Path, data: bytes) -> OwnershipContract:
    """Grant the expansion request `data` (refused, and recorded as pending, when it cannot
    be granted): the new contract. The request is read under the policy in force's limits."""
    with Canonical(repo) as canonical:
        request = parse_request(data, limits=canonical.policy_state().policy.contract_limits)
        return Expansions(canonical).expand(request)


def expand_filed(repo: str | Path, request_id: str) -> OwnershipContract:
    """Grant the recorded (pending) expansion request `request_id` — one an agent filed
    (MCP `request_expansion`, `contract request-expansion --send`) or one `expand` could
    not grant before: the new contract."""
    with Canonical(repo) as canonical:
        entry = find_expansion(canonical, request_id)
        if entry is None:
            raise UsageError(f"no expansion request {request_id!r} (see integrator contract list)")
        if entry.record.state != "pending":
            raise ClaimConflictError(
                f"expansion request {request_id} is already {entry.record.state}"
            )
        return Expansions(canonical).expand(entry.request)


def dismiss_request(repo: str | Path, request_id: str, reason: str) -> ExpansionEntry:
    """Close a pending expansion request without granting it."""
    with Canonical(repo) as canonical:
        return Expansions(canonical).dismiss(request_id, reason)


def revoke_contract(repo: str | Path, task_id: str, reason: str) -> Claim:
    """Revoke `task_id`'s live claim."""
    with Canonical(repo) as canonical:
        return Claims(canonical).revoke(task_id, reason)


@dataclass(frozen=True)
class ContractShow:
    """What `contract show` reads of one task: its claim (live or archived), its history and
    its expansion requests."""

    claim: Claim
    archived: dict[str, object] | None
    events: list[tuple[str, dict[str, object], str]]
    requests: list[ExpansionEntry]
    folded: list[ExpansionEntry]

    @property
    def summary(self) -> dict[str, object]:
        return summary(self.claim)

    def wire(self) -> dict[str, object]:
        return {
            **self.summary,
            "archived": self.archived,
            "contract": self.claim.contract.wire(),
            "history": [{"commit": c, **state} for c, state, _ in self.events],
            "expansionRequests": [e.summary() for e in self.requests]
            + [{**e.summary(), "archived": True} for e in self.folded],
        }


def show_contract(repo: str | Path, task_id: str) -> ContractShow:
    """The claim of `task_id`, read from its archive once it was folded into one."""
    archived: dict[str, object] | None = None
    with Canonical(repo) as canonical:
        claim = canonical.claim(task_id)
        if claim is None and (claim := archived_claim(canonical, task_id)) is not None:
            archived = {"ref": archive_ref("claims"), "commit": claim.oid}
        if claim is None:
            raise ConfigurationError(f"no claim for task {task_id!r}")
        return ContractShow(
            claim,
            archived,
            history(canonical, task_id),
            expansions(canonical, task_id),
            archived_expansions(canonical, task_id),
        )


@dataclass(frozen=True)
class ContractList:
    """What `contract list` prints: a row per claim, the pending expansion requests, and how
    many finished claims the archive holds."""

    rows: list[dict[str, object]]
    pending: list[ExpansionEntry]
    folded: int


def list_contracts(repo: str | Path, *, archived: bool = False) -> ContractList:
    """Every claim (with `archived`, also the finished ones folded into the archive) and
    the expansion requests waiting for review."""
    with Canonical(repo) as canonical:
        claims = canonical.claims()
        pending = expansions(canonical, pending_only=True)
        folded = archived_count(canonical, "claims")
        old: list[Claim] = []
        if archived:
            # A task issued again after it was archived has its ref: that row stands for it.
            tasks = {c.view.task_id for c in claims}
            entries = archived_entries(canonical, "claims")
            old = [canonical.claim_at(e.oid) for e in entries if e.name not in tasks]
    by_task: dict[str, list[ExpansionEntry]] = {}
    for entry in pending:
        by_task.setdefault(entry.record.task_id, []).append(entry)
    rows = [
        {
            **summary(c),
            "pendingExpansions": [e.summary() for e in by_task.get(c.view.task_id, [])],
            **({"archived": n >= len(claims)} if archived else {}),
        }
        for n, c in enumerate([*claims, *old])
    ]
    return ContractList(rows, pending, folded)
