"""`integrator status` with no submission: one screen of what the repository and its spool
are doing — the queue and the promoter, what waits, what is held, the live claims, the last
decisions.

`gather` reads (the repository, the spool, the registry mirror) into an `Overview` of plain
values; `document` is pure, and the text is drawn from that document
(integrator/daemon/overview_text.py), so the text and the JSON say the same thing, whether
the command computed them or the daemon serving the spool answered
(integrator/daemon/answer.py).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from integrator.errors import IntegratorError
from integrator.store.spool import Spool

LAST_DECISIONS = 5


@dataclass(frozen=True)
class ClaimRow:
    task_id: str
    holder: str
    generation: int
    lease_expires_at: datetime
    paths: tuple[str, ...]


@dataclass(frozen=True)
class Overview:
    """Everything the overview shows, read once; `problems` says what could not be read."""

    repo: str | None
    target: str | None = None
    target_head: str | None = None
    queue_head: str | None = None
    paused: bool = False
    paused_by: str | None = None
    paused_at: datetime | None = None
    pause_reason: str | None = None
    validation: str | None = None  # the validation mode, None when the target follows
    unpromoted: list[dict[str, Any]] = field(default_factory=list)
    claims: list[ClaimRow] = field(default_factory=list)
    spool: str | None = None
    counts: dict[str, int] = field(default_factory=dict)  # spool folder -> entries
    held: list[dict[str, Any]] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def gather(repo: Path | None, spool: Spool | None) -> Overview:
    """Read the overview of `repo` (the canonical repository) and `spool` (either may be
    None); a part that cannot be read becomes a problem line, never a failed command."""
    problems: list[str] = []
    parts: dict[str, Any] = {}
    if repo is not None:
        parts.update(_repository(repo, problems))
    if spool is not None:
        parts.update(_spool(spool, repo, problems))
    return Overview(repo=str(repo) if repo else None, problems=problems, **parts)


def _repository(repo: Path, problems: list[str]) -> dict[str, Any]:
    from integrator.promotion.state import queue_status
    from integrator.records.canonical import Canonical

    out: dict[str, Any] = {}
    try:
        status = queue_status(repo)
    except IntegratorError as err:
        problems.append(f"queue: {err}")
        return out
    doc = status.document
    control = status.control
    out.update(
        target=doc["target"],
        target_head=doc["targetHead"],
        queue_head=doc["queueHead"],
        paused=bool(doc["paused"]),
        validation=status.validation.mode if status.validation else None,
        unpromoted=list(doc["unpromoted"]),
    )
    if control is not None and control.paused:
        out.update(paused_by=control.actor, paused_at=control.at, pause_reason=control.reason)
    if status.problem:
        problems.append(f"promotion: {status.problem}")
    try:
        with Canonical(repo) as canonical:
            claims = canonical.claims()
    except IntegratorError as err:
        problems.append(f"claims: {err}")
        return out
    out["claims"] = [
        ClaimRow(
            c.view.task_id,
            c.contract.lease.holder,
            c.view.generation,
            c.view.lease_expires_at,
            tuple(str(p) for p in c.contract.paths),
        )
        for c in claims
        if c.view.state == "live"
    ]
    return out


def _spool(spool: Spool, repo: Path | None, problems: list[str]) -> dict[str, Any]:
    from integrator.review.actions import listing
    from integrator.review.documents import summary_document
    from integrator.store.mirror import for_spool
    from integrator.store.spool import FOLDERS

    out: dict[str, Any] = {"spool": str(spool.root)}
    out["counts"] = {name: len(spool.entries(name)) for name in FOLDERS if name != "tmp"}
    try:
        out["held"] = [summary_document(h) for h in listing(spool, repo)]
    except IntegratorError as err:
        problems.append(f"held: {err}")
    try:
        mirror = for_spool(spool.root, None, timeout=1.0)
        try:
            records = mirror.registry.history(limit=LAST_DECISIONS)
        finally:
            mirror.close()
        out["decisions"] = [r.wire() for r in records]
    except (IntegratorError, sqlite3.Error) as err:
        problems.append(f"decisions: {err}")
    return out


def document(view: Overview, now: datetime) -> dict[str, Any]:
    """The overview as `status --json` prints it."""
    return {
        "repo": view.repo,
        "target": view.target,
        "targetHead": view.target_head,
        "queueHead": view.queue_head,
        "paused": view.paused,
        "pause": None
        if not view.paused
        else {
            "by": view.paused_by,
            "at": view.paused_at.isoformat() if view.paused_at else None,
            "reason": view.pause_reason,
        },
        "validation": view.validation,
        "unpromoted": view.unpromoted,
        "claims": [
            {
                "taskId": c.task_id,
                "holder": c.holder,
                "generation": c.generation,
                "leaseExpiresAt": c.lease_expires_at.isoformat(),
                "leaseSecondsLeft": int((c.lease_expires_at - now).total_seconds()),
                "paths": list(c.paths),
            }
            for c in view.claims
        ],
        "spool": view.spool,
        "counts": view.counts,
        "held": view.held,
        "decisions": view.decisions,
        "problems": view.problems,
        "answeredBy": None,  # the daemon's answer says {"daemon": pid} (answer.py)
    }
