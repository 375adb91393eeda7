"""Evaluation in worker processes decides exactly what evaluation in the daemon decides.

Real worker processes (`python -m integrator.landing.worker`) on real repositories: the
same mixed batch (landings, fenced paths, a stale generation, a repeated submission) is
integrated on two identical copies, in the engine's own process and through a pool, and
the verdicts and the trees landed must agree. A worker killed with SIGKILL loses nothing:
its chunks are evaluated in the daemon's process.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from integrator.documents.verdict import Code, Decision, Verdict
from integrator.landing import workers
from integrator.landing.engine import Integrator
from integrator.landing.workers import EvaluationPool
from integrator.records.canonical import Canonical
from integrator.records.claims import Claims
from tests.canon import Canon, make_canon
from tests.daemon_world import World
from tests.gitutil import git

TASKS = 12


def _batch(canon: Canon) -> list[tuple[bytes, str]]:
    """Nine landings, two candidates writing outside their claim, one stale generation,
    and the first landing submitted again."""
    base = canon.ref("refs/integrator/queue/main")
    items: list[tuple[bytes, str]] = []
    for i in range(TASKS):
        contract = canon.issue(f"t{i}", [f"t{i}/**"])
        outside = {"docs/index.md": f"edited by t{i}\n"} if i in (4, 9) else {}
        cand = canon.commit({f"t{i}/f.txt": f"t{i} new\n", **outside}, parent=base)
        items.append((contract.to_json().encode(), cand))
    with canon.open() as canonical:
        Claims(canonical).reclaim("t11", force=True)  # the attempt in `items` is now stale
    return [*items, items[0]]


def _files() -> dict[str, str | None]:
    return {**{f"t{i}/f.txt": f"t{i}\n" for i in range(TASKS)}, "docs/index.md": "# docs\n"}


def _outcome(verdicts: list[Verdict]) -> list[tuple[Decision, list[Code], bool]]:
    return [(v.decision, [x.code for x in v.violations], bool(v.recovered)) for v in verdicts]


def _integrate(
    path: Path, canon: Canon, pool: EvaluationPool | None, items: list[tuple[bytes, str]]
) -> list[Verdict]:
    with Canonical(path, clock=canon.clock) as canonical:
        return Integrator(canonical, pool=pool).integrate_many(items)


def _pair(tmp_path: Path) -> tuple[Canon, Path, list[tuple[bytes, str]]]:
    canon = make_canon(tmp_path, _files())
    items = _batch(canon)
    copy = tmp_path / "copy"
    shutil.copytree(canon.path, copy, symlinks=True)
    return canon, copy, items


def test_pool_decides_as_the_daemon_process_does(tmp_path: Path) -> None:
    canon, copy, items = _pair(tmp_path)
    alone = _integrate(canon.path, canon, None, items)
    pool = EvaluationPool(copy, 1, min_batch=2)
    try:
        assert pool.start(wait=60) == 1
        pooled = _integrate(copy, canon, pool, items)
    finally:
        pool.close()
    assert pool.remote_chunks > 0  # a worker really evaluated some of them
    assert _outcome(pooled) == _outcome(alone)
    decisions = [v.decision for v in alone]
    assert decisions.count(Decision.ACCEPTED) == 10  # nine landings and the repeat
    assert [x.code for x in alone[11].violations] == [Code.STALE_GENERATION]
    assert [x.code for x in alone[4].violations] == [Code.PATH_NOT_OWNED]
    assert alone[-1].recovered is True
    assert [v.tree for v in pooled] == [v.tree for v in alone]
    queue = "refs/integrator/queue/main^{tree}"
    assert git("rev-parse", queue, cwd=copy) == git("rev-parse", queue, cwd=canon.path)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSTOP], ids=["killed", "stopped"])
def test_lost_worker_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sig: signal.Signals
) -> None:
    """A worker killed (SIGKILL), or one that stops answering (SIGSTOP: it holds the batch
    only SILENCE_LIMIT, then is killed), loses nothing: what it held is evaluated in the
    daemon's process, and the verdicts and trees are the in-process ones."""
    monkeypatch.setattr(workers, "SILENCE_LIMIT", 2.0)
    canon, copy, items = _pair(tmp_path)
    alone = _integrate(canon.path, canon, None, items)
    pool = EvaluationPool(copy, 1, min_batch=2)
    try:
        assert pool.start(wait=60) == 1
        victim = pool.workers[0].proc
        os.kill(victim.pid, sig)
        pooled = _integrate(copy, canon, pool, items)
        assert victim.poll() is not None  # dead, not left stopped
    finally:
        pool.close()
    assert _outcome(pooled) == _outcome(alone)
    assert [v.tree for v in pooled] == [v.tree for v in alone]
    assert pool.remote_chunks == 0 and pool.local_chunks > 0


def test_small_batches_never_start_a_worker(tmp_path: Path) -> None:
    canon, copy, items = _pair(tmp_path)
    pool = EvaluationPool(copy, 2)  # the default threshold: 8 candidates
    try:
        verdicts = _integrate(copy, canon, pool, items[:3])
    finally:
        pool.close()
    assert [v.decision for v in verdicts] == [Decision.ACCEPTED] * 3
    assert pool.spawned == 0


def _worker_processes(repo: Path) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"integrator.landing.worker" in argv and str(repo).encode() in argv:
            pids.append(int(entry.name))
    return pids


def test_serve_with_workers_decides_and_leaves_no_process(world: World) -> None:
    sids = [world.submit(f"w{i}") for i in range(10)]
    served = world.once("--evaluation-workers", "1")
    assert served.proc.returncode == 0
    assert sorted(p.name for p in world.spool.folder("accepted").iterdir()) == sorted(sids)
    closed = served.events("workers.closed")
    assert len(closed) == 1 and closed[0]["spawned"] == 1
    assert closed[0]["by_workers"] + closed[0]["in_daemon"] == 3  # 10 candidates, chunks of 4
    assert _worker_processes(world.repo) == []


@pytest.mark.parametrize(
    ("args", "config"),
    [
        (["--evaluation-workers", "-2"], None),
        (["--evaluation-workers", "65"], None),
        ([], "[serve]\nevaluation-workers = 100\n"),
        ([], '[serve]\nevaluation-workers = "auto"\n'),
    ],
)
def test_bad_worker_counts_are_refused(world: World, args: list[str], config: str | None) -> None:
    extra = ["--config", str(world.config(config))] if config else []
    command = [sys.executable, "-m", "integrator", "serve", "--repo", str(world.repo)]
    proc = subprocess.run(
        [*command, "--spool", str(world.spool.root), "--once", *args, *extra],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "evaluation-workers" in proc.stderr
    assert "Traceback" not in proc.stderr


def _big_batch(canon: Canon, count: int) -> list[tuple[bytes, str]]:
    """Candidates whose contracts are ~60 kB each (an unknown field: CONTRACT_INVALID),
    so a chunk's request and its reply are each far larger than a pipe holds."""
    contract = canon.issue("big", ["big/**"])
    cand = canon.commit({"big/f.txt": "x\n"})
    doc = contract.wire()
    items = []
    for i in range(count):
        doc["padding"] = f"{i}-" + "p" * 60_000
        items.append((json.dumps(doc).encode(), cand))
    return items


def test_requests_and_replies_larger_than_a_pipe_do_not_deadlock(tmp_path: Path) -> None:
    canon = make_canon(tmp_path, _files())
    items = _big_batch(canon, 12)
    pool = EvaluationPool(canon.path, 1, min_batch=2)
    signal.alarm(120)  # a deadlock fails the test instead of hanging the run
    try:
        assert pool.start(wait=60) == 1
        verdicts = _integrate(canon.path, canon, pool, items)
    finally:
        signal.alarm(0)
        pool.close()
    assert [x.code for v in verdicts for x in v.violations] == [Code.CONTRACT_INVALID] * 12
    assert pool.remote_chunks > 0


def test_worker_that_never_becomes_ready_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker stopped before it said it was ready holds no chunk, but it would hold its
    slot for ever: after SILENCE_LIMIT it is killed (not counted as a death that turns the
    pool off) and the next large batch starts another."""
    monkeypatch.setattr(workers, "SILENCE_LIMIT", 1.0)
    canon, copy, items = _pair(tmp_path)
    pool = EvaluationPool(copy, 1, min_batch=2)
    try:
        pool.start()
        victim = pool.workers[0].proc
        os.kill(victim.pid, signal.SIGSTOP)
        time.sleep(1.5)
        verdicts = _integrate(copy, canon, pool, items)
        assert victim.poll() is not None
        assert pool.silenced == 1
        assert pool.start(wait=60) == 1 and pool.workers[0].proc.pid != victim.pid
    finally:
        pool.close()
    assert [v.decision for v in verdicts].count(Decision.ACCEPTED) == 10
