"""Evaluation in worker processes: the batched fleet drained with 0 and 1 evaluation workers.

Each setting drains an identical copy with `serve --once --evaluation-workers N`, rounds
interleaved so the machine's drift weighs on both alike, on every core the machine gives
and again pinned to one core (`taskset -c 0`): what the pool buys, and what it costs where
there is no second core. A worker starts on the first batch of 8 or more, so the first
batch also pays its start-up (imports, a cold tree cache); the rate over the batches after
the first is what a long-running daemon sees. CPU time is the daemon's and its children's
(`wait4`), the worker included.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from bench import correctness
from bench.daemon_run import run_daemon
from bench.phases import fresh, prepare_fleet, queue_head
from bench.workload import Workload

FIRST_BATCH = 64  # the daemon's default batch size


@dataclass
class WorkersRun:
    cores: str  # "all" or "1"
    workers: int
    rates: list[float] = field(default_factory=list)  # candidates/s, whole drain
    steady: list[float] = field(default_factory=list)  # candidates/s after the first batch
    cpu_s: list[float] = field(default_factory=list)
    chunks_by_workers: list[int] = field(default_factory=list)
    trees_ok: bool = True


def _steady(log: Path) -> float:
    """Candidates per second from the end of the first batch to the last decision."""
    stamps = []
    for line in log.read_text("utf-8", "replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("event") == "decision":
            stamps.append(datetime.fromisoformat(str(event["timestamp"])).timestamp())
    if len(stamps) <= FIRST_BATCH + 1:
        return 0.0
    span = stamps[-1] - stamps[FIRST_BATCH - 1]
    return (len(stamps) - FIRST_BATCH) / span if span > 0 else 0.0


def _chunks(log: Path) -> int:
    for line in log.read_text("utf-8", "replace").splitlines():
        if '"workers.closed"' in line:
            return int(json.loads(line).get("by_workers", 0))
    return 0


def workers_phase(workload: Workload, name: str, out: Path, rounds: int) -> list[WorkersRun]:
    settings = [("all", 0), ("all", 1)]
    if shutil.which("taskset"):
        settings += [("1", 0), ("1", 1)]
    runs = {s: WorkersRun(*s) for s in settings}
    for round_ in range(rounds):
        for cores, workers in settings:
            work = fresh(out / f"workers-{cores}-{workers}-{round_}")
            repo, spool = prepare_fleet(workload, name, work)
            config = work / "serve.toml"
            config.write_text(f"[serve]\nevaluation-workers = {workers}\n")
            wrap = ["taskset", "-c", "0"] if cores == "1" else None
            log = work / "serve.jsonl"
            run = run_daemon(repo, spool.root, log, config=config, wrap=wrap)
            result = runs[(cores, workers)]
            result.rates.append(run.per_second)
            result.steady.append(_steady(log))
            result.cpu_s.append(run.cpu_s)
            result.chunks_by_workers.append(_chunks(log))
            landings = correctness.queue_landings(repo, queue_head(repo), workload.base)
            check = correctness.check_landings(repo, landings)
            result.trees_ok = result.trees_ok and check.ok and run.decided == len(landings)
    return list(runs.values())
