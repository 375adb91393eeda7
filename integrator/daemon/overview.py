"""`integrator status` with no submission: one screen of what the repository and its spool
are doing — the queue and the promoter, what waits, what is held, the live claims, the last
decisions.

`gather` reads (the repository, the spool, the registry mirror) into an `Overview` of plain
values; `document` and `render` are pure, so the text and the JSON say the same thing.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from datetime import UTC, datetime
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
    }


def left(until: datetime, now: datetime) -> str:
    """Lease time left, in the largest unit that reads well (`expired` once past)."""
    seconds = int((until - now).total_seconds())
    if seconds <= 0:
        return "expired"
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    if seconds < 172800:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d"


def _short(oid: object) -> str:
    return str(oid)[:12] if oid else "-"


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def render(view: Overview, now: datetime) -> list[str]:
    """The overview as lines for a person (escaping is the printer's: `say`)."""
    lines: list[str] = []
    if view.repo is not None:
        lines.append(f"repository {view.repo}")
    if view.target is not None:
        lines += _queue_lines(view)
    if view.spool is not None:
        lines += _spool_lines(view)
    if view.target is not None:
        lines += _claim_lines(view, now)
    if view.decisions:
        lines.append("last decisions:")
        for d in view.decisions:
            lines.append(
                f"  {str(d.get('at', ''))[:19]}  {d.get('submission')}  "
                f"{d.get('action') or d.get('kind')!s:<8} {d.get('decision') or '-':<8} "
                f"{d.get('taskId') or '-'}"
            )
    lines += [f"cannot read {_one_line(problem)}" for problem in view.problems]
    return lines


def _queue_lines(view: Overview) -> list[str]:
    state = "PAUSED" if view.paused else "landing"
    lines = [
        f"  {view.target}: {state}  target {_short(view.target_head)}  "
        f"queue {_short(view.queue_head)}"
    ]
    if view.paused:
        at = view.paused_at.isoformat(timespec="seconds") if view.paused_at else "?"
        reason = _one_line(view.pause_reason or "-")
        lines.append(f"  paused by {view.paused_by or '?'} at {at}: {reason}")
    if view.validation is None:
        lines.append("  no validation: the target follows the queue")
    elif view.unpromoted:
        lines.append(
            f"  {len(view.unpromoted)} landing(s) wait for the promoter "
            f"({view.validation} validation):"
        )
        lines += [
            f"    {_short(landing.get('staging'))}  {landing.get('taskId') or '-'}  "
            f"{_one_line(landing.get('summary') or '')}"
            for landing in view.unpromoted
        ]
    else:
        lines.append(f"  the target is at the queue head ({view.validation} validation)")
    return lines


def _spool_lines(view: Overview) -> list[str]:
    c = view.counts
    lines = [
        f"spool {view.spool}",
        f"  waiting {c.get('new', 0)}  in work {c.get('work', 0)}  accepted "
        f"{c.get('accepted', 0)}  fenced {c.get('fenced', 0)}  review {c.get('review', 0)}  "
        f"rejected {c.get('rejected', 0)}",
    ]
    if view.held:
        lines.append(f"  held for review ({len(view.held)}):")
        lines += [
            f"    {h.get('submission')}  {h.get('decision', '?'):<7} "
            f"{h.get('taskId') or '-':<20} {','.join(str(x) for x in h.get('codes', [])) or '-'}"
            for h in view.held
        ]
    return lines


def _claim_lines(view: Overview, now: datetime) -> list[str]:
    if not view.claims:
        return ["no live claims"]
    width = max(len(c.task_id) for c in view.claims)
    hwidth = max(len(c.holder) for c in view.claims)
    return [f"live claims ({len(view.claims)}):"] + [
        f"  {c.task_id:<{width}}  gen {c.generation:<3} {c.holder:<{hwidth}}  "
        f"{left(c.lease_expires_at, now):>7} left  {', '.join(c.paths)}"
        for c in view.claims
    ]


def now() -> datetime:
    """The time the overview is read at (lease time left is counted from it)."""
    return datetime.now(UTC)
