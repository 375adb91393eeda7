"""Where the daemon's time goes: the fleet once more, sampled by py-spy.

py-spy is installed into its own virtual environment under the output folder (never into
the project's). It samples `serve --once` from outside the process, idle frames included,
so time spent waiting for git (the ref transaction, fsync) shows up under the Python
function that waits. Shares are of the samples taken inside `Daemon._batch` (claiming,
integrating and filing submissions); start-up and the final mirror flush are left out.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from bench import phases
from bench.daemon_run import run_daemon
from bench.workload import Workload
from integrator.store.spool import Spool

PY_SPY = "py-spy==0.4.3"
IN_BATCH = "daemon.Daemon._batch"


@dataclass
class Hotspots:
    """Inclusive and self shares of the sampled per-candidate time, by function."""

    samples: int = 0
    candidate_samples: int = 0
    candidates: int = 0
    inclusive: list[tuple[str, float]] = field(default_factory=list)
    self_time: list[tuple[str, float]] = field(default_factory=list)
    note: str = ""


def ensure_py_spy(root: Path) -> Path | None:
    venv = root / "tools-venv"
    exe = venv / "bin" / "py-spy"
    if exe.exists():
        return exe
    for args in (
        [sys.executable, "-m", "venv", str(venv)],
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", PY_SPY],
    ):
        if subprocess.run(args, capture_output=True, check=False).returncode != 0:
            return None
    return exe if exe.exists() else None


def _short(frame: str, *, line: bool = False) -> str:
    """`name (integrator/x.py:12)` → `x.name` (or `x.name:12` with `line`)."""
    name, _, where = frame.partition(" (")
    path, _, number = where.rstrip(")").partition(":")
    module = path.rsplit("/", 1)[-1].removesuffix(".py")
    return f"{module}.{name}:{number}" if line and number else f"{module}.{name}"


def analyse(raw: Path, top: int = 12) -> Hotspots:
    """Shares from py-spy's raw (collapsed-stack) output."""
    inclusive: Counter[str] = Counter()
    leaf: Counter[str] = Counter()
    result = Hotspots()
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not count_text.isdigit():
            continue
        count = int(count_text)
        result.samples += count
        frames = stack.split(";")
        if not any(_short(f) == IN_BATCH for f in frames):
            continue
        result.candidate_samples += count
        for name in {_short(f) for f in frames}:
            inclusive[name] += count
        # The line of the leaf frame names the C call (pygit2, a pipe read) that took the time.
        leaf[_short(frames[-1], line=True)] += count
    total = result.candidate_samples or 1
    skip = {
        "<module>",
        "_run_module_as_main",
        "_run_code",
        "main",
        "run",
        "drain",
        "_run_once",
        "_batch",
    }
    result.inclusive = [
        (name, n / total)
        for name, n in inclusive.most_common()
        if name.rsplit(".", 1)[-1] not in skip
    ][:top]
    result.self_time = [(name, n / total) for name, n in leaf.most_common(top)]
    return result


def profiled(repo: Path, spool: Spool, work: Path, tools: Path, name: str) -> Hotspots:
    """Drain `spool` under `py-spy record --idle` and summarise the samples."""
    exe = ensure_py_spy(tools)
    if exe is None:
        return Hotspots(note=f"py-spy could not be installed ({PY_SPY})")
    raw = tools / f"profile-{name}.txt"
    wrap = [str(exe), "record", "--idle", "-r", "500", "-f", "raw", "-o", str(raw), "--"]
    run = run_daemon(repo, spool.root, work / "serve.jsonl", wrap=wrap)
    result = analyse(raw)
    result.candidates = run.decided
    result.note = f"{name}; raw samples in {raw}"
    return result


def fleet_profile(workload: Workload, name: str, work: Path, tools: Path) -> Hotspots:
    """Candidate set `name`, batched as the daemon runs by default."""
    place = phases.fresh(work / f"profile-{name}")
    repo, spool = phases.prepare_fleet(workload, name, place)
    return profiled(repo, spool, place, tools, name)


def stale_profile(workload: Workload, submissions: int, work: Path, tools: Path) -> Hotspots:
    """The stale flood (fewer submissions: the per-decision split is what matters)."""
    place = phases.fresh(work / "profile-stale")
    repo, spool = phases.prepare_stale(workload, submissions, place)
    return profiled(repo, spool, place, tools, "stale flood")


def render(h: Hotspots) -> str:
    if not h.candidate_samples:
        return f"profile: no per-candidate samples ({h.note})"
    lines = [
        f"profile of {h.note.split(';')[0]} (py-spy, {h.candidate_samples} samples over "
        f"{h.candidates} submissions; shares of the time spent in Daemon._batch)",
        "  inclusive:",
        *(f"    {share:6.1%}  {name}" for name, share in h.inclusive),
        "  self (including C calls made from that function):",
        *(f"    {share:6.1%}  {name}" for name, share in h.self_time),
    ]
    return "\n".join(lines)
