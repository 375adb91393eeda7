"""What the read-only gate established about one candidate: its verdict and the facts.

An evaluation is one of two kinds. `Stopped`: the gate stopped at a failing stage (or found
this very candidate landed already) and holds a verdict alone. `Complete`: every stage ran,
and it carries everything the landing needs (the parsed contract, the commits, the
recomputed diff, the claim and policy as read) so that nothing is read twice. Code that
needs the facts narrows once (`isinstance(ev, Complete)`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import pygit2

from integrator.documents.claim import Claim
from integrator.documents.contract import OwnershipContract
from integrator.documents.policy import PolicyState
from integrator.documents.verdict import Decision, ResourceUse, Verdict, Violation
from integrator.fence.checks import make_verdict
from integrator.fence.diff import RecomputedDiff


@dataclass(frozen=True)
class Stopped:
    """The gate stopped before the last stage: its verdict, and no facts to land on."""

    verdict: Verdict

    @property
    def accepted(self) -> bool:
        """Only an earlier landing of this very candidate (a recovered verdict)."""
        return self.verdict.decision is Decision.ACCEPTED


@dataclass(frozen=True, kw_only=True)
class Complete:
    """Every stage of the gate ran: the verdict and enough to merge and land without
    re-reading."""

    verdict: Verdict
    data: bytes  # the contract document as submitted
    contract: OwnershipContract
    candidate: pygit2.Commit
    base: pygit2.Commit
    diff: RecomputedDiff
    claim: Claim | None  # None: no claim refs here (a static check), or a rebuilt landing
    policy: PolicyState
    policy_oid: str | None  # None: not the policy ref's (an override, or none set yet)
    resources: tuple[ResourceUse, ...] = ()
    violations: tuple[Violation, ...] = ()

    @property
    def accepted(self) -> bool:
        return self.verdict.decision is Decision.ACCEPTED

    def with_violations(
        self, extra: Sequence[Violation], *, decision: Decision | None = None, **fields: Any
    ) -> Verdict:
        """This evaluation's verdict with more violations and fields (landing results)."""
        return make_verdict(
            self.contract,
            [*self.violations, *extra],
            candidate=self.verdict.candidate,
            policy_digest=self.policy.digest,
            resources=self.resources,
            diff=self.diff,
            decision=decision,
            **fields,
        )


Evaluation: TypeAlias = Stopped | Complete
