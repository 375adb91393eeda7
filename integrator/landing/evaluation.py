"""What the read-only gate established about one candidate: its verdict and the facts.

An `Evaluation` carries everything the landing needs (the parsed contract, the commits,
the recomputed diff, the claim and policy as read) so that nothing is read twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pygit2

from integrator.documents.claim import Claim
from integrator.documents.contract import OwnershipContract
from integrator.documents.policy import PolicyState
from integrator.documents.verdict import Decision, ResourceUse, Verdict, Violation
from integrator.fence.checks import make_verdict
from integrator.fence.diff import RecomputedDiff


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

    def with_violations(
        self, extra: Sequence[Violation], *, decision: Decision | None = None, **fields: Any
    ) -> Verdict:
        """This evaluation's verdict with more violations and fields (landing results)."""
        assert self.policy is not None
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
