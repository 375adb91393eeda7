"""The documents promotion writes into git: validation results, promotion and ejection
records, queue controls. Strict, camelCase on the wire, like every other document.

- `integrator.validation.v1` (`result.json` of a commit on
  `refs/integrator/validations/<target>/<head>`): one entry per request, run attempt and
  final result for one queue head; the chain of commits is every attempt.
- `integrator.promotion.v1` (`promotion.json` on `refs/integrator/promotion/<target>`):
  each promotion of the target and each ejection with its queue rebuild.
- `integrator.ejection.v1` (`ejection.json` on `refs/integrator/ejected/<target>/<landing>`):
  one ejected landing, named by the staging commit its consumed claim names.
- `integrator.queue-control.v1` (`control.json` on `refs/integrator/queue-control/<target>`):
  paused or running, why, by whom.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field

from integrator.documents.contract import Model
from integrator.documents.verdict import Code
from integrator.limits import ACTOR_CHARS, RECORD_TEXT_CHARS

Status = Literal["requested", "running", "pass", "fail"]


class Covered(Model):
    """One landing a queue head covers (since the target it was validated against)."""

    staging: str  # the commit on the queue
    landing: str  # the staging commit its consumed claim names (itself unless rebuilt)
    candidate: str | None = None
    task_id: str | None = None
    attempt_id: str | None = None
    summary: str | None = None


class ValidationResult(Model):
    """One record of one queue head's validation."""

    schema_: Literal["integrator.validation.v1"] = Field(
        default="integrator.validation.v1", alias="schema"
    )
    target: str
    head: str
    tree: str
    base: str  # the target the head was validated against
    landings: list[Covered] = Field(default_factory=list)
    status: Status
    final: bool = False  # the truth for this head: no other result is ever recorded after it
    attempt: Annotated[int, Field(ge=0)] = 0  # the run (0: a request, no run yet)
    runner: Annotated[str, Field(max_length=RECORD_TEXT_CHARS)] = "integrator"
    at: datetime
    started_at: datetime | None = None
    expires_at: datetime | None = None  # a request or run others may take over after this
    duration_s: float | None = None
    exit_code: int | None = None
    timed_out: bool = False
    log_url: Annotated[str, Field(max_length=RECORD_TEXT_CHARS)] | None = None
    detail: Annotated[str, Field(max_length=RECORD_TEXT_CHARS)] | None = None
    scope: str | None = None  # the [[validation.scope]] it validates (None: the whole tree)
    flaky: bool = False  # a pass after failed runs of the same tree (flaky_reruns)
    probe: bool = False  # a bisection point rather than a batch head
    key: str | None = None  # the result cache's key (tree or scope projection, command…)


class Ejected(Model):
    """One landing taken out of the queue, and why (its dequeue reason code)."""

    landing: str  # the staging commit its consumed claim names
    staging: str  # the commit the queue held for it when it was ejected
    code: Code
    detail: Annotated[str, Field(max_length=4 * RECORD_TEXT_CHARS)]
    candidate: str | None = None
    task_id: str | None = None
    attempt_id: str | None = None
    contract_digest: str | None = None
    validation: str | None = None  # the result commit that failed (VALIDATION_FAILED)
    scope: str | None = None  # the scope whose suite failed (VALIDATION_FAILED)
    failed_runs: int | None = None  # runs of the failing head that failed
    flaky_seen: bool | None = None  # whether a run of its bisection passed only on rerun


class Rebuilt(Model):
    """A landing re-merged onto the new queue: the commit it replaces and its new one."""

    landing: str
    replaces: str
    staging: str
    task_id: str | None = None


class PromotionRecord(Model):
    """One act of a promoter on a target: a promotion, or an ejection and its rebuild."""

    schema_: Literal["integrator.promotion.v1"] = Field(
        default="integrator.promotion.v1", alias="schema"
    )
    # reorder: landings of scopes not failing moved before those of a failing scope (no
    # landing taken out; each keeps its scopes' results, which depend on its scopes only)
    action: Literal["promote", "eject", "reorder"]
    target: str
    at: datetime
    actor: Annotated[str, Field(max_length=RECORD_TEXT_CHARS)]
    before: str  # promote: the target before; eject: the queue head before
    after: str  # promote: the target after; eject: the rebuilt queue head
    landings: list[Covered] = Field(default_factory=list)  # promote: the landings promoted
    validations: list[str] = Field(default_factory=list)  # the result commits it rests on
    ejected: list[Ejected] = Field(default_factory=list)
    rebuilt: list[Rebuilt] = Field(default_factory=list)
    depth: int | None = None  # eject: validations the bisection took to find the culprit


class EjectionRecord(Model):
    """`ejection.json`: an ejected landing with the evidence, kept for review."""

    schema_: Literal["integrator.ejection.v1"] = Field(
        default="integrator.ejection.v1", alias="schema"
    )
    target: str
    at: datetime
    ejected: Ejected
    good: str  # the queue head the queue was rebuilt on
    failing: str | None = None  # the queue head whose validation failed


class QueueControl(Model):
    """`control.json`: whether landings on the target are paused."""

    schema_: Literal["integrator.queue-control.v1"] = Field(
        default="integrator.queue-control.v1", alias="schema"
    )
    target: str
    paused: bool
    reason: Annotated[str, Field(max_length=RECORD_TEXT_CHARS)] | None = None
    actor: Annotated[str, Field(max_length=ACTOR_CHARS)]
    at: datetime
