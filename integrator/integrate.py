"""The integration engine: gate a candidate, merge it onto the queue head, land it atomically.

`Integrator.check` is the read-only gate (what `integrator gate` and CI run);
`Integrator.integrate` also merges, writes the staging commit and, in one
`git update-ref --stdin` transaction, verifies the policy ref, moves the queue ref (and the
target when it follows the queue) and consumes the claim. A stale attempt can never land:
the claim it read is part of the compare-and-swap.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pygit2

from integrator import faults, gate, git
from integrator.claims import Claims
from integrator.contract import OwnershipContract, parse_contract
from integrator.diff import RecomputedDiff, find_collisions, recompute
from integrator.errors import ConfigurationError, ContractError, RefLockedError, RefMovedError
from integrator.merge import merge_onto_head, resources_touched_since_base
from integrator.policy import PolicyState
from integrator.repository import Canonical, Claim, signature
from integrator.verdict import Code, Decision, ResourceUse, Verdict, Violation

TRAILER_CANDIDATE = "Integrator-Candidate"
LOCK_RETRIES = 2


@dataclass
class Evaluation:
    """What the read-only gate established; enough to merge and land without re-reading."""

    verdict: Verdict
    data: bytes = b""
    contract: OwnershipContract | None = None
    candidate: pygit2.Commit | None = None
    base: pygit2.Commit | None = None
    diff: RecomputedDiff | None = None
    claim: Claim | None = None
    policy: PolicyState | None = None
    policy_oid: str | None = None
    resources: tuple[ResourceUse, ...] = ()
    violations: tuple[Violation, ...] = ()

    @property
    def accepted(self) -> bool:
        return self.verdict.decision is Decision.ACCEPTED


def _invalid(detail: str, candidate: str, policy_digest: str | None) -> Verdict:
    return gate.make_verdict(
        None,
        [Violation(code=Code.CONTRACT_INVALID, detail=detail)],
        candidate=candidate,
        policy_digest=policy_digest,
    )


def _legacy(data: bytes) -> bool:
    """A JSON object that looks like a contract but carries no ownership generation."""
    try:
        doc = json.loads(data)
    except ValueError:
        return False
    return isinstance(doc, dict) and "taskId" in doc and "ownershipGeneration" not in doc


def staging_message(
    contract: OwnershipContract, candidate: pygit2.Commit, policy_digest: str
) -> str:
    summary = candidate.message.splitlines()[0] if candidate.message.strip() else "candidate"
    return (
        f"{summary}\n\n"
        f"Landed by integrator for task {contract.task_id}.\n\n"
        f"{TRAILER_CANDIDATE}: {candidate.id}\n"
        f"Integrator-Task: {contract.task_id}\n"
        f"Integrator-Attempt: {contract.attempt_id}\n"
        f"Integrator-Generation: {contract.ownership_generation}\n"
        f"Integrator-Contract-Digest: {contract.digest}\n"
        f"Integrator-Policy-Digest: {policy_digest}\n"
        f"Integrator-Base: {contract.base_commit}\n"
    )


def trailers(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in message.splitlines():
        key, sep, value = line.partition(": ")
        if sep and key.startswith("Integrator-"):
            out[key] = value.strip()
    return out


class Integrator:
    """Gate and land candidates against one canonical repository."""

    def __init__(self, canonical: Canonical, *, policy_override: PolicyState | None = None) -> None:
        self.canonical = canonical
        self.repo = canonical.repo
        self.policy_override = policy_override
        self.claims = Claims(canonical)
        self.durable = git.durable(canonical.repo)

    def reload_policy(self) -> None:
        """Forget cached policy and claim documents (after SIGHUP or `policy set`)."""
        self.canonical._policies.clear()
        self.canonical._claims.clear()

    # -- the read-only gate -----------------------------------------------------------------

    def check(self, contract_data: bytes, candidate: str) -> Verdict:
        return self.evaluate(contract_data, candidate).verdict

    def evaluate(
        self, contract_data: bytes, candidate: str, *, now: datetime | None = None
    ) -> Evaluation:
        """Checks 1–5 of DESIGN.md, cheapest first; stops at the first failing stage."""
        canonical = self.canonical
        now = now or canonical.clock()
        live = self.policy_override is None and canonical.initialized
        policy_oid = canonical.ref(git.POLICY_REF) if live else None
        policy = self.policy_override or canonical.policy_state(policy_oid)
        try:
            contract = parse_contract(contract_data)
        except ContractError as err:
            if _legacy(contract_data):
                verdict = gate.make_verdict(
                    None,
                    [
                        Violation(
                            code=Code.LEGACY_SUBMISSION,
                            detail="the submission carries no ownership generation; "
                            "it may only be reviewed, never landed automatically",
                        )
                    ],
                    candidate=candidate,
                    policy_digest=policy.digest,
                )
                return Evaluation(verdict)
            return Evaluation(_invalid("; ".join(err.errors) or str(err), candidate, policy.digest))

        def done(violations: list[Violation], **extra: Any) -> Evaluation:
            extra.setdefault("candidate", candidate)
            return Evaluation(
                gate.make_verdict(contract, violations, policy_digest=policy.digest, **extra),
                contract=contract,
            )

        violations = gate.check_identity(contract, canonical.identity)
        if violations:
            return done(violations)
        claim: Claim | None = None
        if live or canonical.has_claims():
            claim = canonical.claim(contract.task_id)
            violations = gate.check_live(
                contract, claim.view if claim else None, policy.digest, now
            )
            if claim is not None and claim.view.state == "consumed":
                earlier = self._earlier_landing(contract, claim, candidate, policy)
                if earlier is not None:
                    return Evaluation(earlier, contract=contract, claim=claim)
        else:
            violations = gate.check_static_lease(contract, now)
        if violations:
            return done(violations)
        cand = self._commit(candidate)
        if cand is None:
            return done(
                [Violation(code=Code.CANDIDATE_MISSING, detail=f"{candidate} is not a commit here")]
            )
        base_present = git.has_object(self.repo, contract.base_commit)
        base_is_ancestor = base_present and (
            str(cand.id) == contract.base_commit
            or self.repo.descendant_of(cand.id, pygit2.Oid(hex=contract.base_commit))
        )
        violations = gate.check_history(
            base=contract.base_commit,
            base_present=base_present,
            base_is_ancestor=base_is_ancestor,
            shallow=self.repo.is_shallow,
        )
        if violations:
            return done(violations, candidate=str(cand.id))
        base = self._commit(contract.base_commit)
        assert base is not None
        diff = recompute(
            self.repo, base.tree, cand.tree, rename_limit=policy.policy.integration.rename_limit
        )
        violations, resources = gate.check_diff(contract, diff, policy.policy)
        verdict = gate.make_verdict(
            contract,
            violations,
            candidate=str(cand.id),
            policy_digest=policy.digest,
            resources=resources,
            diff=diff,
        )
        return Evaluation(
            verdict,
            data=contract_data,
            contract=contract,
            candidate=cand,
            base=base,
            diff=diff,
            claim=claim,
            policy=policy,
            policy_oid=policy_oid,
            resources=tuple(resources),
            violations=tuple(violations),
        )

    def _commit(self, rev: str) -> pygit2.Commit | None:
        try:
            obj = self.repo.revparse_single(rev)
            commit = obj.peel(pygit2.Commit)
        except (KeyError, ValueError, pygit2.GitError):
            return None
        return commit if isinstance(commit, pygit2.Commit) else None

    def _earlier_landing(
        self, contract: OwnershipContract, claim: Claim, candidate: str, policy: PolicyState
    ) -> Verdict | None:
        """The ACCEPTED verdict of a landing that already happened for this candidate."""
        staging = claim.view.staging_commit
        if staging is None or claim.view.candidate is None:
            return None
        cand = self._commit(candidate)
        if cand is None or str(cand.id) != claim.view.candidate:
            return None
        commit = self._commit(staging)
        if commit is None or trailers(commit.message).get(TRAILER_CANDIDATE) != str(cand.id):
            return None
        return gate.make_verdict(
            contract,
            [],
            candidate=str(cand.id),
            policy_digest=contract.policy_digest,
            tree=str(commit.tree_id),
            staging_commit=staging,
            recovered=True,
        )

    # -- landing ------------------------------------------------------------------------------

    def integrate(self, contract_data: bytes, candidate: str) -> Verdict:
        """Gate, merge, write the staging commit, and land it in one ref transaction."""
        if not self.canonical.initialized:
            raise ConfigurationError(
                f"{self.canonical.path} is not prepared for integration; run integrator init"
            )
        evaluation = self.evaluate(contract_data, candidate)
        if not evaluation.accepted or evaluation.verdict.recovered:
            return evaluation.verdict
        faults.point("after-check")
        policy = evaluation.policy
        assert policy is not None
        retries = policy.policy.integration.queue_retries
        attempt = 0
        locked = 0
        while True:
            try:
                verdict, moved = self._land(evaluation)
            except RefLockedError:
                # Contention with a live integrator usually clears within git's own lock
                # timeout; a lock that outlives a few more tries is reported, never deleted.
                locked += 1
                if locked > LOCK_RETRIES:
                    raise
                time.sleep(random.uniform(0.05, 0.2))
                continue
            if moved is None:
                return verdict
            attempt += 1
            if attempt > retries:
                return self._ref_moved(evaluation, moved, attempt)
            # Someone landed first. The next round re-reads every ref: if only the queue
            # (and the target following it) advanced, it merges again; if the claim or
            # the policy moved, it fences with REF_MOVED naming that ref.

    def _ref_moved(self, evaluation: Evaluation, moved: RefMovedError, attempts: int) -> Verdict:
        contract = evaluation.contract
        assert contract is not None and evaluation.policy is not None
        detail = f"{moved}"
        if moved.ref == self.canonical.queue_ref:
            detail += f" after {attempts} attempts"
        violations = [Violation(code=Code.REF_MOVED, path=None, resource=moved.ref, detail=detail)]
        # Say why the claim or policy moved, when the live checks can tell.
        again = self.evaluate(evaluation.data, str(evaluation.verdict.candidate))
        violations.extend(v for v in again.verdict.violations if v.code is not Code.REF_MOVED)
        return gate.make_verdict(
            contract,
            violations,
            candidate=evaluation.verdict.candidate,
            policy_digest=evaluation.policy.digest,
            resources=evaluation.resources,
            diff=evaluation.diff,
            decision=Decision.FENCED,
        )

    def _land(self, ev: Evaluation) -> tuple[Verdict, RefMovedError | None]:
        canonical = self.canonical
        contract, cand, base, diff, policy = ev.contract, ev.candidate, ev.base, ev.diff, ev.policy
        assert contract and cand and base and diff and policy
        integration = policy.policy.integration
        queue_ref = canonical.queue_ref
        head_oid = canonical.ref(queue_ref) or canonical.ref(canonical.target_ref)
        if head_oid is None:
            raise ConfigurationError(
                f"neither {queue_ref} nor {canonical.target_ref} exists; run integrator init"
            )
        target_oid = canonical.ref(canonical.target_ref)
        claim_ref = Canonical.claim_ref(contract.task_id)
        claim_oid = canonical.ref(claim_ref)
        claim = canonical.claim_at(claim_oid) if claim_oid else None
        now = canonical.clock()
        live = gate.check_live(contract, claim.view if claim else None, policy.digest, now)
        moved_refs: list[tuple[str, str | None, str | None]] = []
        if ev.claim is not None and claim_oid != ev.claim.oid:
            moved_refs.append((claim_ref, claim_oid, ev.claim.oid))
        policy_now = canonical.ref(git.POLICY_REF)
        if policy_now != ev.policy_oid:
            moved_refs.append((git.POLICY_REF, policy_now, ev.policy_oid))
            live.append(
                Violation(
                    code=Code.POLICY_CHANGED,
                    detail=f"the policy moved to {policy_now} after the check",
                )
            )
        if moved_refs or live:
            fences = [
                Violation(
                    code=Code.REF_MOVED,
                    resource=ref,
                    detail=f"{ref} moved to {now_oid or 'nothing'} after the check "
                    f"(read {then_oid or 'nothing'})",
                )
                for ref, now_oid, then_oid in moved_refs
            ]
            return self._verdict(ev, [*fences, *live], decision=Decision.FENCED), None
        assert claim is not None
        head = canonical.commit(head_oid)

        def fenced(violations: list[Violation], **extra: Any) -> tuple[Verdict, None]:
            return self._verdict(ev, violations, queue_head=head_oid, **extra), None

        if head_oid != str(base.id) and not self.repo.descendant_of(head.id, base.id):
            return fenced(
                [
                    Violation(
                        code=Code.BASE_NOT_ON_QUEUE,
                        detail=f"base {base.id} is not an ancestor of the queue head "
                        f"{head_oid}; rebase onto {queue_ref}",
                    )
                ]
            )
        if integration.target_follows_queue and target_oid is not None and target_oid != head_oid:
            return fenced(
                [
                    Violation(
                        code=Code.REF_MOVED,
                        resource=canonical.target_ref,
                        detail=f"{canonical.target_ref} ({target_oid}) moved outside the queue "
                        f"({head_oid}); a release manager must reconcile them",
                    )
                ]
            )
        outcome = merge_onto_head(
            self.repo,
            base_commit=base,
            head_commit=head,
            candidate_commit=cand,
            changes=diff.changes,
        )
        if not outcome.clean or outcome.tree is None:
            return fenced(
                [
                    Violation(
                        code=Code.MERGE_CONFLICT, path=p, detail="conflicts with the queue head"
                    )
                    for p in outcome.conflicts
                ]
                or [Violation(code=Code.MERGE_CONFLICT, detail="the merge did not produce a tree")]
            )
        merged = self.repo[outcome.tree]
        assert isinstance(merged, pygit2.Tree)
        problems: list[Violation] = []
        if head_oid != str(base.id):
            shared = set(policy.policy.shared.resources)
            touched = [r.resource for r in ev.resources if r.resource not in shared]
            for resource, paths in resources_touched_since_base(
                self.repo, policy.policy, base.tree, head.tree, touched
            ).items():
                problems.append(
                    Violation(
                        code=Code.RESOURCE_CONFLICT,
                        resource=resource,
                        detail=f"the queue changed {', '.join(paths)} ({resource}) since base; "
                        "both sides touched it",
                    )
                )
            for collision in find_collisions(self.repo, merged, diff.added_paths):
                code = Code.CASE_COLLISION if collision.kind == "case" else Code.UNICODE_COLLISION
                problems.append(
                    Violation(
                        code=code,
                        path=collision.path,
                        detail=f"{collision.path!r} collides with {collision.other!r} on the queue head",
                    )
                )
        if problems:
            if all(v.code is Code.RESOURCE_CONFLICT for v in problems) and (
                integration.resource_conflict == "review"
            ):
                return self._verdict(
                    ev, problems, queue_head=head_oid, decision=Decision.REVIEW
                ), None
            return fenced(problems)
        sig = signature(now)
        author = cand.author
        staging = str(
            self.repo.create_commit(
                None,
                author,
                sig,
                staging_message(contract, cand, policy.digest),
                merged.id,
                [head.id],
            )
        )
        consumed = self.claims.consume_commit(claim, staging, str(cand.id), now)
        ops = []
        if ev.policy_oid is not None:
            ops.append(git.verify(git.POLICY_REF, ev.policy_oid))
        ops.append(git.update(queue_ref, staging, canonical.ref(queue_ref)))
        ops.append(git.update(Canonical.claim_ref(contract.task_id), consumed, claim_oid))
        if integration.target_follows_queue and target_oid is not None:
            ops.append(git.update(canonical.target_ref, staging, target_oid))
        if self.durable:
            git.sync_objects(self.repo)
        faults.point("before-transaction")
        try:
            canonical.updater.apply(ops, on_prepared=lambda: faults.point("after-prepare"))
        except RefMovedError as moved:
            return self._verdict(ev, [], queue_head=head_oid), moved
        faults.point("after-commit")
        return (
            self._verdict(ev, [], tree=str(merged.id), staging_commit=staging, queue_head=head_oid),
            None,
        )

    def _verdict(
        self,
        ev: Evaluation,
        extra_violations: list[Violation],
        *,
        decision: Decision | None = None,
        **fields: Any,
    ) -> Verdict:
        assert ev.policy is not None
        return gate.make_verdict(
            ev.contract,
            [*ev.violations, *extra_violations],
            candidate=ev.verdict.candidate,
            policy_digest=ev.policy.digest,
            resources=ev.resources,
            diff=ev.diff,
            decision=decision,
            **fields,
        )
