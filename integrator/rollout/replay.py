"""Deciding a recorded submission a second time, moving nothing.

The same gate (`integrator.landing.gate.Gate`) and the same merge checks as a landing
(`merge_onto_head`, `merge_violations`) run on the facts the submission was decided on:
its contract and candidate, the queue head it was merged onto, and a policy — the one of
the time, or another (the shadow's). Merges happen in memory and in a scratch repository
that borrows the canonical one's objects (`integrator.records.scratch`): no ref moves, and
the canonical repository gains no object.

What a second run cannot see again is replayed from the record instead of read: the live
claim as it stood (a landing proves it was live and consumed by this very landing; a held
verdict names what the live checks found) and what the transaction found (a ref that moved
underneath, a second candidate of one claim in a batch). Those depend on the claim refs at
that moment, not on the policy or on the diff, so every later stage is decided again.

A request is a document (`integrator.shadow-request.v1`), so another integrator version
can answer it as a process: `integrator shadow --decide -` reads one on standard input and
prints the verdict it reaches (the `tree` field set when it would land).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import pygit2
from pydantic import Field

from integrator.documents.claim import Claim
from integrator.documents.contract import Model, OwnershipContract
from integrator.documents.policy import PolicyState, parse_policy
from integrator.documents.verdict import Code, Decision, Verdict, Violation
from integrator.fence.trees import TreeReader
from integrator.landing.context import Head, LandingContext
from integrator.landing.evaluation import Complete
from integrator.landing.gate import Gate, LiveFinding
from integrator.landing.history import QueueHistory
from integrator.landing.merge import merge_onto_head
from integrator.landing.proof import merge_violations
from integrator.plumbing.packs import ObjectBuffer
from integrator.records.canonical import Canonical
from integrator.records.claims import Claims
from integrator.rollout.records import Recorded

# What the live-claim stage finds: it depends on the claim refs at that moment.
LIVE_CODES: frozenset[Code] = frozenset(
    {
        Code.CLAIM_MISSING,
        Code.CLAIM_REWRITTEN,
        Code.STALE_GENERATION,
        Code.CONTRACT_DIGEST_MISMATCH,
        Code.CLAIM_CONSUMED,
        Code.CLAIM_REVOKED,
        Code.LEASE_EXPIRED,
        Code.POLICY_CHANGED,
    }
)
# What only the transaction finds (with the live codes it re-read after losing a swap).
TRANSACTION_CODES: frozenset[Code] = LIVE_CODES | {Code.REF_MOVED}


class ShadowRequest(Model):
    """`integrator.shadow-request.v1`: one recorded submission to decide again."""

    schema_: Literal["integrator.shadow-request.v1"] = Field(
        default="integrator.shadow-request.v1", alias="schema"
    )
    repo: str  # the canonical repository whose objects the decision reads
    key: str  # the staging commit or submission id it was recorded under
    contract: str  # the contract document as the gate read it
    candidate: str
    queue_head: str | None = None  # the queue head to merge onto
    policy: str  # the policy (TOML) to decide under
    policy_generation: int
    claim: str | None = None  # the claim commit the gate read (for its grants)
    recorded: list[Violation] = Field(default_factory=list)  # replayed, not decided again
    stopped: bool = False  # the record stopped at the live-claim stage
    at: datetime


@dataclass(frozen=True)
class Decided:
    """A second decision: the verdict, and the tree it would land (None: it would not)."""

    verdict: Verdict

    @property
    def tree(self) -> str | None:
        accepted = self.verdict.decision is Decision.ACCEPTED
        return self.verdict.tree if accepted else None


def replayed(record: Recorded) -> tuple[list[Violation], bool]:
    """(the violations replayed from the record, whether it stopped at the live stage)."""
    verdict = record.verdict
    if record.landed or verdict is None:
        return [], False  # a landing: the claim was live and this landing consumed it
    if verdict.changes is None:
        live = [v for v in verdict.violations if v.code in LIVE_CODES]
        return live, bool(live)
    return [v for v in verdict.violations if v.code in TRANSACTION_CODES], False


def request_for(record: Recorded, policy: PolicyState, repo: str) -> ShadowRequest:
    """The request that decides `record` again under `policy`."""
    recorded, stopped = replayed(record)
    return ShadowRequest(
        repo=repo,
        key=record.key,
        contract=record.contract.decode("utf-8", "surrogateescape"),
        candidate=record.candidate,
        queue_head=record.head,
        policy=policy.text,
        policy_generation=policy.generation,
        claim=record.claim.oid if record.claim is not None else None,
        recorded=recorded,
        stopped=stopped,
        at=record.at,
    )


class _Pinned:
    """The gate's live-claim stage answered from the record instead of the claim ref."""

    def __init__(self, claim: Claim | None, violations: list[Violation]) -> None:
        self.claim = claim
        self.violations = violations

    def __call__(
        self,
        contract: OwnershipContract,
        candidate: str,
        *,
        authoritative: bool,
        policy: PolicyState,
        now: datetime,
    ) -> LiveFinding:
        return self.claim, list(self.violations), None


class Replayer:
    """Decides requests on a scratch repository (`integrator.records.scratch.scratch`)."""

    def __init__(self, scratch: Canonical) -> None:
        self.canonical = scratch
        self.objects = ObjectBuffer(scratch.repo)
        self.trees = TreeReader(scratch.repo, self.objects.read)
        self.history = QueueHistory(scratch)
        self.ctx = LandingContext(
            canonical=scratch,
            objects=self.objects,
            trees=self.trees,
            claims=Claims(scratch),
            history=self.history,
            durable=False,
        )
        self._policies: dict[tuple[str, int], PolicyState] = {}

    def policy(self, text: str, generation: int) -> PolicyState:
        found = self._policies.get((text, generation))
        if found is None:
            found = PolicyState(parse_policy(text, source="the shadow policy"), generation, text)
            self._policies[(text, generation)] = found
        return found

    def decide(self, request: ShadowRequest) -> Decided:
        """The verdict `request` reaches: the gate, then the merge onto its queue head."""
        policy = self.policy(request.policy, request.policy_generation)
        claim = None
        if request.claim is not None:
            try:
                claim = self.canonical.claim_at(request.claim)
            except (KeyError, ValueError):
                claim = None
        live = list(request.recorded) if request.stopped else []
        gate = Gate(
            self.canonical,
            self.history,
            self.trees,
            policy_override=policy,
            live_stage=_Pinned(claim, live),
        )
        ev = gate.evaluate(request.contract.encode("utf-8", "surrogateescape"), request.candidate)
        if not isinstance(ev, Complete) or not ev.accepted or ev.verdict.recovered:
            return Decided(ev.verdict)
        if request.recorded:
            return Decided(ev.with_violations(request.recorded, decision=Decision.FENCED))
        return Decided(self._merge(ev, request.queue_head))

    def _merge(self, ev: Complete, head_oid: str | None) -> Verdict:
        """What the landing would find merging `ev` onto `head_oid` (none: onto its base)."""
        head_oid = head_oid or str(ev.base.id)
        try:
            head = self.canonical.commit(head_oid)
        except (KeyError, ValueError, pygit2.GitError):
            missing = Violation(
                code=Code.BASE_NOT_ON_QUEUE, detail=f"queue head {head_oid} is gone"
            )
            return ev.with_violations([missing], decision=Decision.FENCED)

        def fenced(violations: list[Violation], decision: Decision | None = None) -> Verdict:
            return ev.with_violations(violations, decision=decision, queue_head=head_oid)

        if not self.history.on_queue(str(ev.base.id), head):
            return fenced(
                [
                    Violation(
                        code=Code.BASE_NOT_ON_QUEUE,
                        detail=f"base {ev.base.id} is not an ancestor of the queue head "
                        f"{head_oid}; rebase onto the queue",
                    )
                ]
            )
        outcome = merge_onto_head(
            self.canonical.repo,
            base_commit=ev.base,
            head_commit=head,
            candidate_commit=ev.candidate,
            reader=self.trees,
            objects=self.objects,
        )
        if outcome.tree is None:
            return fenced(
                [
                    Violation(
                        code=Code.MERGE_CONFLICT, path=p, detail="conflicts with the queue head"
                    )
                    for p in outcome.conflicts
                ]
                or [Violation(code=Code.MERGE_CONFLICT, detail="the merge did not produce a tree")]
            )
        merged = bytes.fromhex(outcome.tree)
        problems: list[Violation] = []
        if head_oid != str(ev.base.id):
            problems = merge_violations(
                self.ctx, ev, Head(head_oid, head.tree_id.raw, head), merged
            )
        if problems:
            review = all(v.code is Code.RESOURCE_CONFLICT for v in problems)
            if review and ev.policy.policy.integration.resource_conflict == "review":
                return fenced(problems, Decision.REVIEW)
            return fenced(problems)
        return ev.with_violations([], tree=outcome.tree, queue_head=head_oid)
