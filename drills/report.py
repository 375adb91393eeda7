"""The drills' report: a table for people, the same as JSON for machines.

Rows are drills first, then the quantitative gates. A failure is printed with what was
expected, what happened, and the paths that hold the evidence (refs, spool, logs).
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from drills.registry import Record

_WIDTHS = (22, 50, 46, 6)


def result_word(passed: bool | None) -> str:
    return {True: "pass", False: "FAIL", None: "n/a"}[passed]


def table(records: Sequence[Record]) -> str:
    """Fixed-width rows (figure and gate wrapped), drills then gates, with a rule between."""
    head = ("drill / gate", "figure", "gate", "result")
    lines = [_row(head), _row(tuple("-" * w for w in _WIDTHS))]
    kind = None
    for record in records:
        if kind is not None and record.kind != kind:
            lines.append(_row(tuple("-" * w for w in _WIDTHS)))
        kind = record.kind
        cells = (record.name, record.figure, record.gate, result_word(record.passed))
        wrapped = [
            textwrap.wrap(cell, width, break_long_words=True) or [""]
            for cell, width in zip(cells, _WIDTHS, strict=True)
        ]
        for i in range(max(len(w) for w in wrapped)):
            lines.append(_row(tuple(w[i] if i < len(w) else "" for w in wrapped)))
    return "\n".join(lines)


def _row(cells: Sequence[str]) -> str:
    return "  ".join(cell.ljust(width) for cell, width in zip(cells, _WIDTHS, strict=True)).rstrip()


def failures(records: Sequence[Record]) -> str:
    """What each failed row expected, what happened, and where to look."""
    out: list[str] = []
    for record in records:
        if record.passed is not False:
            continue
        out.append(f"FAILED {record.name} ({record.title})")
        out.append(f"  expected: {record.expected}")
        out.append(f"  actual:   {record.actual}")
        for path in record.evidence:
            out.append(f"  evidence: {path}")
    return "\n".join(out)


def notes(records: Sequence[Record]) -> str:
    return "\n".join(f"note ({r.name}): {n}" for r in records for n in r.notes)


def write_json(path: Path, records: Sequence[Record], meta: dict[str, Any]) -> None:
    doc = {
        "schema": "drills.report.v1",
        **meta,
        "passed": all(r.passed is not False for r in records),
        "records": [r.wire() for r in records],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    tmp.replace(path)
