"""Requeueing an ejected candidate: a new attempt for its task, and a new submission.

An ejected landing's claim stays consumed (it landed once; that attempt is spent), so the
same submission cannot come back. A release manager who judges the failure was not the
candidate's (a flaky suite, a broken runner, a fix landed since) requeues it: the task's
claim is reclaimed — generation + 1, a new attempt, the same paths and resources, the
candidate's own base — and the candidate is submitted again under that contract, through
the fence like any other submission. The held record is archived with the new
submission's id. A claim that moved on since (reissued, reclaimed by someone else) is
refused: the task belongs to whoever holds it now.
"""

from __future__ import annotations

import json
import socket
from datetime import timedelta

from integrator.documents.bounds import CEILING_LIMITS
from integrator.documents.contract import OwnershipContract, parse_contract
from integrator.documents.submission import Submission, Submitter
from integrator.documents.verdict import Code, Verdict
from integrator.errors import ConfigurationError, UsageError
from integrator.limits import (
    ACTOR_CHARS,
    REASON_CHARS,
    SUBMITTER_HOST_CHARS,
    SUBMITTER_USER_CHARS,
    VERDICT_BYTES,
)
from integrator.promotion.reflect import OWNERSHIP_FILE
from integrator.records.attempt_keys import stored_key
from integrator.records.canonical import Canonical
from integrator.records.claims import Claims
from integrator.review.actions import Review
from integrator.store.spool import Spool
from integrator.store.submitted import read_at_most_path


def _live_contract(
    canonical: Canonical, task: str, landing: str, generation: int, lease: timedelta, base: str
) -> OwnershipContract:
    """A contract for a new attempt: reclaimed now, or the one an interrupted requeue made."""
    claim = canonical.claim(task)
    if claim is None:
        raise ConfigurationError(f"task {task!r} has no claim any more")
    view = claim.view
    if view.state == "consumed" and view.staging_commit == landing:
        return Claims(canonical).reclaim(task, force=True, base=base, lease=lease)
    parents = canonical.commit(claim.oid).parent_ids
    before = canonical.claim_at(str(parents[0])) if parents else None
    if (
        view.state == "live"
        and view.generation == generation + 1
        and before is not None
        and before.view.staging_commit == landing
    ):
        return claim.contract  # a requeue that stopped after reclaiming: finish it
    raise ConfigurationError(
        f"the claim of task {task!r} moved on (now {view.state}, generation "
        f"{view.generation}): whoever holds it decides; requeue only an ejected candidate "
        "whose claim its landing consumed"
    )


def requeue(
    review: Review,
    sid: str,
    actor: str,
    reason: str,
    *,
    lease: timedelta = timedelta(hours=1),
    urgent: bool = False,
) -> tuple[str, OwnershipContract]:
    """Requeue held submission `sid` (ejected by promotion): (new submission id, contract)."""
    if not reason.strip():
        raise UsageError("a requeue needs a reason")
    if len(reason) > REASON_CHARS or not actor or len(actor) > ACTOR_CHARS:
        raise UsageError(
            f"the reason is at most {REASON_CHARS} characters, the actor {ACTOR_CHARS}"
        )
    canonical = review.canonical
    canonical.refresh()
    with review._exclusive():
        held = review.get(sid)
        verdict = held.verdict
        ejected = [v for v in verdict.violations if v.code is Code.VALIDATION_FAILED]
        if not ejected or verdict.task_id is None or verdict.generation is None:
            raise UsageError(f"{sid} was not ejected by validation; approve or reject it instead")
        # It landed (validation ejected it): admitted then, read up to any policy's limits.
        old = parse_contract(json.dumps(held.submission.contract).encode(), limits=CEILING_LIMITS)
        landing = _landing_of(review.spool, sid, verdict.staging_commit)
        contract = _live_contract(
            canonical, verdict.task_id, landing, verdict.generation, lease, old.base_commit
        )
        submission = Submission.model_validate(
            {
                "schema": "integrator.submission.v1",
                "contract": contract.wire(),
                "candidate": held.submission.candidate,
                "submitter": Submitter(
                    user=actor[:SUBMITTER_USER_CHARS],
                    host=socket.gethostname()[:SUBMITTER_HOST_CHARS],
                ),
                "submittedAt": review.clock(),
                "urgent": True if urgent else None,
            }
        )
        new_sid = review.spool.submit(submission, key=stored_key(canonical, contract))
        note = (
            f"{reason} (requeued as {new_sid} under attempt {contract.attempt_id}, generation "
            f"{contract.ownership_generation})"
        )
        review._record(held, "requeue", actor, note[:REASON_CHARS], None, verdict.contract_digest)
    return new_sid, contract


def _landing_of(spool: Spool, sid: str, staging: str | None) -> str:
    """The landing name the claim knows: the fence's verdict, kept beside the ejection."""
    found = spool.find(sid)
    if found is not None:
        try:
            ownership = Verdict.model_validate_json(
                read_at_most_path(found[1] / OWNERSHIP_FILE, VERDICT_BYTES)
            )
            if ownership.staging_commit:
                return ownership.staging_commit
        except (OSError, ValueError):
            pass
    if staging is None:
        raise ConfigurationError(f"{sid} names no landing")
    return staging
