"""The overview's text, drawn from its JSON document (`integrator status --json` prints the
same document): one renderer whether the command read the repository and spool itself or
asked the daemon serving them (integrator/daemon/answer.py).

Pure and light: this module imports only the standard library's `datetime`, so a `status`
answered by the daemon never loads the models that read the repository. Everything in the
document may come from an agent (task ids, summaries, reasons): the printer escapes it
(`say`); here, text of several lines is folded onto one.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any


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


def _moment(text: object) -> datetime | None:
    """An ISO timestamp of the document, or None when it is absent or unreadable."""
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _list(doc: Mapping[str, Any], key: str) -> list[Any]:
    value = doc.get(key)
    return value if isinstance(value, list) else []


def _maps(doc: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    return [item for item in _list(doc, key) if isinstance(item, Mapping)]


def render(doc: Mapping[str, Any], now: datetime) -> list[str]:
    """The overview document as lines for a person (escaping is the printer's: `say`)."""
    lines: list[str] = []
    if doc.get("repo") is not None:
        lines.append(f"repository {doc['repo']}")
    if doc.get("target") is not None:
        lines += _queue_lines(doc)
    if doc.get("spool") is not None:
        lines += _spool_lines(doc)
    if doc.get("target") is not None:
        lines += _claim_lines(doc, now)
    decisions = _maps(doc, "decisions")
    if decisions:
        lines.append("last decisions:")
        for d in decisions:
            lines.append(
                f"  {_one_line(d.get('at', ''))[:19]}  {_one_line(d.get('submission'))}  "
                f"{_one_line(d.get('action') or d.get('kind')):<8} "
                f"{_one_line(d.get('decision') or '-'):<8} {_one_line(d.get('taskId') or '-')}"
            )
    lines += [f"cannot read {_one_line(problem)}" for problem in _list(doc, "problems")]
    return lines


def _queue_lines(doc: Mapping[str, Any]) -> list[str]:
    paused = bool(doc.get("paused"))
    lines = [
        f"  {_one_line(doc['target'])}: {'PAUSED' if paused else 'landing'}  "
        f"target {_short(doc.get('targetHead'))}  queue {_short(doc.get('queueHead'))}"
    ]
    if paused:
        pause = doc.get("pause")
        pause = pause if isinstance(pause, Mapping) else {}
        at = _moment(pause.get("at"))
        when = at.isoformat(timespec="seconds") if at else "?"
        lines.append(
            f"  paused by {_one_line(pause.get('by') or '?')} at {when}: "
            f"{_one_line(pause.get('reason') or '-')}"
        )
    validation = doc.get("validation")
    unpromoted = _maps(doc, "unpromoted")
    if validation is None:
        lines.append("  no validation: the target follows the queue")
    elif unpromoted:
        lines.append(
            f"  {len(unpromoted)} landing(s) wait for the promoter "
            f"({_one_line(validation)} validation):"
        )
        lines += [
            f"    {_short(landing.get('staging'))}  {_one_line(landing.get('taskId') or '-')}  "
            f"{_one_line(landing.get('summary') or '')}"
            for landing in unpromoted
        ]
    else:
        lines.append(f"  the target is at the queue head ({_one_line(validation)} validation)")
    return lines


def _spool_lines(doc: Mapping[str, Any]) -> list[str]:
    counts = doc.get("counts")
    c = counts if isinstance(counts, Mapping) else {}
    lines = [
        f"spool {doc['spool']}",
        f"  waiting {c.get('new', 0)}  in work {c.get('work', 0)}  accepted "
        f"{c.get('accepted', 0)}  fenced {c.get('fenced', 0)}  review {c.get('review', 0)}  "
        f"rejected {c.get('rejected', 0)}",
    ]
    held = _maps(doc, "held")
    if held:
        lines.append(f"  held for review ({len(held)}):")
        for h in held:
            codes = h.get("codes")
            code_text = ",".join(str(x) for x in codes) if isinstance(codes, list) else ""
            lines.append(
                f"    {_one_line(h.get('submission'))}  {_one_line(h.get('decision', '?')):<7} "
                f"{_one_line(h.get('taskId') or '-'):<20} {_one_line(code_text) or '-'}"
            )
    return lines


def _claim_lines(doc: Mapping[str, Any], now: datetime) -> list[str]:
    claims = _maps(doc, "claims")
    if not claims:
        return ["no live claims"]
    rows = []
    for c in claims:
        until = _moment(c.get("leaseExpiresAt"))
        paths = c.get("paths")
        rows.append((
            _one_line(c.get("taskId")),
            _one_line(c.get("generation")),
            _one_line(c.get("holder")),
            left(until, now) if until else "?",
            ", ".join(_one_line(p) for p in paths) if isinstance(paths, list) else "",
        ))  # fmt: skip
    width = max(len(row[0]) for row in rows)
    hwidth = max(len(row[2]) for row in rows)
    return [f"live claims ({len(rows)}):"] + [
        f"  {task:<{width}}  gen {gen:<3} {holder:<{hwidth}}  {lease:>7} left  {paths}"
        for task, gen, holder, lease, paths in rows
    ]


def now() -> datetime:
    """The time the overview is read at (lease time left is counted from it)."""
    return datetime.now(UTC)
