"""Expansion requests (`integrator.expansion.v1`) and the record of those not granted.

`Expansions.expand` (the coordinator's) grants a request by issuing generation + 1 of the
claim. `Expansions.file` (the agent's) grants nothing: it records the request as pending for
the coordinator, unless the policy's `[expansion] auto_grant` covers it, when it is handed
to `expand`. A request not granted (filed, or one `expand` could not grant: the claim moved
on, another live claim holds the paths) leaves the claim untouched and is recorded on its
own chain, `refs/integrator/expansions/<taskId>/<requestId>`: each commit
holds `request.json` and `expansion.json` (pending, granted or dismissed, and why), so the
coordinator finds it (`integrator contract list`, `integrator review list`) and `git log`
of the ref is its history. These refs take no part in authorization.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Literal

import structlog
from pydantic import ValidationError

from integrator import refnames
from integrator.documents.claim import Claim, Grant, claim_state
from integrator.documents.contract import OwnershipContract
from integrator.documents.expansion import ExpansionRecord, ExpansionRequest, parse_request
from integrator.documents.policy import Policy
from integrator.errors import (
    ClaimConflictError,
    ConfigurationError,
    RefMovedError,
    ReviewRequired,
    UsageError,
)
from integrator.plumbing import git, transaction
from integrator.plumbing.packs import ObjectBuffer, commit_bytes, flush_loose, tree_bytes
from integrator.records import verdict_keys
from integrator.records.archive_index import archived_entries
from integrator.records.attempt_keys import key_store
from integrator.records.auto_grant import not_automatic
from integrator.records.canonical import Canonical, signature
from integrator.records.claims import (
    Claims,
    IssueRequest,
    build_contract,
    issued_key_for,
    overlaps_with_live,
    write_claim_commit,
)
from integrator.records.edits import written_already

log = structlog.get_logger("integrator.expansions")


@dataclass(frozen=True)
class ExpansionEntry:
    """A recorded expansion request: its ref, the newest record and the request itself."""

    ref: str
    commit: str
    record: ExpansionRecord
    request: ExpansionRequest

    def summary(self) -> dict[str, object]:
        """The JSON form `contract list`, `contract show` and `review` print."""
        return {
            "requestId": self.record.request_id,
            "taskId": self.record.task_id,
            "state": self.record.state,
            "at": self.record.at.isoformat(),
            "reason": self.record.reason,
            "expectedGeneration": self.request.expected_generation,
            "liveGeneration": self.record.live_generation,
            "addPaths": list(self.request.add_paths),
            "addResources": list(self.request.add_resources),
            "conflictsWith": list(self.record.conflicts_with),
            "ref": self.ref,
            "commit": self.commit,
        }

    def describe(self) -> str:
        """One line for people."""
        added = ", ".join([*self.request.add_paths, *self.request.add_resources]) or "nothing"
        return (
            f"{self.record.request_id}  {self.record.task_id:<20} {self.record.state:<9} "
            f"adds {added}: {self.record.reason}"
        )


def expansion_ref(task_id: str, request_id: str) -> str:
    return f"{refnames.EXPANSIONS}{task_id}/{request_id}"


def write_expansion_commit(
    canonical: Canonical, request: ExpansionRequest, record: ExpansionRecord, parent: str | None
) -> str:
    """Write (objects only, no ref) the commit holding `request.json` and `expansion.json`."""
    buffer = ObjectBuffer(canonical.repo)
    files = {
        b"request.json": request.to_json().encode() + b"\n",
        b"expansion.json": record.to_json().encode() + b"\n",
    }
    tree = buffer.add(
        "tree",
        tree_bytes({name: (b"100644", buffer.add("blob", data)) for name, data in files.items()}),
    )
    message = (
        f"{record.event}: expansion {record.request_id} of {record.task_id} "
        f"({record.state})\n\n{record.reason}\n"
    )
    sig = signature(record.at)
    parents = [bytes.fromhex(parent)] if parent else []
    commit = buffer.add("commit", commit_bytes(tree, parents, sig, sig, message)).hex()
    flush_loose(buffer)
    return commit


def expansions(
    canonical: Canonical, task_id: str | None = None, *, pending_only: bool = False
) -> list[ExpansionEntry]:
    """Recorded expansion requests (of one task), oldest first; a damaged one is logged."""
    prefix = refnames.EXPANSIONS if task_id is None else f"{refnames.EXPANSIONS}{task_id}/"
    out = []
    for ref, oid in git.refs_under(canonical.repo, prefix).items():
        try:
            record = ExpansionRecord.model_validate_json(canonical.blob_at(oid, "expansion.json"))
            request = ExpansionRequest.model_validate_json(canonical.blob_at(oid, "request.json"))
        except (KeyError, ConfigurationError, ValidationError) as err:
            log.warning("expansion.unreadable", ref=ref, error=str(err))
            continue
        if not pending_only or record.state == "pending":
            out.append(ExpansionEntry(ref, oid, record, request))
    return sorted(out, key=lambda e: (e.record.at, e.ref))


def archived_expansions(canonical: Canonical, task_id: str) -> list[ExpansionEntry]:
    """The task's finished requests `integrator refs archive` folded into its archive ref."""
    out = []
    for entry in archived_entries(canonical, "expansions", task=task_id):
        try:
            record = ExpansionRecord.model_validate_json(
                canonical.blob_at(entry.oid, "expansion.json")
            )
            request = ExpansionRequest.model_validate_json(
                canonical.blob_at(entry.oid, "request.json")
            )
        except (KeyError, ConfigurationError, ValidationError) as err:
            log.warning("expansion.unreadable", ref=entry.ref, error=str(err))
            continue
        out.append(ExpansionEntry(entry.ref, entry.oid, record, request))
    return sorted(out, key=lambda e: (e.record.at, e.ref))


def find_expansion(canonical: Canonical, request_id: str) -> ExpansionEntry | None:
    for entry in expansions(canonical):
        if entry.record.request_id == request_id:
            return entry
    return None


def _moved_on(request: ExpansionRequest, claim: Claim) -> str | None:
    """Why `request` no longer fits the live claim (its compare-and-swap would fail)."""
    view = claim.view
    if view.state != "live":
        return f"the claim is {view.state}"
    if (
        view.generation != request.expected_generation
        or view.contract_digest != request.contract_digest
    ):
        return (
            f"expected generation {request.expected_generation} / {request.contract_digest}, "
            f"the live claim is generation {view.generation} / {view.contract_digest}"
        )
    return None


class Expansions:
    """The coordinator's operations on expansion requests: grant (as generation + 1 of the
    claim, one compare-and-swap), refuse (recorded for review), dismiss."""

    def __init__(self, canonical: Canonical) -> None:
        self.canonical = canonical
        self.claims = Claims(canonical)

    def expand(self, request: ExpansionRequest) -> OwnershipContract:
        """CAS on generation and live digest, check all other claims, issue generation + 1.

        When it cannot be granted the claim is left untouched, the request is recorded under
        `refs/integrator/expansions/` for the coordinator, and ReviewRequired says where.
        """
        self.canonical.refresh()
        claim = self.claims.live(request.task_id)
        view = claim.view
        moved = _moved_on(request, claim)
        if moved is not None:
            raise self._refuse(request, claim, moved)
        old = claim.contract
        written = written_already(self.canonical, old, request)
        if written is not None:
            raise self._refuse(request, claim, written)
        paths = tuple(dict.fromkeys([*old.paths, *request.add_paths]))
        resources = tuple(dict.fromkeys([*old.resources, *request.add_resources]))
        now = self.claims.now()
        new_request = IssueRequest(
            task_id=request.task_id,
            paths=paths,
            deny=tuple(old.deny),
            resources=resources,
            attempt_id=old.attempt_id,
            base=old.base_commit,
            lease=max(view.lease_expires_at - now, timedelta(minutes=1)),
            holder=old.lease.holder,
            max_patch_bytes=old.max_patch_bytes,
            worktree_id=old.worktree_id,
        )
        policy = self.canonical.ref(refnames.POLICY)
        contract = build_contract(self.canonical, new_request, view.generation + 1, now)
        key = issued_key_for(contract, verdict_keys.trusted(self.canonical.repo))
        state = claim_state(
            contract,
            state="live",
            lease_expires_at=contract.lease.expires_at,
            event="expand",
            reason=f"added paths {list(request.add_paths)} resources {list(request.add_resources)}"
            f" (workspace tree {request.workspace_tree}, head {request.workspace_head})",
            grants=(
                *view.grants,
                Grant(
                    contract.ownership_generation,
                    tuple(p for p in request.add_paths if p not in old.paths),
                    request.workspace_head or old.base_commit,
                ),
            ),
            attempt_key=key.public,
        )
        commit = write_claim_commit(self.canonical, contract, state, claim.oid, now)

        def check() -> None:
            found = overlaps_with_live(self.canonical, request.task_id, paths, resources)
            if found:
                lines = "; ".join(f"{task}: {o.describe()}" for task, o in found)
                raise self._refuse(
                    request,
                    claim,
                    f"it conflicts with live claims ({lines})",
                    conflicts=sorted({task for task, _ in found}),
                )

        def close_pending() -> list[transaction.RefOp]:
            # The same request refused earlier (say, while another claim held the paths) is
            # closed in the same transaction, so it never shows as pending after its grant.
            ref = expansion_ref(request.task_id, request.request_id)
            pending = self.canonical.ref(ref)
            if pending is None:
                return []
            record = ExpansionRecord(
                task_id=request.task_id,
                request_id=request.request_id,
                state="granted",
                event="grant",
                at=now,
                reason=f"granted as generation {contract.ownership_generation}",
                live_generation=contract.ownership_generation,
                live_contract_digest=contract.digest,
            )
            grant = write_expansion_commit(self.canonical, request, record, pending)
            return [transaction.update(ref, grant, pending)]

        event = f"expand {request.task_id} generation {contract.ownership_generation}"
        self.claims.go_live(
            request.task_id, commit, claim.oid, event, check, close_pending, policy=policy
        )
        key_store(self.canonical).save(key)
        return contract

    def file(self, request: ExpansionRequest) -> OwnershipContract | ExpansionEntry:
        """An agent's request (MCP `request_expansion`, `contract request-expansion --send`):
        recorded as pending for the coordinator, who grants it (`contract expand --id`) or
        dismisses it; the agent decides nothing. Only what the policy's `[expansion]
        auto_grant` covers is granted now, through `expand` and every check it makes.

        A request filed before is answered with its record; one for a claim that moved on is
        refused (ReviewRequired, recorded) as `expand` refuses it.
        """
        self.canonical.refresh()
        # Within the policy in force's [limits], as `contract expand` reads a request file.
        parse_request(request.to_json().encode(), limits=self._policy().contract_limits)
        known = find_expansion(self.canonical, request.request_id)
        if known is not None:
            return known
        claim = self.claims.live(request.task_id)
        moved = _moved_on(request, claim)
        if moved is not None:
            raise self._refuse(request, claim, moved)
        why = not_automatic(self._policy(), request)
        if why is None:
            return self.expand(request)
        return self._record(request, claim, f"waits for the coordinator: {why}", "request")

    def _policy(self) -> Policy:
        return self.canonical.policy_state().policy

    def _refuse(
        self,
        request: ExpansionRequest,
        claim: Claim,
        why: str,
        *,
        conflicts: list[str] | None = None,
    ) -> ReviewRequired:
        """Record a refused expansion request for review; the error to raise says where."""
        entry = self._record(request, claim, why, "refuse", conflicts)
        rid = request.request_id
        return ReviewRequired(
            f"expansion of {request.task_id!r} not granted: {why}. The claim was not changed; "
            f"request {rid} waits for review as {entry.ref} (`integrator contract list` shows "
            f"it, `integrator contract dismiss {rid}` closes it)"
        )

    def _record(
        self,
        request: ExpansionRequest,
        claim: Claim,
        why: str,
        event: Literal["request", "refuse"],
        conflicts: list[str] | None = None,
    ) -> ExpansionEntry:
        """Record `request` as pending (the claim is not touched)."""
        ref = expansion_ref(request.task_id, request.request_id)
        record = ExpansionRecord(
            task_id=request.task_id,
            request_id=request.request_id,
            state="pending",
            event=event,
            at=self.claims.now(),
            reason=why,
            live_generation=claim.view.generation,
            live_contract_digest=claim.view.contract_digest,
            live_state=claim.view.state,
            conflicts_with=conflicts or [],
        )
        for attempt in range(3):  # only an identical request refused at the same moment races
            parent = self.canonical.ref(ref)
            commit = write_expansion_commit(self.canonical, request, record, parent)
            try:
                self.claims.apply([transaction.update(ref, commit, parent)])
                break
            except RefMovedError:
                if attempt == 2:
                    raise
        return ExpansionEntry(ref, commit, record, request)

    def dismiss(
        self, request_id: str, reason: str = "dismissed by the coordinator"
    ) -> ExpansionEntry:
        """Close a pending expansion request without granting it (the claim is not touched)."""
        self.canonical.refresh()
        entry = find_expansion(self.canonical, request_id)
        if entry is None:
            raise UsageError(f"no expansion request {request_id!r} (see integrator contract list)")
        if entry.record.state != "pending":
            raise ClaimConflictError(
                f"expansion request {request_id} is already {entry.record.state}"
            )
        record = entry.record.model_copy(
            update={
                "state": "dismissed",
                "event": "dismiss",
                "at": self.claims.now(),
                "reason": reason,
                "conflicts_with": [],
            }
        )
        commit = write_expansion_commit(self.canonical, entry.request, record, entry.commit)
        self.claims.apply([transaction.update(entry.ref, commit, entry.commit)])
        return ExpansionEntry(entry.ref, commit, record, entry.request)
