"""Rebuilding the queue without an ejected landing: re-merge the later ones onto the last
good head, each proven again on what it now lands.

A landing is re-merged from what it landed: the change its staging commit made to the
queue (its parent → itself, the difference the fence proved), merged three-way onto the
new head, under the contract of the consumed claim that names the landing. (Its staging
commits are on the queue wherever the queue lives; the candidate commit itself need not be:
in remote mode it never reaches the server.) The landing's own checks decide it, reused as
they are: its base must be on the new queue (a base that held the ejected landing is not:
BASE_NOT_ON_QUEUE), the merge must be clean (MERGE_CONFLICT), and what the merge writes
beyond the landed change, the resources touched on both sides and colliding names are
proven as at landing time (`merge_violations`). One that fails is ejected too, with its
own code. No claim is read as live or consumed again: the claim was consumed by the
landing, and stays so.
"""

from __future__ import annotations

from dataclasses import dataclass

import pygit2

from integrator import refnames
from integrator.documents.contract import OwnershipContract
from integrator.documents.policy import PolicyState
from integrator.documents.promotion import Covered, Ejected, Rebuilt
from integrator.documents.trailers import TRAILER_CANDIDATE, trailers
from integrator.documents.verdict import Code, Decision, Violation
from integrator.fence.checks import check_diff, make_verdict
from integrator.fence.diff import TooManyChanges, recompute
from integrator.fence.trees import MalformedTree
from integrator.landing.context import Head, LandingContext
from integrator.landing.evaluation import Complete
from integrator.landing.merge import merge_onto_head
from integrator.landing.proof import merge_violations
from integrator.plumbing.packs import commit_bytes
from integrator.promotion.state import TRAILER_BASE, TRAILER_DIGEST, TRAILER_REPLACES
from integrator.records.canonical import Canonical, signature
from integrator.records.landings import TRAILER_LANDING, landing_name

_CLAIM_WALK = 10_000


@dataclass
class Rebuild:
    """The new queue head, the landings re-merged, and those ejected on the way."""

    head: str
    rebuilt: list[Rebuilt]
    ejected: list[Ejected]


def contract_of(canonical: Canonical, task: str, landing: str) -> OwnershipContract | None:
    """The contract of the claim consumption that names `landing` (walks the claim chain)."""
    oid = canonical.ref(Canonical.claim_ref(task))
    for _ in range(_CLAIM_WALK):
        if oid is None:
            return None
        claim = canonical.claim_at(oid)
        if claim.view.state == "consumed" and claim.view.staging_commit == landing:
            return claim.contract
        parents = canonical.commit(oid).parent_ids
        oid = str(parents[0]) if parents else None
    return None


def _evaluation(
    ctx: LandingContext, commit: pygit2.Commit, policy: PolicyState, policy_oid: str | None
) -> Complete | Ejected:
    """The landing's facts, as the gate established them when it landed."""
    canonical = ctx.canonical
    found = trailers(commit.message)
    name = landing_name(commit)
    task, candidate = found.get("Integrator-Task"), found.get(TRAILER_CANDIDATE)

    def eject(detail: str, code: Code = Code.REF_MOVED) -> Ejected:
        return Ejected(
            landing=name, staging=str(commit.id), code=code, detail=detail,
            candidate=candidate, task_id=task, attempt_id=found.get("Integrator-Attempt"),
            contract_digest=found.get(TRAILER_DIGEST),
        )  # fmt: skip

    contract = contract_of(canonical, task, name) if task else None
    parent = ctx.history.commit(str(commit.parent_ids[0])) if commit.parent_ids else None
    if contract is None or parent is None:
        return eject(
            "the queue could not be rebuilt with this landing: its claim or the queue commit "
            "before it is no longer readable"
        )
    try:
        diff = recompute(
            ctx.repo, parent.tree, commit.tree,
            rename_limit=policy.policy.integration.rename_limit, reader=ctx.trees,
            patch_limit=contract.max_patch_bytes,
        )  # fmt: skip
    except (MalformedTree, TooManyChanges) as err:
        return eject(f"the candidate no longer checks out: {err}", Code.UNSAFE_PATH)
    violations, resources = check_diff(contract, diff, policy.policy)
    verdict = make_verdict(
        contract, violations, candidate=candidate, policy_digest=policy.digest,
        resources=resources, diff=diff,
    )  # fmt: skip
    if verdict.decision is not Decision.ACCEPTED:
        first = next(v for v in verdict.violations if v.enforced)
        return eject(f"under the policy now: {first.detail}", first.code)
    # The landed change, as a merge sees it: the queue commit before it is the base, the
    # staging commit the side merged in.
    return Complete(
        verdict=verdict, data=contract.to_json().encode(), contract=contract, candidate=commit,
        base=parent, diff=diff, claim=None, policy=policy, policy_oid=policy_oid,
        resources=tuple(resources), violations=tuple(violations),
    )  # fmt: skip


def rebuild(ctx: LandingContext, good: str, later: list[Covered], dropped: set[str]) -> Rebuild:
    """Re-merge `later` (oldest first) onto `good`; `dropped` names landings already taken
    out (their bases are not on the new queue either)."""
    canonical = ctx.canonical
    policy_oid = canonical.ref(refnames.POLICY)
    policy = canonical.policy_state(policy_oid)
    start = canonical.commit(good)
    head = Head(good, start.tree_id.raw, start)
    sig = signature(canonical.clock())
    out = Rebuild(good, [], [])
    for landing in later:
        commit = canonical.commit(landing.staging)
        ev = _evaluation(ctx, commit, policy, policy_oid)
        if isinstance(ev, Ejected):
            out.ejected.append(ev)
            continue
        problems = _remerge(ctx, ev, head, trailers(commit.message).get(TRAILER_BASE))
        if isinstance(problems, list):
            first = problems[0]
            out.ejected.append(
                Ejected(
                    landing=landing.landing,
                    staging=landing.staging,
                    code=first.code,
                    detail="; ".join(v.detail for v in problems)[:8000],
                    candidate=landing.candidate,
                    task_id=landing.task_id,
                    attempt_id=landing.attempt_id,
                    contract_digest=ev.verdict.contract_digest,
                )
            )
            continue
        staging = ctx.objects.add(
            "commit",
            commit_bytes(
                bytes.fromhex(problems),
                [bytes.fromhex(head.oid)],
                commit.author,
                sig,
                _message(commit.message, landing.staging, landing.landing),
            ),
        ).hex()
        out.rebuilt.append(
            Rebuilt(
                landing=landing.landing,
                replaces=landing.staging,
                staging=staging,
                task_id=landing.task_id,
            )
        )
        head = Head(staging, bytes.fromhex(problems), start)
        out.head = staging
    ctx.objects.flush()
    return out


def _remerge(
    ctx: LandingContext, ev: Complete, head: Head, origin: str | None
) -> str | list[Violation]:
    """The merged tree onto `head` (hex), or what stops the landing there. `origin` is the
    base the candidate was built on: it must still be on the queue."""
    base, cand = ev.base, ev.candidate
    if origin is None or not _on(ctx, origin, head.queue):
        return [
            Violation(
                code=Code.BASE_NOT_ON_QUEUE,
                detail=f"base {origin} is not on the rebuilt queue (it held an ejected "
                "landing); rebase onto the queue head and resubmit under a new contract",
            )
        ]
    outcome = merge_onto_head(
        ctx.repo, base_commit=base, head_commit=head.queue, head_tree=head.tree,
        candidate_commit=cand, reader=ctx.trees, objects=ctx.objects,
    )  # fmt: skip
    if outcome.tree is None:
        return [
            Violation(code=Code.MERGE_CONFLICT, path=p, detail="conflicts with the rebuilt queue")
            for p in outcome.conflicts
        ] or [Violation(code=Code.MERGE_CONFLICT, detail="the merge did not produce a tree")]
    merged = bytes.fromhex(outcome.tree)
    problems = merge_violations(ctx, ev, head, merged) if head.oid != str(base.id) else []
    enforced = [v for v in problems if v.enforced]
    return enforced or outcome.tree


def _on(ctx: LandingContext, base: str, head: pygit2.Commit) -> bool:
    try:
        return ctx.history.is_ancestor(base, head)
    except (KeyError, ValueError, pygit2.GitError):
        return False


def _message(message: str, replaces: str, landing: str) -> str:
    """The landing's message with the trailers that name what it replaces."""
    kept = [
        line
        for line in message.rstrip("\n").splitlines()
        if not line.startswith((f"{TRAILER_REPLACES}: ", f"{TRAILER_LANDING}: "))
    ]
    return (
        "\n".join([*kept, f"{TRAILER_REPLACES}: {replaces}", f"{TRAILER_LANDING}: {landing}"])
        + "\n"
    )
