"""The read-only gate: read the facts a candidate is judged on, and judge it.

Checks run cheapest first and stop at the first failing stage, so a flood of stale
submissions costs a ref read and a cached claim each: (1) the contract parses, (2) the live
claim, (3) the history, (4) the recomputed diff with its paths and resources. The
decisions themselves are the pure functions of `integrator.fence.checks`; this module
only gathers their inputs.

The live-claim stage is a strategy the gate is given (`LiveStage`): by default it reads the
claim refs (`ClaimRefs`); a replay answers it from the record instead.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol, TypeAlias

import pygit2

from integrator import jsontext, refnames
from integrator.documents.claim import Claim
from integrator.documents.contract import OwnershipContract, parse_contract
from integrator.documents.policy import PolicyState
from integrator.documents.verdict import Code, Verdict, Violation
from integrator.errors import ContractError
from integrator.fence import checks, live
from integrator.fence.diff import TooManyChanges, recompute
from integrator.fence.trees import MalformedTree, TreeReader
from integrator.landing.evaluation import Complete, Evaluation, Stopped
from integrator.landing.history import QueueHistory
from integrator.plumbing import git
from integrator.records.canonical import Canonical
from integrator.records.edits import edits_before_grants


def _legacy(data: bytes) -> bool:
    """A JSON object that looks like a contract but carries no ownership generation."""
    try:
        doc = jsontext.loads(data)
    except ValueError:
        return False
    return isinstance(doc, dict) and "taskId" in doc and "ownershipGeneration" not in doc


# (the claim read, what the live checks found, the earlier landing of this very candidate)
LiveFinding: TypeAlias = tuple[Claim | None, list[Violation], Verdict | None]


class LiveStage(Protocol):
    """The gate's live-claim stage: what the claim of `contract` says about `candidate`."""

    def __call__(
        self,
        contract: OwnershipContract,
        candidate: str,
        *,
        authoritative: bool,
        policy: PolicyState,
        now: datetime,
    ) -> LiveFinding: ...


class ClaimRefs:
    """The live-claim stage as a landing runs it: the claim refs as they are now."""

    def __init__(self, canonical: Canonical, history: QueueHistory) -> None:
        self.canonical = canonical
        self.history = history

    def __call__(
        self,
        contract: OwnershipContract,
        candidate: str,
        *,
        authoritative: bool,
        policy: PolicyState,
        now: datetime,
    ) -> LiveFinding:
        canonical = self.canonical
        if not (authoritative or canonical.has_claims()):
            return None, live.check_static_lease(contract, now), None
        claim = canonical.claim(contract.task_id)
        rewritten = live.check_rewritten(contract.task_id, canonical.rewritten)
        if claim is not None and not rewritten:
            problem = canonical.authority_problem(canonical.claim_ref(contract.task_id), claim.oid)
            rewritten = live.check_signed(contract.task_id, claim.oid, problem)
        if rewritten:
            return claim, rewritten, None
        violations = live.check_live(contract, claim.view if claim else None, policy.digest, now)
        earlier = None
        if claim is not None and claim.view.state == "consumed":
            earlier = self.history.earlier_landing(contract, claim, candidate)
        return claim, violations, earlier


class Gate:
    """Evaluates candidates against one canonical repository, moving nothing."""

    def __init__(
        self,
        canonical: Canonical,
        history: QueueHistory,
        trees: TreeReader,
        *,
        policy_override: PolicyState | None = None,
        static: bool = False,
        live_stage: LiveStage | None = None,
    ) -> None:
        self.canonical = canonical
        self.static = static
        self.repo = canonical.repo
        self.history = history
        self.trees = trees
        self.policy_override = policy_override
        self.live_stage = live_stage or ClaimRefs(canonical, history)

    def evaluate(  # noqa: PLR0911 — each stage stops with its own verdict, cheapest first
        self, contract_data: bytes, candidate: str, *, now: datetime | None = None
    ) -> Evaluation:
        """Every check of the gate, cheapest first; stops at the first failing stage."""
        canonical = self.canonical
        now = now or canonical.clock()
        authoritative = self.policy_override is None and canonical.initialized
        policy_oid = canonical.ref(refnames.POLICY) if authoritative else None
        policy = self.policy_override or canonical.policy_state(policy_oid)
        try:
            contract = parse_contract(contract_data, limits=policy.policy.contract_limits)
        except ContractError as err:
            return Stopped(self._unparsed(contract_data, err, candidate, policy))
        # A shallow clone without a configured id cannot prove the repository, and a clone
        # without claim refs cannot prove the contract is the authorized one: every verdict
        # here then carries REPO_UNVERIFIED / CLAIM_UNVERIFIED (review), whatever else it
        # says, unless a static check (the contract's own rules only) was asked for.
        claimless = not (authoritative or canonical.has_claims())
        unverified = live.check_identity_known(canonical.identity)
        if claimless and not self.static:
            unverified += live.check_claim_known()

        def stop(violations: list[Violation], **extra: Any) -> Stopped:
            extra.setdefault("candidate", candidate)
            if claimless and self.static:
                extra.setdefault("static", True)
            verdict = checks.make_verdict(
                contract, [*violations, *unverified], policy_digest=policy.digest, **extra
            )
            return Stopped(verdict)

        violations = live.check_identity(contract, canonical.identity)
        if violations:
            return stop(violations)
        claim, violations, earlier = self.live_stage(
            contract, candidate, authoritative=authoritative, policy=policy, now=now
        )
        if earlier is not None:
            return Stopped(earlier)
        if violations:
            return stop(violations)
        cand = self.history.commit(candidate)
        if cand is None:
            missing = f"{candidate} is not a commit here"
            return stop([Violation(code=Code.CANDIDATE_MISSING, detail=missing)])
        violations = self._history_checks(contract, cand)
        if violations:
            return stop(violations, candidate=str(cand.id))
        base = self.history.commit(contract.base_commit)
        assert base is not None
        try:
            diff = recompute(
                self.repo,
                base.tree,
                cand.tree,
                rename_limit=policy.policy.integration.rename_limit,
                reader=self.trees,
                patch_limit=contract.max_patch_bytes,
            )
        except MalformedTree as err:
            why = f"{err}; git fsck or a checkout would refuse it"
            return stop([Violation(code=Code.UNSAFE_PATH, detail=why)], candidate=str(cand.id))
        except TooManyChanges as err:
            violation = Violation(code=Code.PATCH_TOO_LARGE, detail=str(err))
            return stop([violation], candidate=str(cand.id))
        violations, resources = checks.check_diff(contract, diff, policy.policy)
        if claim is not None and claim.view.grants:
            edits = edits_before_grants(
                self.repo, contract.base_commit, str(cand.id), claim.view.grants
            )
            violations.extend(live.check_grants(edits))
        violations.extend(unverified)
        verdict = checks.make_verdict(
            contract,
            violations,
            candidate=str(cand.id),
            policy_digest=policy.digest,
            resources=resources,
            diff=diff,
            static=True if claimless and self.static else None,
        )
        return Complete(
            verdict=verdict,
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

    @staticmethod
    def _unparsed(data: bytes, err: ContractError, candidate: str, policy: PolicyState) -> Verdict:
        """The verdict on a contract that does not parse: legacy (review) or invalid."""
        if _legacy(data):
            violation = Violation(
                code=Code.LEGACY_SUBMISSION,
                detail="the submission carries no ownership generation; "
                "it may only be reviewed, never landed automatically",
            )
        else:
            violation = Violation(
                code=Code.CONTRACT_INVALID, detail="; ".join(err.errors) or str(err)
            )
        return checks.make_verdict(
            None, [violation], candidate=candidate, policy_digest=policy.digest
        )

    def _history_checks(self, contract: OwnershipContract, cand: pygit2.Commit) -> list[Violation]:
        base = contract.base_commit
        base_present = git.has_object(self.repo, base)
        return live.check_history(
            base=base,
            base_present=base_present,
            base_is_ancestor=base_present and self.history.is_ancestor(base, cand),
            shallow=self.repo.is_shallow,
        )
