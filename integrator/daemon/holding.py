"""Holding a batch's FENCED and REVIEW candidates: their held records, written durably
before any submission is filed, and convergent when several daemons decide one submission.

Daemons on several hosts may take the same intake submission at once. Each decides it (the
decision is a pure function of the same facts) and holds it by compare-and-swap on
`refs/integrator/held/<submission>`. The first hold wins; the others lose their swap. A
loser re-reads the server and never stacks its hold on what it finds there: a record that
holds the same decision under the same contract is another daemon's decision of the same
facts (`hold.converged`); any other record — another decision, or a release manager's
approve, reject or requeue, held or archived since — is left as it is and said
(`hold.disagreed`); a submission git still knows nothing of is held again, at most
`ATTEMPTS` times.
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


def found_on_server(canonical: Canonical, sid: str, verdict: Verdict) -> str | None:
    """What another daemon or a person recorded for `sid` since this daemon read it:
    `converged` (the same decision under the same contract), `disagreed` (anything else),
    or None when git holds no record of it, held or archived (hold it)."""
    records = history(canonical, sid)
    if not records:
        return None
    action = records[-1][1]
    same = (
        action.action == "hold"
        and action.decision is verdict.decision
        and action.contract_digest == verdict.contract_digest
    )
    return "converged" if same else "disagreed"


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
        expected = {sid: op.old for (sid, _, _), op in zip(pending, ops, strict=True)}
        buffer.flush()
        faults.point("before-hold")
        try:
            write_refs(canonical, ops)
            return len(held) - len(pending)
        except RefMovedError as err:
            if not err.ref.startswith(held_ref("")) or attempt == ATTEMPTS - 1:
                raise
            canonical.refresh()  # the server's held refs, as another daemon left them
            still = []
            for sid, verdict, raw in pending:
                if canonical.ref(held_ref(sid)) == expected[sid]:
                    still.append((sid, verdict, raw))  # not the one that moved: as it was
                    continue
                found = found_on_server(canonical, sid, verdict)
                if found is None:
                    still.append((sid, verdict, raw))
                elif found == "converged":
                    log.info("hold.converged", submission=sid, ref=err.ref)
                else:
                    log.warning(  # a person's action or another decision: never stacked on
                        "hold.disagreed", submission=sid, decision=verdict.decision.value
                    )
            pending = still
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
