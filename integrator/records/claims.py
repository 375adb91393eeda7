"""Claims as refs: `refs/integrator/claims/<taskId>` and its history.

Every change to a claim (issue, renew, reclaim, expand, revoke, consume) is a new commit on
the claim's chain whose tree holds `contract.json` (the live contract) and `claim.json`
(its state), so `git log` of the ref is the claim's history. Every write is a
compare-and-swap through `git update-ref --stdin`.

Expansion requests (grants and the record of those refused) are `integrator.records.expansions`.
"""

from __future__ import annotations

import json
import random
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from integrator import faults, jsontext, refnames
from integrator.docpath import doc
from integrator.documents.attempt_key import AttemptKey, new_key
from integrator.documents.claim import Claim, claim_state
from integrator.documents.contract import OwnershipContract, parse_contract
from integrator.documents.rules import CONTRACT_SCHEMA
from integrator.errors import (
    ClaimConflictError,
    ConfigurationError,
    RefMovedError,
    UsageError,
)
from integrator.fence.overlap import Overlap, find_overlaps
from integrator.limits import DEFAULT_MAX_PATCH_BYTES
from integrator.plumbing import git, transaction
from integrator.plumbing.packs import ObjectBuffer, flush_loose, tree_bytes
from integrator.records import verdict_keys
from integrator.records.archive_index import archived_claim, record_tip
from integrator.records.attempt_keys import key_store
from integrator.records.canonical import Canonical, signature
from integrator.records.pause import refuse_if_paused


def new_attempt_id(task_id: str) -> str:
    return f"{task_id[:40]}-{secrets.token_hex(4)}"


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
    ref = Canonical.claim_ref(contract.task_id)
    commit = canonical.authority_commit(buffer, ref, tree, parents, sig, message)
    if objects is None:
        flush_loose(buffer)  # a one-off claim operation: a pack of four would pile up
    return commit


REVERT_TASK_PREFIX = "revert-"  # integrator revert's tasks: revert-<staging commit>


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
    policy = canonical.policy_state()  # its digest and its [limits], of one policy
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
        "policyDigest": policy.digest,
    }
    if request.worktree_id:
        doc["worktreeId"] = request.worktree_id
    return parse_contract(json.dumps(doc), limits=policy.policy.contract_limits)


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


LIVE_RETRIES = 8  # a lost race on the claims index: check the live set again, this often


def index_commit(
    canonical: Canonical, parent: str | None, event: str, now: datetime, *, objects: ObjectBuffer
) -> str:
    """The next commit of `refs/integrator/claims-index` (no tree content: a serial)."""
    tree = objects.add("tree", b"")
    sig = signature(now)
    parents = [bytes.fromhex(parent)] if parent else []
    return canonical.authority_commit(
        objects, refnames.CLAIMS_INDEX, tree, parents, sig, event + "\n"
    )


class Claims:
    """The coordinator's operations on claims. Each one is a single compare-and-swap.

    An operation that makes a claim live (issue, reclaim, expand) checks it against every
    other live claim and then, in one transaction, moves its claim ref *and* the claims
    index from the values read before the check: a concurrent one that made another claim
    live moved the index, so this one fails, reads the live set again and checks again.
    """

    def __init__(self, canonical: Canonical) -> None:
        self.canonical = canonical

    def now(self) -> datetime:
        return self.canonical.clock()

    def _cas(self, task_id: str, new: str, old: str | None) -> None:
        self.apply([transaction.update(Canonical.claim_ref(task_id), new, old)])

    def apply(self, ops: list[transaction.RefOp]) -> None:
        if git.durable(self.canonical.repo):
            git.sync_objects(self.canonical.repo)
        faults.point("before-claim-transaction")
        self.canonical.updater.apply(ops)

    def go_live(
        self,
        task_id: str,
        commit: str,
        parent: str | None,
        event: str,
        check: Callable[[], None],
        extra: Callable[[], list[transaction.RefOp]] = list,
        *,
        policy: str | None,
    ) -> None:
        """Move the claim ref from `parent` to `commit` and the claims index in one
        transaction, `check` (the overlap check; it raises to refuse) having seen the live
        claims as the index read before it stood, and the policy ref still at `policy` (the
        one the contract was built under). A lost race on the index runs `check` again; one
        on the claim ref itself, or a policy change, is the caller's RefMovedError.
        While new claims are paused (`integrator.records.pause`) it refuses, naming the reason."""
        for attempt in range(LIVE_RETRIES):
            index = self.canonical.ref(refnames.CLAIMS_INDEX)
            pause = refuse_if_paused(self.canonical)  # read after the index: see pause.py
            check()
            buffer = ObjectBuffer(self.canonical.repo)
            serial = index_commit(self.canonical, index, event, self.now(), objects=buffer)
            flush_loose(buffer)
            ops = [
                transaction.update(Canonical.claim_ref(task_id), commit, parent),
                transaction.update(refnames.CLAIMS_INDEX, serial, index),
                *extra(),
            ]
            if policy is not None:
                ops.insert(0, transaction.verify(refnames.POLICY, policy))
            ops.insert(0, transaction.verify(refnames.PAUSE, pause))
            try:
                self.apply(ops)
                return
            except RefMovedError as moved:
                retry = moved.ref in (refnames.CLAIMS_INDEX, refnames.PAUSE)
                if not retry or attempt == LIVE_RETRIES - 1:
                    raise
            time.sleep(random.uniform(0.001, 0.02) * (attempt + 1))

    def live(self, task_id: str) -> Claim:
        claim = self.canonical.claim(task_id)
        if claim is None:
            raise ConfigurationError(f"no claim for task {task_id!r}")
        ref = Canonical.claim_ref(task_id)
        problem = self.canonical.authority_problem(ref, claim.oid)
        if problem is not None:
            raise ConfigurationError(
                f"{ref} at {claim.oid[:12]} is not a claim a trusted authority key signed "
                f"({problem}): nothing is built on it; look at `git log {ref}` and revoke "
                f'or reissue from a signed commit ({doc("security.md")}, "Authority keys")'
            )
        return claim

    def issue(
        self, request: IssueRequest, *, force_shared: bool = False, revert: bool = False
    ) -> OwnershipContract:
        """Issue a contract and register its claim; refuses overlap with live claims.

        Task ids starting `revert-` are `integrator revert`'s (`revert=True`): an ordinary
        task of that name could hold the claim a revert needs and block it, or lend it its
        chain."""
        if request.task_id.startswith(REVERT_TASK_PREFIX) and not revert:
            raise UsageError(
                f"task ids starting {REVERT_TASK_PREFIX!r} are reserved for integrator revert"
            )
        self.canonical.refresh()
        now = self.now()
        previous = self.canonical.claim(request.task_id)
        if previous is not None and previous.view.state == "live":
            raise ClaimConflictError(
                f"task {request.task_id!r} already has a live claim (generation "
                f"{previous.view.generation}); use renew, reclaim or expand"
            )
        expected = previous.oid if previous else None  # the claim ref's value (None: absent)
        if previous is None:
            # A finished claim folded into the archive (`integrator refs archive`): the new
            # generation goes on from it, and its chain is the new claim's history.
            previous = archived_claim(self.canonical, request.task_id)
        generation = previous.view.generation + 1 if previous else 1
        policy = self.canonical.ref(refnames.POLICY)
        contract = build_contract(self.canonical, request, generation, now)
        key = issued_key_for(contract, verdict_keys.trusted(self.canonical.repo))
        state = claim_state(
            contract, state="live", lease_expires_at=contract.lease.expires_at, event="issue",
            attempt_key=key.public,
        )  # fmt: skip
        parent = previous.oid if previous else None
        commit = write_claim_commit(self.canonical, contract, state, parent, now)

        def check() -> None:
            if not force_shared:
                _refuse_overlaps(
                    overlaps_with_live(
                        self.canonical, request.task_id, request.paths, request.resources
                    )
                )

        event = f"issue {request.task_id} generation {generation}"
        self.go_live(request.task_id, commit, expected, event, check, policy=policy)
        key_store(self.canonical).save(key)
        return contract

    def renew(self, task_id: str, until: datetime) -> Claim:
        """Extend the lease; same generation and contract (the agent's file stays valid).

        Never shortens it: a new expiry before the current one is refused, since a lease cut
        short would let `reclaim` take the task from an agent that is still inside its lease.
        """
        self.canonical.refresh()
        claim = self.live(task_id)
        if claim.view.state != "live":
            raise ClaimConflictError(f"claim {task_id!r} is {claim.view.state}; cannot renew")
        now = self.now()
        if until <= now:
            raise UsageError(f"--until {until.isoformat()} is not in the future")
        current = claim.view.lease_expires_at
        if until < current:
            raise UsageError(
                f"--until {until.isoformat()} is before the current lease expiry "
                f"{current.isoformat()}; renew only extends a lease (revoke or reclaim "
                "--force ends one early)"
            )
        state = claim_state(
            claim.contract,
            state="live",
            lease_expires_at=until,
            event="renew",
            grants=claim.view.grants,
            attempt_key=claim.view.attempt_key,
        )
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
        self.canonical.refresh()
        claim = self.live(task_id)
        now = self.now()
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
        policy = self.canonical.ref(refnames.POLICY)
        contract = build_contract(self.canonical, request, claim.view.generation + 1, now)
        key = issued_key_for(contract, verdict_keys.trusted(self.canonical.repo))
        state = claim_state(
            contract,
            state="live",
            lease_expires_at=contract.lease.expires_at,
            event="reclaim",
            reason=f"took over from attempt {old.attempt_id} (generation {old.ownership_generation})",
            grants=claim.view.grants,
            attempt_key=key.public,
        )
        commit = write_claim_commit(self.canonical, contract, state, claim.oid, now)

        def check() -> None:
            # A revoked or consumed claim held nothing: others may have taken its paths.
            _refuse_overlaps(
                overlaps_with_live(self.canonical, task_id, contract.paths, contract.resources)
            )

        event = f"reclaim {task_id} generation {contract.ownership_generation}"
        self.go_live(task_id, commit, claim.oid, event, check, policy=policy)
        key_store(self.canonical).save(key)
        return contract

    def revoke(self, task_id: str, reason: str = "revoked by the coordinator") -> Claim:
        self.canonical.refresh()
        claim = self.live(task_id)
        if claim.view.state != "live":
            raise ClaimConflictError(f"claim {task_id!r} is already {claim.view.state}")
        now = self.now()
        commit = self.revoke_commit(claim, reason, now)
        self._cas(task_id, commit, claim.oid)
        return self.canonical.claim_at(commit)

    def revoke_commit(
        self, claim: Claim, reason: str, now: datetime, *, event: str = "revoke"
    ) -> str:
        state = claim_state(
            claim.contract,
            state="revoked",
            lease_expires_at=claim.view.lease_expires_at,
            event=event,
            reason=reason,
            grants=claim.view.grants,
            attempt_key=claim.view.attempt_key,
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
            grants=claim.view.grants,
            attempt_key=claim.view.attempt_key,
        )
        return write_claim_commit(
            self.canonical, claim.contract, state, claim.oid, now, objects=objects
        )


def issued_key_for(
    contract: OwnershipContract, verdict_keys: frozenset[str] = frozenset()
) -> AttemptKey:
    """A new key pair for `contract` (its public half goes into the claim commit), carrying
    the verdict keys its holder is to trust (the issuing repository's)."""
    return new_key(
        contract.task_id, contract.attempt_id, contract.ownership_generation, contract.digest,
        verdict_keys=tuple(sorted(verdict_keys)),
    )  # fmt: skip


def history(canonical: Canonical, task_id: str) -> list[tuple[str, dict[str, object], str]]:
    """(commit, claim state, message) for each commit of the claim's chain, newest first
    (of the archived chain when the claim was archived)."""
    oid = record_tip(canonical, "claims", task_id)
    out: list[tuple[str, dict[str, object], str]] = []
    while oid:
        commit = canonical.commit(oid)
        state = jsontext.loads(canonical.blob_at(oid, "claim.json"))
        out.append((oid, state, commit.message))
        oid = str(commit.parent_ids[0]) if commit.parent_ids else None
    return out
