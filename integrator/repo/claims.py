"""Claims as refs: `refs/integrator/claims/<taskId>` and its history.

Every change to a claim (issue, renew, reclaim, expand, revoke, consume) is a new commit on
the claim's chain whose tree holds `contract.json` (the live contract) and `claim.json`
(its state), so `git log` of the ref is the claim's history. Every write is a
compare-and-swap through `git update-ref --stdin`.

An expansion request that cannot be granted leaves the claim untouched and is recorded on
its own chain (see `expansions.py`), where the coordinator finds it.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from integrator.documents.contract import (
    CONTRACT_SCHEMA,
    OwnershipContract,
    parse_contract,
)
from integrator.errors import (
    ClaimConflictError,
    ConfigurationError,
    RefMovedError,
    ReviewRequired,
    UsageError,
)
from integrator.fence.overlap import Overlap, find_overlaps
from integrator.repo import git
from integrator.repo.canonical import Canonical, Claim, signature
from integrator.repo.expansions import (
    ExpansionEntry,
    ExpansionRecord,
    ExpansionRequest,
    expansion_ref,
    expansions,
    find_expansion,
    write_expansion_commit,
)
from integrator.repo.packs import ObjectBuffer, commit_bytes, flush_loose, tree_bytes

CLAIM_SCHEMA = "integrator.claim.v1"
DEFAULT_MAX_PATCH_BYTES = 10 * 1024 * 1024


def new_attempt_id(task_id: str) -> str:
    return f"{task_id[:40]}-{secrets.token_hex(4)}"


def claim_state(
    contract: OwnershipContract,
    *,
    state: str,
    lease_expires_at: datetime,
    event: str,
    staging_commit: str | None = None,
    candidate: str | None = None,
    reason: str | None = None,
) -> dict[str, object]:
    doc: dict[str, object] = {
        "schema": CLAIM_SCHEMA,
        "event": event,
        "taskId": contract.task_id,
        "attemptId": contract.attempt_id,
        "generation": contract.ownership_generation,
        "contractDigest": contract.digest,
        "policyDigest": contract.policy_digest,
        "state": state,
        "leaseExpiresAt": lease_expires_at.isoformat(),
    }
    if staging_commit:
        doc["stagingCommit"] = staging_commit
    if candidate:
        doc["candidate"] = candidate
    if reason:
        doc["reason"] = reason
    return doc


def write_claim_commit(
    canonical: Canonical,
    contract: OwnershipContract,
    state: dict[str, object],
    parent: str | None,
    now: datetime,
    *,
    objects: ObjectBuffer | None = None,
) -> str:
    """Write (objects only, no ref) a claim commit holding `contract` and `state`.

    With `objects`, the commit and its tree and blobs stay pending there (the caller
    flushes them with its own); otherwise they are written at once, as one pack.
    """
    buffer = objects if objects is not None else ObjectBuffer(canonical.repo)
    contract_blob = buffer.add("blob", contract.to_json().encode() + b"\n")
    state_blob = buffer.add("blob", json.dumps(state, indent=2).encode() + b"\n")
    tree = buffer.add(
        "tree",
        tree_bytes(
            {b"contract.json": (b"100644", contract_blob), b"claim.json": (b"100644", state_blob)}
        ),
    )
    event = state["event"]
    message = (
        f"{event}: {contract.task_id} generation {contract.ownership_generation} "
        f"attempt {contract.attempt_id}\n"
    )
    if state.get("reason"):
        message += f"\n{state['reason']}\n"
    if state.get("stagingCommit"):
        message += (
            f"\nStaging-Commit: {state['stagingCommit']}\nCandidate: {state.get('candidate')}\n"
        )
    sig = signature(now)
    parents = [bytes.fromhex(parent)] if parent else []
    commit = buffer.add("commit", commit_bytes(tree, parents, sig, sig, message)).hex()
    if objects is None:
        flush_loose(buffer)  # a one-off claim operation: a pack of four would pile up
    return commit


@dataclass(frozen=True)
class IssueRequest:
    task_id: str
    paths: tuple[str, ...]
    deny: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    attempt_id: str | None = None
    base: str | None = None
    lease: timedelta = timedelta(minutes=30)
    holder: str = "agent"
    max_patch_bytes: int = DEFAULT_MAX_PATCH_BYTES
    worktree_id: str | None = None


def _identity(canonical: Canonical) -> str:
    identity = canonical.identity
    if identity is None:
        raise ConfigurationError(
            f"cannot derive the identity of {canonical.path} (a shallow clone?); issue "
            "contracts from the canonical repository, or set `git config integrator.repoId`"
        )
    return identity


def build_contract(
    canonical: Canonical, request: IssueRequest, generation: int, now: datetime
) -> OwnershipContract:
    """A validated contract for `request` against the repository's live policy."""
    base_rev = request.base or (
        canonical.queue_ref if canonical.ref(canonical.queue_ref) else "HEAD"
    )
    base = str(git.resolve_commit(canonical.repo, base_rev).id)
    doc: dict[str, object] = {
        "schema": CONTRACT_SCHEMA,
        "repo": _identity(canonical),
        "taskId": request.task_id,
        "attemptId": request.attempt_id or new_attempt_id(request.task_id),
        "baseCommit": base,
        "ownershipGeneration": generation,
        "paths": list(request.paths),
        "deny": list(request.deny),
        "resources": list(request.resources),
        "lease": {
            "holder": request.holder,
            "expiresAt": (now + request.lease).isoformat().replace("+00:00", "Z"),
        },
        "maxPatchBytes": request.max_patch_bytes,
        "policyDigest": canonical.policy_state().digest,
    }
    if request.worktree_id:
        doc["worktreeId"] = request.worktree_id
    return parse_contract(json.dumps(doc))


def overlaps_with_live(
    canonical: Canonical,
    task_id: str,
    paths: tuple[str, ...] | list[str],
    resources: tuple[str, ...] | list[str],
) -> list[tuple[str, Overlap]]:
    shared = canonical.policy_state().policy.shared.resources
    found: list[tuple[str, Overlap]] = []
    for other in canonical.claims():
        if other.view.task_id == task_id or other.view.state != "live":
            continue
        for overlap in find_overlaps(
            paths,
            resources,
            other.contract.paths,
            other.contract.resources,
            shared_resources=shared,
        ):
            found.append((other.view.task_id, overlap))
    return found


def _refuse_overlaps(found: list[tuple[str, Overlap]]) -> None:
    if found:
        lines = "; ".join(f"{task}: {overlap.describe()}" for task, overlap in found)
        raise ClaimConflictError(
            f"overlaps a live claim ({lines}); wait for it, split the work, or pass --force-shared"
        )


class Claims:
    """The coordinator's operations on claims. Each one is a single compare-and-swap."""

    def __init__(self, canonical: Canonical) -> None:
        self.canonical = canonical

    def _now(self) -> datetime:
        return self.canonical.clock()

    def _cas(self, task_id: str, new: str, old: str | None) -> None:
        self._apply([git.update(Canonical.claim_ref(task_id), new, old)])

    def _apply(self, ops: list[git.RefOp]) -> None:
        if git.durable(self.canonical.repo):
            git.sync_objects(self.canonical.repo)
        self.canonical.updater.apply(ops)

    def _live(self, task_id: str) -> Claim:
        claim = self.canonical.claim(task_id)
        if claim is None:
            raise ConfigurationError(f"no claim for task {task_id!r}")
        return claim

    def issue(self, request: IssueRequest, *, force_shared: bool = False) -> OwnershipContract:
        """Issue a contract and register its claim; refuses overlap with live claims."""
        now = self._now()
        previous = self.canonical.claim(request.task_id)
        if previous is not None and previous.view.state == "live":
            raise ClaimConflictError(
                f"task {request.task_id!r} already has a live claim (generation "
                f"{previous.view.generation}); use renew, reclaim or expand"
            )
        if not force_shared:
            _refuse_overlaps(
                overlaps_with_live(
                    self.canonical, request.task_id, request.paths, request.resources
                )
            )
        generation = previous.view.generation + 1 if previous else 1
        contract = build_contract(self.canonical, request, generation, now)
        state = claim_state(
            contract, state="live", lease_expires_at=contract.lease.expires_at, event="issue"
        )
        parent = previous.oid if previous else None
        commit = write_claim_commit(self.canonical, contract, state, parent, now)
        self._cas(request.task_id, commit, parent)
        return contract

    def renew(self, task_id: str, until: datetime) -> Claim:
        """Extend the lease; same generation and contract (the agent's file stays valid).

        Never shortens it: a new expiry before the current one is refused, since a lease cut
        short would let `reclaim` take the task from an agent that is still inside its lease.
        """
        claim = self._live(task_id)
        if claim.view.state != "live":
            raise ClaimConflictError(f"claim {task_id!r} is {claim.view.state}; cannot renew")
        now = self._now()
        if until <= now:
            raise UsageError(f"--until {until.isoformat()} is not in the future")
        current = claim.view.lease_expires_at
        if until < current:
            raise UsageError(
                f"--until {until.isoformat()} is before the current lease expiry "
                f"{current.isoformat()}; renew only extends a lease (revoke or reclaim "
                "--force ends one early)"
            )
        state = claim_state(claim.contract, state="live", lease_expires_at=until, event="renew")
        commit = write_claim_commit(self.canonical, claim.contract, state, claim.oid, now)
        self._cas(task_id, commit, claim.oid)
        return self.canonical.claim_at(commit)

    def reclaim(
        self,
        task_id: str,
        *,
        force: bool = False,
        holder: str | None = None,
        lease: timedelta = timedelta(minutes=30),
        base: str | None = None,
    ) -> OwnershipContract:
        """Take over an expired lease: generation + 1, a new attempt; the old one is fenced."""
        claim = self._live(task_id)
        now = self._now()
        if claim.view.state == "live" and now < claim.view.lease_expires_at and not force:
            raise ClaimConflictError(
                f"lease of {task_id!r} runs until {claim.view.lease_expires_at.isoformat()}; "
                "reclaim after it expires, or pass --force"
            )
        old = claim.contract
        request = IssueRequest(
            task_id=task_id,
            paths=tuple(old.paths),
            deny=tuple(old.deny),
            resources=tuple(old.resources),
            base=base,
            lease=lease,
            holder=holder or old.lease.holder,
            max_patch_bytes=old.max_patch_bytes,
            worktree_id=old.worktree_id,
        )
        contract = build_contract(self.canonical, request, claim.view.generation + 1, now)
        state = claim_state(
            contract,
            state="live",
            lease_expires_at=contract.lease.expires_at,
            event="reclaim",
            reason=f"took over from attempt {old.attempt_id} (generation {old.ownership_generation})",
        )
        commit = write_claim_commit(self.canonical, contract, state, claim.oid, now)
        self._cas(task_id, commit, claim.oid)
        return contract

    def expand(self, request: ExpansionRequest) -> OwnershipContract:
        """CAS on generation and live digest, check all other claims, issue generation + 1.

        When it cannot be granted the claim is left untouched, the request is recorded under
        `refs/integrator/expansions/` for the coordinator, and ReviewRequired says where.
        """
        claim = self._live(request.task_id)
        view = claim.view
        if view.state != "live":
            raise self._route_to_review(request, claim, f"the claim is {view.state}")
        if (
            view.generation != request.expected_generation
            or view.contract_digest != request.contract_digest
        ):
            raise self._route_to_review(
                request,
                claim,
                f"expected generation {request.expected_generation} / "
                f"{request.contract_digest}, the live claim is generation {view.generation} / "
                f"{view.contract_digest}",
            )
        old = claim.contract
        paths = tuple(dict.fromkeys([*old.paths, *request.add_paths]))
        resources = tuple(dict.fromkeys([*old.resources, *request.add_resources]))
        found = overlaps_with_live(self.canonical, request.task_id, paths, resources)
        if found:
            lines = "; ".join(f"{task}: {o.describe()}" for task, o in found)
            raise self._route_to_review(
                request,
                claim,
                f"it conflicts with live claims ({lines})",
                conflicts=sorted({task for task, _ in found}),
            )
        now = self._now()
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
        contract = build_contract(self.canonical, new_request, view.generation + 1, now)
        state = claim_state(
            contract,
            state="live",
            lease_expires_at=contract.lease.expires_at,
            event="expand",
            reason=f"added paths {list(request.add_paths)} resources {list(request.add_resources)}"
            f" (tree {request.tree_digest}, diff {request.diff_digest})",
        )
        commit = write_claim_commit(self.canonical, contract, state, claim.oid, now)
        ops = [git.update(Canonical.claim_ref(request.task_id), commit, claim.oid)]
        # The same request refused earlier (say, while another claim held the paths) is
        # closed in the same transaction, so it never shows as pending after its grant.
        ref = expansion_ref(request.task_id, request.request_id)
        pending = self.canonical.ref(ref)
        if pending is not None:
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
            ops.append(
                git.update(
                    ref, write_expansion_commit(self.canonical, request, record, pending), pending
                )
            )
        self._apply(ops)
        return contract

    def _route_to_review(
        self,
        request: ExpansionRequest,
        claim: Claim,
        why: str,
        *,
        conflicts: list[str] | None = None,
    ) -> ReviewRequired:
        """Record a refused expansion request for review; the error to raise says where."""
        ref = expansion_ref(request.task_id, request.request_id)
        record = ExpansionRecord(
            task_id=request.task_id,
            request_id=request.request_id,
            state="pending",
            event="refuse",
            at=self._now(),
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
                self._apply([git.update(ref, commit, parent)])
                break
            except RefMovedError:
                if attempt == 2:
                    raise
        rid = request.request_id
        return ReviewRequired(
            f"expansion of {request.task_id!r} not granted: {why}. The claim was not changed; "
            f"request {rid} waits for review as {ref} (`integrator contract list` shows it, "
            f"`integrator contract dismiss {rid}` closes it)"
        )

    def dismiss_expansion(
        self, request_id: str, reason: str = "dismissed by the coordinator"
    ) -> ExpansionEntry:
        """Close a pending expansion request without granting it (the claim is not touched)."""
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
                "at": self._now(),
                "reason": reason,
                "conflicts_with": [],
            }
        )
        commit = write_expansion_commit(self.canonical, entry.request, record, entry.commit)
        self._apply([git.update(entry.ref, commit, entry.commit)])
        return ExpansionEntry(entry.ref, commit, record, entry.request)

    def revoke(self, task_id: str, reason: str = "revoked by the coordinator") -> Claim:
        claim = self._live(task_id)
        if claim.view.state != "live":
            raise ClaimConflictError(f"claim {task_id!r} is already {claim.view.state}")
        now = self._now()
        commit = self.revoke_commit(claim, reason, now)
        self._cas(task_id, commit, claim.oid)
        return self.canonical.claim_at(commit)

    def revoke_commit(self, claim: Claim, reason: str, now: datetime) -> str:
        state = claim_state(
            claim.contract,
            state="revoked",
            lease_expires_at=claim.view.lease_expires_at,
            event="revoke",
            reason=reason,
        )
        return write_claim_commit(self.canonical, claim.contract, state, claim.oid, now)

    def consume_commit(
        self,
        claim: Claim,
        staging: str,
        candidate: str,
        now: datetime,
        *,
        objects: ObjectBuffer | None = None,
    ) -> str:
        """The claim commit that records consumption by `staging` (written before the CAS)."""
        state = claim_state(
            claim.contract,
            state="consumed",
            lease_expires_at=claim.view.lease_expires_at,
            event="consume",
            staging_commit=staging,
            candidate=candidate,
        )
        return write_claim_commit(
            self.canonical, claim.contract, state, claim.oid, now, objects=objects
        )


def history(canonical: Canonical, task_id: str) -> list[tuple[str, dict[str, object], str]]:
    """(commit, claim state, message) for each commit of the claim's chain, newest first."""
    oid = canonical.ref(Canonical.claim_ref(task_id))
    out: list[tuple[str, dict[str, object], str]] = []
    while oid:
        commit = canonical.commit(oid)
        state = json.loads(canonical.blob_at(oid, "claim.json"))
        out.append((oid, state, commit.message))
        oid = str(commit.parent_ids[0]) if commit.parent_ids else None
    return out


__all__ = [
    "Claims",
    "ExpansionEntry",
    "ExpansionRecord",
    "ExpansionRequest",
    "IssueRequest",
    "build_contract",
    "expansion_ref",
    "expansions",
    "history",
]
