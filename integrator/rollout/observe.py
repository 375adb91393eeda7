"""Observe mode that reports: what the fence would have stopped, and which category is ready.

`integrator report observe` walks every recorded submission (`integrator.rollout.records`)
and collects each ownership violation with its category — the path's category, or the
resource's kind — and its mode. An observed one is what would have been fenced; an
enforced one on a held submission is what was fenced. A release manager marks a subject
a false positive (`review mark-false-positive`); a category in observe mode is **ready**
for enforce once none of its findings is marked, and the report lists the ready ones in
the order the rollout takes them: migrations, schemas, codegen, ci, then source. Legacy
runners (no ownership generation) only ever reach review; they are listed apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pygit2

from integrator import refnames
from integrator.documents.categories import Category
from integrator.documents.policy import PolicyState, category_of_resource
from integrator.documents.trailers import TRAILER_CANDIDATE, trailers
from integrator.documents.verdict import Code, Verdict, Violation
from integrator.errors import UsageError
from integrator.paths import unquote_path
from integrator.records.archive_index import find_archived
from integrator.records.canonical import Canonical
from integrator.records.marks import FalsePositive, read_marks
from integrator.records.scratch import scratch
from integrator.rollout.records import Recorded, Records
from integrator.rollout.replay import Replayer, request_for

ORDER = (Category.MIGRATIONS, Category.SCHEMAS, Category.CODEGEN, Category.CI, Category.SOURCE)
# The codes whose violations carry a category's mode (everything else is always enforced).
RESOURCE_CODES = frozenset({Code.RESOURCE_NOT_OWNED, Code.RESOURCE_UNKNOWN})
PATH_CODES = frozenset(
    {
        Code.PATH_NOT_OWNED,
        Code.PATH_DENIED,
        Code.MODE_NOT_OWNED,
        Code.RENAME_NOT_OWNED,
        Code.SUBMODULE_NOT_OWNED,
    }
)


def category_of(violation: Violation, policy: PolicyState) -> Category | None:
    """The category whose mode decides `violation` (None: a code no mode applies to)."""
    if violation.code in RESOURCE_CODES and violation.resource:
        return category_of_resource(violation.resource)
    if violation.code in PATH_CODES and violation.path:
        return policy.policy.category_of_path(unquote_path(violation.path))
    return None


@dataclass(frozen=True)
class Finding:
    """One ownership violation of one recorded submission, in its category."""

    record: Recorded
    violation: Violation
    category: Category
    marked: FalsePositive | None

    @property
    def false_positive(self) -> bool:
        return self.marked is not None and self.marked.covers(self.violation.code.value)

    def wire(self) -> dict[str, Any]:
        r, v = self.record, self.violation
        doc: dict[str, Any] = {
            "kind": r.kind,
            "key": r.key,
            "state": r.state,
            "taskId": r.task_id,
            "attemptId": r.attempt_id,
            "candidate": r.candidate,
            "at": r.at.isoformat(),
            "code": v.code.value,
            "mode": v.mode,
            "path": v.path,
            "resource": v.resource,
            "detail": v.detail,
            "falsePositive": None,
        }
        if self.false_positive and self.marked is not None:
            m = self.marked
            doc["falsePositive"] = {"actor": m.actor, "at": m.at.isoformat(), "reason": m.reason}
        return doc


@dataclass(kw_only=True)
class ObserveReport:
    live: PolicyState
    since: datetime | None
    findings: list[Finding] = field(default_factory=list)
    legacy: list[Recorded] = field(default_factory=list)
    landings: int = 0
    held: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def category(self, category: Category) -> dict[str, Any]:
        mine = [f for f in self.findings if f.category is category]
        observed = [f for f in mine if f.violation.mode == "observe"]
        marked = {f.record.key for f in mine if f.false_positive}
        mode = self.live.policy.mode_for(category)
        codes: dict[str, list[Finding]] = {}
        for f in mine:
            codes.setdefault(f.violation.code.value, []).append(f)
        return {
            "category": category.value,
            "mode": mode,
            "wouldBeFenced": len({f.record.key for f in observed}),
            "fenced": len({f.record.key for f in mine if f.violation.mode == "enforce"}),
            "falsePositives": len(marked),
            "ready": mode == "observe" and not marked,
            "codes": [
                {
                    "code": code,
                    "count": len(items),
                    "candidates": [f.wire() for f in items],
                }
                for code, items in sorted(codes.items())
            ],
        }

    def wire(self) -> dict[str, Any]:
        categories = [self.category(c) for c in ORDER]
        ready = [c["category"] for c in categories if c["ready"]]
        return {
            "schema": "integrator.observe-report.v1",
            "since": self.since.isoformat() if self.since else None,
            "policy": {
                "generation": self.live.generation,
                "digest": self.live.digest,
                "modes": {c.value: self.live.policy.mode_for(c) for c in ORDER},
            },
            "examined": {"landings": self.landings, "held": self.held},
            "categories": categories,
            "ready": ready,
            "next": ready[0] if ready else None,
            "legacy": [_legacy(r) for r in self.legacy],
            "skipped": [{"key": k, "why": w} for k, w in self.skipped],
        }


def _legacy(record: Recorded) -> dict[str, Any]:
    who = record.submission.submitter if record.submission else None
    return {
        "submission": record.key,
        "state": record.state,
        "taskId": record.task_id,
        "candidate": record.candidate,
        "at": record.at.isoformat(),
        "submitter": who.wire() if who else None,
    }


def observe_report(canonical: Canonical, since: datetime | None = None) -> ObserveReport:
    """Every ownership finding since `since`, with the marks and each category's readiness."""
    canonical.refresh()
    records = Records(canonical)
    marks = read_marks(canonical)
    report = ObserveReport(live=canonical.policy_state(), since=since)
    with scratch(canonical) as borrowed:
        replayer = Replayer(borrowed)
        for record in records.every(since):
            verdict = _verdict(record, replayer)
            if isinstance(verdict, str):
                report.skipped.append((record.key, verdict))
                continue
            report.landings += record.landed
            report.held += not record.landed
            if record.legacy:
                report.legacy.append(record)
            policy = record.policy or report.live
            for violation in verdict.violations:
                category = category_of(violation, policy)
                if category is not None:
                    found = Finding(record, violation, category, marks.get(record.key))
                    report.findings.append(found)
    return report


def _verdict(record: Recorded, replayer: Replayer) -> Verdict | str:
    """The verdict of the time: recorded (held), or derived again (a landing)."""
    if record.verdict is not None:
        return record.verdict
    if record.policy is None:
        return "its staging commit names a policy digest not in the policy history"
    if not record.contract:
        return "no claim commit records its consumption"
    return replayer.decide(request_for(record, record.policy, "")).verdict


def find_subject(records: Records, ident: str) -> Recorded:
    """The recorded submission `ident` names: a held (or archived) submission id, or a
    landing's staging commit (a unique prefix will do); UsageError otherwise."""
    canonical = records.canonical
    archived = find_archived(canonical, "archived", ident) if ident else None
    for prefix, state in ((refnames.HELD, "held"), (refnames.ARCHIVED, "archived")):
        if canonical.ref(prefix + ident) is not None or (state == "archived" and archived):
            found = records.held_one(ident, state)
            if found is None:
                raise UsageError(f"the records of submission {ident} cannot be read")
            return found
    try:
        oid = str(canonical.repo.revparse_single(ident).peel(pygit2.Commit).id)
    except (KeyError, ValueError, pygit2.GitError):
        oid = ""
    for commit, at in records.queue():
        if commit == oid:
            named = trailers(canonical.commit(commit).message)
            candidate, task = named.get(TRAILER_CANDIDATE), named.get("Integrator-Task")
            if candidate and task:
                return records.landing(commit, task, candidate, named, at)
            break
    raise UsageError(
        f"{ident!r} names no held submission and no landing on the queue "
        "(`integrator report observe` lists them)"
    )
