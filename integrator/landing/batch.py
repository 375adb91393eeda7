"""Landing gated candidates: merge onto the queue head, staging commits, one ref transaction.

A batch is planned in order against the queue head as each earlier candidate leaves it:
candidate k's staging commit has candidate k-1's as its parent. Then one
`git update-ref --stdin` transaction verifies the policy ref, moves the queue (and the
target when it follows) from the head read at planning time to the last staging commit,
and consumes every landed claim at the value read at planning time. All or nothing.

The landing receives a `LandingContext` (`context`), never the engine that drives it;
what it lands is proven in `proof`.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

import pygit2

from integrator import faults, refnames
from integrator.documents.claim import Claim
from integrator.documents.contract import OwnershipContract
from integrator.documents.envelope import OBJECT_ID_RE
from integrator.documents.trailers import TRAILER_REVERTS, staging_message, trailers
from integrator.documents.verdict import Code, Decision, Verdict, Violation
from integrator.errors import ConfigurationError, RefMovedError
from integrator.fence.checks import recovered_verdict
from integrator.fence.live import check_live
from integrator.landing.context import Head, LandingContext
from integrator.landing.evaluation import Complete
from integrator.landing.history import HEAD_SETTLE
from integrator.landing.merge import merge_onto_head
from integrator.landing.proof import merge_violations
from integrator.plumbing import git, transaction
from integrator.plumbing.packs import commit_bytes
from integrator.records.canonical import Canonical, signature
from integrator.records.claims import REVERT_TASK_PREFIX


@dataclass
class BatchOutcome:
    """Per candidate: its final verdict, or None when it must be planned again (a ref
    moved under the batch, or its evaluation saw a policy newer than the batch read)."""

    verdicts: list[Verdict | None]
    moved: RefMovedError | None = None


@dataclass(kw_only=True)
class _Planned:
    position: int
    ev: Complete
    staging: str
    tree: str
    head_oid: str
    claim_ref: str
    claim_oid: str
    consumed: str = field(default="")


def land_batch(ctx: LandingContext, evaluations: Iterable[Complete]) -> BatchOutcome:
    """Plan and land `evaluations` (all ACCEPTED by the gate) in one transaction.

    They may come from an iterator that produces them while earlier ones are planned;
    nothing is read before the first arrives, and every one is consumed.
    """
    stream = iter(evaluations)
    first = next(stream, None)
    if first is None:
        return BatchOutcome([])
    canonical = ctx.canonical
    # Whatever lands shares the policy read here: the transaction verifies it, and a
    # candidate evaluated under another is fenced by `recheck` (or, evaluated under a newer
    # one, planned again).
    policy_oid = canonical.ref(refnames.POLICY)
    follows = canonical.policy_state(policy_oid).policy.integration.target_follows_queue
    queue_oid, target_oid = _read_heads(canonical, follows)
    head_oid = queue_oid or target_oid
    if head_oid is None:
        for _ in stream:
            pass  # every one consumed, as promised, before refusing them all
        raise ConfigurationError(
            f"neither {canonical.queue_ref} nor {canonical.target_ref} exists; run integrator init"
        )
    verdicts: list[Verdict | None] = []
    seen: list[Complete] = []
    planned: list[_Planned] = []
    tasks: dict[str, _Planned] = {}  # task id → the plan consuming its claim in this batch
    repeats: list[tuple[int, _Planned]] = []  # the same submission again in this batch
    queue_head = canonical.commit(head_oid)
    head = Head(head_oid, queue_head.tree_id.raw, queue_head)
    sig = signature(canonical.clock())
    early: RefMovedError | None = None  # the policy moved while the batch was evaluated
    for position, ev in enumerate(itertools.chain([first], stream)):
        verdicts.append(None)
        seen.append(ev)
        first_plan = tasks.get(ev.contract.task_id)
        if first_plan is not None and _same_landing(first_plan.ev, ev):
            repeats.append((position, first_plan))  # lands once; answered with that landing
            continue
        result = _plan_one(ctx, ev, head, target_oid, policy_oid, set(tasks), sig)
        if result is None:
            # _plan_one found the ref at the policy this evaluation was made under
            early = RefMovedError(refnames.POLICY, ev.policy_oid, policy_oid)
            continue  # planned again next round
        if isinstance(result, Verdict):
            verdicts[position] = result
            continue
        result.position = position
        planned.append(result)
        tasks[ev.contract.task_id] = result
        # The next candidate merges onto this staging commit, still in memory.
        head = Head(result.staging, bytes.fromhex(result.tree), queue_head)
    # Every object of the batch in one pack, before the transaction names any of them.
    ctx.objects.flush()
    if not planned:
        return BatchOutcome(verdicts, early)
    ops = _transaction(canonical, planned, policy_oid, queue_oid, target_oid)
    if ctx.durable:
        git.sync_objects(ctx.repo)
    faults.point("before-transaction")
    try:
        canonical.updater.apply(ops, on_prepared=lambda: faults.point("after-prepare"))
    except RefMovedError as moved:
        return BatchOutcome(verdicts, moved)
    faults.point("after-commit")
    _landed(planned, repeats, seen, verdicts)
    return BatchOutcome(verdicts, early)


def _landed(
    planned: list[_Planned],
    repeats: list[tuple[int, _Planned]],
    seen: list[Complete],
    verdicts: list[Verdict | None],
) -> None:
    """The verdicts of a committed batch: each landing's, and its repeats' (recovered)."""
    for plan in planned:
        verdicts[plan.position] = plan.ev.with_violations(
            [], tree=plan.tree, staging_commit=plan.staging, queue_head=plan.head_oid
        )
    for position, plan in repeats:
        ev = seen[position]
        verdicts[position] = recovered_verdict(
            ev.contract, str(ev.verdict.candidate), plan.tree, plan.staging
        )


def _transaction(
    canonical: Canonical,
    planned: list[_Planned],
    policy_oid: str | None,
    queue_oid: str | None,
    target_oid: str | None,
) -> list[transaction.RefOp]:
    """Verify the policy, move the queue (and the target), consume every landed claim."""
    ops: list[transaction.RefOp] = []
    if policy_oid is not None:
        ops.append(transaction.verify(refnames.POLICY, policy_oid))
    last = planned[-1].staging
    ops.append(transaction.update(canonical.queue_ref, last, queue_oid))
    for plan in planned:
        ops.append(transaction.update(plan.claim_ref, plan.consumed, plan.claim_oid))
    integration = planned[0].ev.policy.policy.integration
    if integration.target_follows_queue and target_oid is not None:
        ops.append(transaction.update(canonical.target_ref, last, target_oid))
    return ops


def _same_landing(first: Complete, again: Complete) -> bool:
    """The same candidate under the same contract: one landing, however often submitted."""
    return (
        first.verdict.candidate == again.verdict.candidate
        and first.contract.digest == again.contract.digest
    )


def _read_heads(canonical: Canonical, follows: bool) -> tuple[str | None, str | None]:
    """Read the queue and target refs, waiting out another integrator's commit.

    Two refs cannot be read atomically, and a transaction renames its lock files one
    after the other: a reader may see the queue moved and the target not yet (or read
    them either side of a whole commit). When the target should follow the queue, a
    difference is read again a few times before it is believed; one that persists was
    made outside the queue. Anything else stale is caught by the transaction's
    compare-and-swap.
    """
    queue_oid = canonical.ref(canonical.queue_ref)
    target_oid = canonical.ref(canonical.target_ref)
    for pause in HEAD_SETTLE:
        if not follows or queue_oid is None or target_oid is None or queue_oid == target_oid:
            break
        time.sleep(pause)
        queue_oid = canonical.ref(canonical.queue_ref)
        target_oid = canonical.ref(canonical.target_ref)
    return queue_oid, target_oid


# --- one candidate -------------------------------------------------------------------------


def _plan_one(  # noqa: PLR0911 — each stage stops with its own verdict
    ctx: LandingContext,
    ev: Complete,
    head: Head,
    target_oid: str | None,
    policy_oid: str | None,
    tasks: set[str],
    sig: pygit2.Signature,
) -> _Planned | Verdict | None:
    """Merge one candidate onto `head` and write its staging and consumed-claim commits;
    None when it must be planned again in the next round."""
    contract, base, policy = ev.contract, ev.base, ev.policy
    claim_ref = Canonical.claim_ref(contract.task_id)
    claim_oid = ctx.canonical.ref(claim_ref)
    claim = ctx.canonical.claim_at(claim_oid) if claim_oid else None
    if ev.claim is not None and claim_oid != ev.claim.oid and claim is not None:
        # A concurrent integrator may have landed this very candidate meanwhile: the
        # answer is then its landing, not a fence.
        earlier = ctx.history.earlier_landing(contract, claim, str(ev.verdict.candidate))
        if earlier is not None:
            return earlier
    if policy_oid != ev.policy_oid and ctx.canonical.ref(refnames.POLICY) == ev.policy_oid:
        # Evaluated under a policy set after this landing read the ref (evaluations are
        # made while earlier candidates are planned): not stale, early. The transaction's
        # check of the policy it read fails, and the next round plans this one again.
        return None
    stale = recheck(ev, claim_oid, claim, policy_oid, tasks, ctx.canonical.clock())
    if stale:
        return ev.with_violations(stale, decision=Decision.FENCED)
    assert claim is not None and claim_oid is not None

    def fenced(violations: list[Violation], decision: Decision | None = None) -> Verdict:
        return ev.with_violations(violations, decision=decision, queue_head=head.oid)

    misplaced = _placement(ctx, ev, head, target_oid, tasks)
    if misplaced:
        return fenced(misplaced)
    outcome = merge_onto_head(
        ctx.repo,
        base_commit=base,
        head_commit=head.queue,
        head_tree=head.tree,
        candidate_commit=ev.candidate,
        reader=ctx.trees,
        objects=ctx.objects,
    )
    if outcome.tree is None:
        return fenced(
            [
                Violation(code=Code.MERGE_CONFLICT, path=p, detail="conflicts with the queue head")
                for p in outcome.conflicts
            ]
            or [Violation(code=Code.MERGE_CONFLICT, detail="the merge did not produce a tree")]
        )
    merged = bytes.fromhex(outcome.tree)
    problems = merge_violations(ctx, ev, head, merged) if head.oid != str(base.id) else []
    if problems:
        review = all(v.code is Code.RESOURCE_CONFLICT for v in problems)
        if review and policy.policy.integration.resource_conflict == "review":
            return fenced(problems, Decision.REVIEW)
        return fenced(problems)
    staging, consumed = _write(ctx, ev, head, merged, claim, sig)
    return _Planned(
        position=0,
        ev=ev,
        staging=staging,
        tree=outcome.tree,
        head_oid=head.oid,
        claim_ref=claim_ref,
        claim_oid=claim_oid,
        consumed=consumed,
    )


def recheck(
    ev: Complete,
    claim_oid: str | None,
    claim: Claim | None,
    policy_oid: str | None,
    tasks: set[str],
    now: datetime,
) -> list[Violation]:
    """What changed since the gate read the claim and the policy (pure): each moved ref,
    the live checks on the claim as it is now, and a second landing of one claim."""
    contract, policy = ev.contract, ev.policy
    out: list[Violation] = []
    if ev.claim is not None and claim_oid != ev.claim.oid:
        out.append(_moved(Canonical.claim_ref(contract.task_id), claim_oid, ev.claim.oid))
    live = check_live(contract, claim.view if claim else None, policy.digest, now)
    if policy_oid != ev.policy_oid:
        out.append(_moved(refnames.POLICY, policy_oid, ev.policy_oid))
        live.append(Violation(code=Code.POLICY_CHANGED, detail=f"the policy moved to {policy_oid}"))
    if contract.task_id in tasks:
        live.append(
            Violation(
                code=Code.CLAIM_CONSUMED,
                detail="an earlier candidate of the same claim lands in this transaction",
            )
        )
    return [*out, *live]


def _placement(
    ctx: LandingContext, ev: Complete, head: Head, target_oid: str | None, tasks: set[str]
) -> list[Violation]:
    """The base must be on the queue; a target that follows the queue must be at its head."""
    base, policy = ev.base, ev.policy
    canonical = ctx.canonical
    # Staging commits of this batch descend from the real queue head: checking there is
    # the same question.
    if not ctx.history.on_queue(str(base.id), head.queue):
        return [
            Violation(
                code=Code.BASE_NOT_ON_QUEUE,
                detail=f"base {base.id} is not an ancestor of the queue head {head.oid}; "
                f"rebase onto {canonical.queue_ref}",
            )
        ]
    follows = policy.policy.integration.target_follows_queue
    if follows and target_oid is not None and not tasks and target_oid != head.oid:
        return [
            Violation(
                code=Code.REF_MOVED,
                resource=canonical.target_ref,
                detail=f"{canonical.target_ref} ({target_oid}) moved outside the queue "
                f"({head.oid}); a release manager must reconcile them",
            )
        ]
    return []


def _write(
    ctx: LandingContext,
    ev: Complete,
    head: Head,
    merged: bytes,
    claim: Claim,
    sig: pygit2.Signature,
) -> tuple[str, str]:
    """Write (into the object buffer) the staging commit and the consumed-claim commit."""
    contract, cand, policy = ev.contract, ev.candidate, ev.policy
    message = _staging_message(contract, cand, policy.digest)
    staging = ctx.objects.add(
        "commit", commit_bytes(merged, [bytes.fromhex(head.oid)], cand.author, sig, message)
    ).hex()
    consumed = ctx.claims.consume_commit(
        claim, staging, str(cand.id), ctx.canonical.clock(), objects=ctx.objects
    )
    return staging, consumed


def _staging_message(
    contract: OwnershipContract, candidate: pygit2.Commit, policy_digest: str
) -> str:
    summary = candidate.message.splitlines()[0] if candidate.message.strip() else "candidate"
    message = staging_message(
        summary,
        candidate=str(candidate.id),
        task_id=contract.task_id,
        attempt_id=contract.attempt_id,
        generation=contract.ownership_generation,
        contract_digest=contract.digest,
        policy_digest=policy_digest,
        base=contract.base_commit,
    )
    # A revert's landing says what it undoes on the queue itself: a reader without the
    # candidate's objects (another host's mirror, an agent's clone) still sees the revert.
    # Only under the revert's own task (`integrator revert` issues it): an agent's
    # candidate that says it reverts another landing is not carried.
    reverts = trailers(candidate.message).get(TRAILER_REVERTS)
    if (
        reverts
        and OBJECT_ID_RE.fullmatch(reverts)
        and contract.task_id == REVERT_TASK_PREFIX + reverts[:12]
    ):
        message += f"{TRAILER_REVERTS}: {reverts}\n"
    return message


def _moved(ref: str, now_oid: str | None, then_oid: str | None) -> Violation:
    return Violation(
        code=Code.REF_MOVED,
        resource=ref,
        detail=f"{ref} moved to {now_oid or 'nothing'} after the check "
        f"(read {then_oid or 'nothing'})",
    )
