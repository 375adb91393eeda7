"""The promoter's view of one target: the unpromoted landings and what is known of them.

The target sits on the queue's first-parent chain (it only ever moves forward along it);
the landings after it, oldest first, are the staging commits from the target to the queue
head. Each head's validation result is read from its ref; the state is all the pure
`next_step` needs, plus the names of things for the records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pygit2

from integrator.documents.policy import Validation
from integrator.documents.promotion import Covered, QueueControl, ValidationResult
from integrator.documents.trailers import TRAILER_CANDIDATE, trailers
from integrator.errors import ConfigurationError
from integrator.records import validations
from integrator.records.canonical import Canonical
from integrator.records.queue_control import control_history, read_control

TRAILER_TASK = "Integrator-Task"
TRAILER_ATTEMPT = "Integrator-Attempt"
TRAILER_DIGEST = "Integrator-Contract-Digest"
TRAILER_BASE = "Integrator-Base"
TRAILER_REPLACES = "Integrator-Replaces"
TRAILER_LANDING = "Integrator-Landing"
WALK_LIMIT = 100_000  # unpromoted landings read before the state is refused as too long


def covered(commit: pygit2.Commit) -> Covered:
    """A staging commit as the records name it."""
    found = trailers(commit.message)
    oid = str(commit.id)
    summary = commit.message.splitlines()[0][:200] if commit.message.strip() else None
    return Covered(
        staging=oid,
        landing=found.get(TRAILER_LANDING, oid),
        candidate=found.get(TRAILER_CANDIDATE),
        task_id=found.get(TRAILER_TASK),
        attempt_id=found.get(TRAILER_ATTEMPT),
        summary=summary,
    )


@dataclass(kw_only=True)
class QueueState:
    """The target, the queue head, the landings between them and their heads' results."""

    target: str  # the branch name
    promoted: str  # refs/heads/<target>
    queue: str  # refs/integrator/queue/<target>
    landings: list[Covered]  # oldest first; landings[i - 1] made head i
    results: dict[str, tuple[str, ValidationResult]] = field(default_factory=dict)
    # refs/integrator/promotion/<target> when this state was read (before the target and
    # the queue): every promotion and every ejection moves it with this as its lease, so of
    # two promoters deciding from the same state only one can commit.
    record: str | None = None

    @property
    def pending(self) -> int:
        return len(self.landings)

    def head(self, index: int) -> str:
        """Head `index` (0 is the target)."""
        return self.promoted if index == 0 else self.landings[index - 1].staging

    def covering(self, index: int) -> list[Covered]:
        return self.landings[:index]

    def final(self, provisional: bool = False) -> dict[int, bool]:
        """The final results by head index, as `next_step` reads them (with `provisional`,
        a probe's failure not confirmed yet counts as a failure)."""
        out: dict[int, bool] = {}
        for i, landing in enumerate(self.landings, 1):
            found = self.results.get(landing.staging)
            if found is None:
                continue
            result = found[1]
            if result.final or (provisional and result.status == "fail"):
                out[i] = result.status == "pass"
        return out


def read_state(canonical: Canonical, *, limit: int = WALK_LIMIT) -> QueueState:
    """The queue between the target and its head; ConfigurationError when the target is
    not on the queue's first-parent chain (moved by hand: a release manager reconciles)."""
    target = canonical.target
    record = canonical.ref(validations.promotion_ref(target))  # first: see QueueState.record
    promoted = canonical.ref(canonical.target_ref)
    queue = canonical.ref(canonical.queue_ref)
    if promoted is None or queue is None:
        raise ConfigurationError(
            f"{canonical.target_ref} or {canonical.queue_ref} is missing; run integrator init"
        )
    landings: list[Covered] = []
    commit = canonical.commit(queue)
    while str(commit.id) != promoted:
        if len(landings) >= limit or not commit.parent_ids:
            raise ConfigurationError(
                f"{canonical.target_ref} ({promoted[:12]}) is not on the first-parent chain of "
                f"{canonical.queue_ref} ({queue[:12]}): it was moved outside the queue; a "
                "release manager must reconcile them before anything is promoted"
            )
        landings.append(covered(commit))
        commit = canonical.commit(str(commit.parent_ids[0]))
    landings.reverse()
    state = QueueState(
        target=target, promoted=promoted, queue=queue, landings=landings, record=record
    )
    for landing in landings:
        found = validations.latest(canonical, target, landing.staging)
        if found is not None:
            state.results[landing.staging] = found
    return state


@dataclass(frozen=True)
class QueueStatus:
    """`integrator queue status`: the control in force, the validation policy, what waits
    for promotion (None with the problem that kept it from being read) and the document."""

    control: QueueControl | None
    validation: Validation | None
    state: QueueState | None
    problem: str | None
    document: dict[str, Any]


def queue_status(repo: str | Path) -> QueueStatus:
    """Paused or not, the queue and target heads, and the landings not promoted yet."""
    with Canonical(repo) as canonical:
        canonical.refresh()
        control = read_control(canonical)
        validation = canonical.policy_state().policy.validation
        try:
            state = read_state(canonical)
            landings = [c.wire() for c in state.landings]
            problem = None
        except ConfigurationError as err:
            state, landings, problem = None, [], str(err)
        document: dict[str, Any] = {
            "target": canonical.target_ref,
            "paused": bool(control and control.paused),
            "control": control.wire() if control else None,
            "history": [c.wire() for c in control_history(canonical, 10)],
            "targetHead": canonical.ref(canonical.target_ref),
            "queueHead": canonical.ref(canonical.queue_ref),
            "validation": validation.model_dump(mode="json") if validation else None,
            "unpromoted": landings,
            "problem": problem,
        }
    return QueueStatus(control, validation, state, problem, document)
