"""Landing over a remote: the same fleet drained through a git daemon on 127.0.0.1.

The canonical repository is a bare copy served by `git daemon --enable=receive-pack`; the
integrator's mirror is another copy (so it holds the candidates' objects, as an intake
fetch would have brought them), configured for remote mode. Every landing then is one
atomic push with leases. Compared with the same drain in local mode, in the same run.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from dataclasses import dataclass, field
from pathlib import Path

from bench import correctness
from bench.daemon_run import DaemonRun, run_daemon
from bench.phases import fresh, prepare_fleet, queue_head
from bench.workload import Workload
from integrator.demo.remote import start_git_daemon
from integrator.plumbing import git


@dataclass
class RemoteResult:
    """A drain over the loopback remote: the run, the pushes it made, and the server's
    queue checked against git merge-tree."""

    run: DaemonRun
    pushes: int
    landed: int
    check: correctness.Verdict
    # Connections to the server between `daemon.ready` and `daemon.drained` (the daemon's
    # own counts), and the batches they served (each batch fetches one view).
    traffic: dict[str, int] = field(default_factory=dict)

    @property
    def pushes_per_landing(self) -> float:
        return self.pushes / self.landed if self.landed else 0.0

    @property
    def batches(self) -> int:
        return self.traffic.get("batch_views", 0)

    def per_batch(self, kind: str) -> float:
        """Connections of `kind` (fetches, pushes, remote_reads) per batch."""
        return self.traffic.get(kind, 0) / self.batches if self.batches else float("nan")

    @property
    def round_trips_per_batch(self) -> float:
        return sum(self.per_batch(k) for k in TRAFFIC)


TRAFFIC = ("fetches", "pushes", "remote_reads")


def drain_traffic(log: Path) -> dict[str, int]:
    """What the daemon counted from ready to drained (start-up's fetch left out)."""
    ready: dict[str, int] = {}
    drained: dict[str, int] = {}
    for line in log.read_text().splitlines():
        if '"daemon.ready"' in line:
            ready = json.loads(line)
        elif '"daemon.drained"' in line:
            drained = json.loads(line)
    keys = (*TRAFFIC, "batch_views")
    return {k: int(drained.get(k, 0)) - int(ready.get(k, 0)) for k in keys}


def remote_fleet(prepared: Path, spool: Path, work: Path, base: str) -> RemoteResult:
    """Drain `spool` (prepared for the repository at `prepared`) with the canonical
    repository behind a git daemon on 127.0.0.1."""
    served = work / "srv"
    served.mkdir(parents=True)
    server = served / "canon.git"
    shutil.copytree(prepared, server, symlinks=True)
    mirror = work / "mirror.git"
    shutil.copytree(prepared, mirror, symlinks=True)
    proc, port = start_git_daemon(served)
    try:
        git.run_git(
            ["config", "integrator.remote", f"git://127.0.0.1:{port}/canon.git"], cwd=mirror
        )
        run = run_daemon(mirror, spool, work / "serve-remote.jsonl")
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    drained = [
        json.loads(line)
        for line in Path(run.log).read_text().splitlines()
        if '"daemon.drained"' in line
    ]
    pushes = int(drained[-1].get("pushes", 0)) if drained else 0
    # What counts is what the server holds: its queue, landing by landing.
    landings = correctness.queue_landings(server, queue_head(server), base)
    check = correctness.check_landings(server, landings)
    traffic = drain_traffic(Path(run.log))
    return RemoteResult(run, pushes, run.decisions.get("ACCEPTED", 0), check, traffic)


def remote_phase(workload: Workload, name: str, out: Path, count: int | None) -> RemoteResult:
    work = fresh(out / f"remote-{name}")
    repo, spool = prepare_fleet(workload, name, work / "local", count)
    return remote_fleet(repo, spool.root, work, workload.base)
