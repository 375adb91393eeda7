"""The records the mirror copies out of git: one per decision, one per review action."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from integrator.documents.contract import Model
from integrator.documents.verdict import Verdict

RecordKind = Literal["decision", "review", "validation", "promotion"]


class MirrorRecord(Model):
    """One row of the registry: a decision on a submission, or a review action."""

    key: str
    kind: RecordKind
    submission: str
    at: datetime
    decision: str | None = None
    codes: list[str] = Field(default_factory=list)
    task_id: str | None = None
    attempt_id: str | None = None
    generation: int | None = None
    candidate: str | None = None
    staging_commit: str | None = None
    latency_ms: float | None = None
    recovered: bool = False
    action: str | None = None
    actor: str | None = None
    reason: str | None = None


def codes_of(verdict: Verdict) -> list[str]:
    """The distinct violation codes of a verdict, in first-seen order."""
    return list(dict.fromkeys(v.code.value for v in verdict.violations))


def decision_record(
    sid: str, verdict: Verdict | None, at: datetime, latency: float, reason: str | None = None
) -> MirrorRecord:
    """The record of a daemon decision; `verdict` None means the submission was rejected."""
    if verdict is None:
        return MirrorRecord(
            key=f"decision:{sid}",
            kind="decision",
            submission=sid,
            at=at,
            decision="REJECTED",
            latency_ms=round(latency * 1000, 3),
            reason=reason,
        )
    return MirrorRecord(
        key=f"decision:{sid}",
        kind="decision",
        submission=sid,
        at=at,
        decision=verdict.decision.value,
        codes=codes_of(verdict),
        task_id=verdict.task_id,
        attempt_id=verdict.attempt_id,
        generation=verdict.generation,
        candidate=verdict.candidate,
        staging_commit=verdict.staging_commit,
        latency_ms=round(latency * 1000, 3),
        recovered=bool(verdict.recovered),
    )


def review_record(
    sid: str,
    action: str,
    actor: str,
    at: datetime,
    verdict: Verdict | None,
    reason: str | None,
    *,
    task_id: str | None = None,
    attempt_id: str | None = None,
    generation: int | None = None,
    candidate: str | None = None,
) -> MirrorRecord:
    """The record of a review action on held submission `sid`.

    `verdict` is the action's new verdict (an approval's), None for a reject. The keyword
    arguments name the held candidate's task, attempt, generation and candidate; they fill
    what the verdict does not say, so `history --task` finds every action, rejects included.
    """
    if verdict is not None:
        task_id = verdict.task_id or task_id
        attempt_id = verdict.attempt_id or attempt_id
        generation = verdict.generation if verdict.generation is not None else generation
        candidate = verdict.candidate or candidate
    return MirrorRecord(
        key=f"review:{sid}:{at:%Y%m%dT%H%M%S%f}:{action}",
        kind="review",
        submission=sid,
        at=at,
        decision=verdict.decision.value if verdict else None,
        codes=codes_of(verdict) if verdict else [],
        task_id=task_id,
        attempt_id=attempt_id,
        generation=generation,
        candidate=candidate,
        staging_commit=verdict.staging_commit if verdict else None,
        action=action,
        actor=actor,
        reason=reason,
    )


def record_line(record: MirrorRecord) -> bytes:
    """One JSON line (the backlog's format, and the registry's stored document)."""
    return record.model_dump_json(by_alias=True, exclude_none=True).encode() + b"\n"
