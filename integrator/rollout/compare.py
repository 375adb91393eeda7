"""Comparing two decisions of one submission: what happened, and what the shadow decides.

Parallel running asks the two integrators to agree exactly on the winner (whether the
candidate lands), the tree it lands with, every resource determination and every code.
Each side is reduced to those facts (`Side`); codes are compared with their subject and
mode, since an observed PATH_NOT_OWNED and an enforced one decide differently.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from integrator.documents.verdict import Decision, Verdict


@dataclass(frozen=True)
class Side:
    """One decision as the comparison sees it."""

    landed: bool
    tree: str | None
    decision: str
    codes: tuple[tuple[str, str, str], ...]  # (code, path or resource, mode), sorted
    resources: tuple[tuple[str, str], ...]  # (resource, determination), sorted

    def wire(self) -> dict[str, Any]:
        return {
            "landed": self.landed,
            "tree": self.tree,
            "decision": self.decision,
            "codes": [{"code": c, "subject": s, "mode": m} for c, s, m in self.codes],
            "resources": dict(self.resources),
        }


def side_of(verdict: Verdict, *, landed: bool | None = None, tree: str | None = None) -> Side:
    """`verdict` reduced to the compared facts; `landed`/`tree` when they are known facts
    (a landing on the queue) rather than what the verdict says."""
    lands = verdict.decision is Decision.ACCEPTED if landed is None else landed
    return Side(
        landed=lands,
        tree=(tree or verdict.tree) if lands else None,
        decision=verdict.decision.value,
        codes=tuple(sorted((v.code.value, v.subject, v.mode) for v in verdict.violations)),
        resources=tuple(sorted((r.resource, r.determination.value) for r in verdict.resources)),
    )


FIELDS = ("winner", "tree", "decision", "codes", "resources")


def differences(recorded: Side, shadow: Side) -> list[str]:
    """Which of FIELDS differ (the tree only when both land)."""
    out = []
    if recorded.landed != shadow.landed:
        out.append("winner")
    if recorded.landed and shadow.landed and recorded.tree != shadow.tree:
        out.append("tree")
    if recorded.decision != shadow.decision:
        out.append("decision")
    if recorded.codes != shadow.codes:
        out.append("codes")
    if recorded.resources != shadow.resources:
        out.append("resources")
    return out


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """One submission compared: its key and kind, both sides, and what differs."""

    key: str
    kind: str
    task_id: str | None
    candidate: str
    recorded: Side
    shadow: Side
    differ: tuple[str, ...]

    @property
    def matches(self) -> bool:
        return not self.differ

    def wire(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "kind": self.kind,
            "taskId": self.task_id,
            "candidate": self.candidate,
            "differ": list(self.differ),
            "recorded": self.recorded.wire(),
            "shadow": self.shadow.wire(),
        }
