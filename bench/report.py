"""One table with ratios and targets, the machine it ran on, and the JSON of everything.

A row states the integrator figure, the figure it is compared with (plain git pipeline,
ref-move floor or mergetrain), their ratio oriented so that bigger is better for
integrator, the target and whether it was met. Targets that are stated
for 100,000 files are marked `n/a` when the run used a smaller repository.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import platform
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0–100); NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(math.ceil(p / 100 * len(ordered)), 1)
    return ordered[rank - 1]


def median(values: Sequence[float]) -> float:
    return percentile(values, 50)


def summary(values: Sequence[float]) -> dict[str, float]:
    return {
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "max": max(values) if values else math.nan,
        "n": float(len(values)),
    }


@dataclass(frozen=True)
class Row:
    section: str
    metric: str
    integrator: str
    other: str = ""
    ratio: str = ""
    target: str = ""
    met: str = ""


def fmt(value: float | None, digits: int = 1) -> str:
    if value is None or math.isnan(value):
        return "-"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def ratio(better: float | None, worse: float | None) -> str:
    """`worse / better` as `N.N×` (how many times integrator is ahead); '-' when unknown."""
    if better is None or worse is None or better <= 0 or math.isnan(better) or math.isnan(worse):
        return "-"
    return f"{worse / better:.1f}×"


def verdict(ok: bool | None) -> str:
    return "-" if ok is None else ("yes" if ok else "NO")


def render(rows: Sequence[Row]) -> str:
    """A fixed-width text table; each section starts with its own heading line."""
    header = ("metric", "integrator", "compared with", "ratio", "target", "met")
    cells = [header, *(dataclasses.astuple(r)[1:] for r in rows)]
    widths = [max(len(str(c[i])) for c in cells) for i in range(len(header))]
    rule = "-+-".join("-" * w for w in widths)

    def line(cell: Sequence[str]) -> str:
        return " | ".join(str(c).ljust(w) for c, w in zip(cell, widths, strict=True)).rstrip()

    lines = [line(header)]
    section = None
    for row, cell in zip(rows, cells[1:], strict=True):
        if row.section != section:
            lines += [rule, f"{row.section}:"]
            section = row.section
        lines.append(line(cell))
    return "\n".join(lines)


def _first(cmd: list[str]) -> str:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, check=False).stdout
    except OSError:
        return "unknown"
    return out.strip().splitlines()[0] if out.strip() else "unknown"


def machine() -> dict[str, Any]:
    """What the figures ran on: cores, CPU model, git, Python, and the code under test."""
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    here = Path(__file__).resolve().parent.parent
    dirty = _first(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"])
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "git": _first(["git", "--version"]),
        "python": platform.python_version(),
        "kernel": platform.release(),
        "commit": _first(["git", "-C", str(here), "rev-parse", "--short", "HEAD"]),
        "worktree_modified": dirty != "unknown",
        # These machines are shared: a load above the core count means noisy figures.
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: _plain(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def write_json(path: Path, document: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(_plain(document), indent=2, sort_keys=True) + "\n")
