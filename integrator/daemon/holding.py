"""Holding a batch's FENCED and REVIEW candidates: their held records, written durably
before any submission is filed, and convergent when several daemons decide one submission.

Daemons on several hosts may take the same intake submission at once. Each decides it (the
decision is a pure function of the same facts) and holds it by compare-and-swap on
`refs/integrator/held/<submission>`. The first hold wins; the others lose their swap. A
loser re-reads the server: a submission whose newest record already holds the same
decision under the same contract was decided by another daemon, and its own hold is
dropped (not an error); any other is held again on the record it now finds.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import structlog

from integrator import faults
from integrator.documents.verdict import Verdict
from integrator.errors import RefMovedError
from integrator.plumbing import git, transaction
from integrator.plumbing.packs import ObjectBuffer
from integrator.records.canonical import Canonical
from integrator.records.held import held_ref, history, hold_op

log = structlog.get_logger("integrator.daemon")

ATTEMPTS = 3  # swaps lost in a row before the batch is retried as a whole


def already_held(canonical: Canonical, sid: str, verdict: Verdict) -> bool:
    """Whether `sid`'s newest held record holds `verdict`'s decision, under its contract."""
    if canonical.ref(held_ref(sid)) is None:
        return False
    records = history(canonical, sid)
    if not records:
        return False
    action = records[-1][1]
    return (
        action.action == "hold"
        and action.decision is verdict.decision
        and action.contract_digest == verdict.contract_digest
    )


def hold(
    canonical: Canonical,
    held: Sequence[tuple[str, Verdict, bytes]],
    now: datetime,
    *,
    objects: ObjectBuffer | None = None,
) -> int:
    """Hold every (submission, verdict, submission document) of `held`; how many were
    held by another daemon first. RefMovedError only when the swaps keep losing."""
    pending = list(held)
    for attempt in range(ATTEMPTS):
        buffer = objects if attempt == 0 and objects is not None else ObjectBuffer(canonical.repo)
        ops = [hold_op(canonical, sid, v, raw, now, objects=buffer) for sid, v, raw in pending]
        buffer.flush()
        faults.point("before-hold")
        try:
            write_refs(canonical, ops)
            return len(held) - len(pending)
        except RefMovedError as err:
            if not err.ref.startswith(held_ref("")) or attempt == ATTEMPTS - 1:
                raise
            canonical.refresh()  # the server's held refs, as another daemon left them
            before = len(pending)
            pending = [(s, v, raw) for s, v, raw in pending if not already_held(canonical, s, v)]
            log.info("hold.converged", held_elsewhere=before - len(pending), ref=err.ref)
            if not pending:
                return len(held)
    raise AssertionError("unreachable")  # pragma: no cover


def write_refs(canonical: Canonical, ops: list[transaction.RefOp]) -> None:
    """Held refs, durable before any submission is filed.

    A flood of fenced submissions makes thousands of held refs: with durable settings git
    writes each ref file out before renaming it (never an empty ref after a crash) without
    waiting for a journal commit per file, and one syncfs makes them durable.
    """
    if not ops:
        return
    repo = canonical.repo
    durable = git.durable(repo)
    if durable:
        git.sync_objects(repo)  # records on disk before refs name them
    if canonical.remote is not None:
        canonical.remote.apply(ops)  # held records live on the server
    elif durable and git.HAS_SYNCFS:
        canonical.bulk_updater.apply(ops)
        git.sync_refs(repo)
    else:
        canonical.updater.apply(ops)
