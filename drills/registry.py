"""The catalogue of drills and the record each run produces.

A drill is a function `(Context) -> figure` registered with `@drill(...)`; it states its
expectations through `ctx.expect`/`ctx.equal`, and anything that stops it from running as
scripted (a timeout, a process that died) is a `DrillError`. `run_drill` turns either into a
`Record`: name, figure, gate, passed, what was expected, what happened, and the evidence.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from drills.context import Context
from drills.procs import DrillError

DrillFunc = Callable[[Context], str]


@dataclass(frozen=True)
class Drill:
    name: str
    group: str  # the drill group (1–7, docs/drills.md), or "gate" for the quantitative drills
    title: str
    gate: str
    func: DrillFunc
    # Why a quick run (`make drills-quick`, CI) leaves it out unless named with --only;
    # empty: every run has it. `make drills` (--full) always runs it.
    full_only: str = ""
    # Why it runs only when named with --only (a soak with its own make target); empty: it
    # is part of the runs above.
    alone: str = ""


REGISTRY: dict[str, Drill] = {}


def drill(
    *, name: str, group: str, title: str, gate: str, full_only: str = "", alone: str = ""
) -> Callable[[DrillFunc], DrillFunc]:
    def register(func: DrillFunc) -> DrillFunc:
        if name in REGISTRY:
            raise ValueError(f"drill {name!r} registered twice")
        REGISTRY[name] = Drill(name, group, title, gate, func, full_only, alone)
        return func

    return register


@dataclass
class Record:
    """One row of the report (a drill or a quantitative gate)."""

    name: str
    kind: str  # "drill" or "gate"
    title: str
    figure: str
    gate: str
    passed: bool | None  # None: not applicable in this run (its drills did not run)
    expected: str = ""
    actual: str = ""
    evidence: list[str] = field(default_factory=list)
    seconds: float = 0.0
    checks: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def wire(self) -> dict[str, Any]:
        return asdict(self)


def run_drill(entry: Drill, folder: Path, *, full: bool) -> Record:
    """Run one drill in `folder`; whatever happens, return its record."""
    ctx = Context(entry.name, folder, full=full)
    started = time.perf_counter()
    figure = ""
    error: str | None = None
    evidence: list[str] = []
    try:
        figure = entry.func(ctx)
    except DrillError as err:
        error = str(err)
        evidence.extend(err.evidence)
    except Exception as err:  # a broken drill is a failed drill, with its traceback kept
        error = f"{type(err).__name__}: {err}"
        trace = folder / "error.txt"
        trace.write_text(traceback.format_exc())
        evidence.append(str(trace))
    finally:
        try:
            ctx.cleanup()
        except Exception as err:  # the snapshot is evidence, not the verdict
            ctx.notes.append(f"cleanup failed: {type(err).__name__}: {err}")
    seconds = time.perf_counter() - started
    failed = [c for c in ctx.checks if not c.ok]
    passed = error is None and not failed and bool(ctx.checks)
    if error is not None:
        expected = "the drill runs to its end"
        actual = error
    elif failed:
        expected = "; ".join(f"{c.label}: {c.expected}" for c in failed)
        actual = "; ".join(f"{c.label}: {c.actual}" for c in failed)
    elif not ctx.checks:
        expected, actual = "at least one check", "the drill checked nothing"
    else:
        expected = f"all {len(ctx.checks)} checks hold"
        actual = f"all {len(ctx.checks)} checks held"
    for check in failed:
        evidence.extend(check.evidence)
    for world in ctx.worlds:
        evidence.extend(world.evidence() if not passed else [str(world.root)])
    return Record(
        name=entry.name,
        kind="drill",
        title=f"{entry.group} · {entry.title}",
        figure=figure or ("(did not finish)" if error else ""),
        gate=entry.gate,
        passed=passed,
        expected=expected,
        actual=actual,
        evidence=list(dict.fromkeys(evidence)),
        seconds=round(seconds, 2),
        checks=[asdict(c) for c in ctx.checks],
        notes=ctx.notes,
    )
