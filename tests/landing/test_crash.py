"""SIGKILL of the integrate process at each step, then a rerun: no double landing, nothing lost."""

from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.canon import Canon, make_canon
from tests.gitutil import git


def _integrate(
    canon: Canon, contract: Path, candidate: str, fault: str | None = None
) -> subprocess.CompletedProcess[bytes]:
    env = dict(os.environ)
    env.pop("INTEGRATOR_FAULT", None)
    if fault:
        env["INTEGRATOR_FAULT"] = fault
    cmd = [sys.executable, "-m", "integrator", "integrate", "--repo", str(canon.path)]
    cmd += ["--contract", str(contract), "--candidate", candidate, "--json"]
    return subprocess.run(cmd, capture_output=True, env=env, timeout=120, check=False)


def _setup(tmp_path: Path) -> tuple[Canon, Path, str]:
    canon = make_canon(tmp_path)
    canon.clock.now = canon.clock.now.replace(year=2030)
    contract = canon.issue("billing", ["billing/**"], lease=datetime.timedelta(days=3650))
    path = tmp_path / "contract.json"
    path.write_text(contract.to_json())
    cand = canon.commit({"billing/invoice.py": "invoice = 2\n"})
    return canon, path, cand


def _chain(canon: Canon) -> list[str]:
    return git("rev-list", "--first-parent", "refs/integrator/queue/main", cwd=canon.path).split()


@pytest.mark.parametrize("point", ["after-check", "before-transaction", "after-commit"])
def test_kill_then_rerun_lands_exactly_once(tmp_path: Path, point: str) -> None:
    """Killed at `point`, a rerun lands the candidate once (or reports the earlier landing)."""
    canon, contract, cand = _setup(tmp_path)
    killed = _integrate(canon, contract, cand, f"kill:{point}")
    assert killed.returncode == -signal.SIGKILL
    landed_before = len(_chain(canon)) == 2
    assert landed_before == (point == "after-commit")
    rerun = _integrate(canon, contract, cand)
    assert rerun.returncode == 0, rerun.stderr.decode()
    verdict = json.loads(rerun.stdout)
    assert verdict["decision"] == "ACCEPTED"
    assert bool(verdict.get("recovered")) == (point == "after-commit")
    chain = _chain(canon)
    assert len(chain) == 2  # one staging commit, never two
    assert chain[0] == verdict["stagingCommit"]
    assert git("show", "main:billing/invoice.py", cwd=canon.path) == "invoice = 2"
    claim_log = git("log", "--format=%s", "refs/integrator/claims/billing", cwd=canon.path)
    assert claim_log.splitlines()[0].startswith("consume: billing")


def test_kill_after_prepare_reports_leftover_lock(tmp_path: Path) -> None:
    """Killed with refs locked: the rerun names the .lock and moves nothing until it is cleared."""
    canon, contract, cand = _setup(tmp_path)
    killed = _integrate(canon, contract, cand, "kill:after-prepare")
    assert killed.returncode == -signal.SIGKILL
    locks = sorted((canon.path / ".git").rglob("*.lock"))
    assert locks, "a prepared transaction leaves its lock files"
    queue_before = _chain(canon)
    blocked = _integrate(canon, contract, cand)
    assert blocked.returncode == 4
    message = blocked.stderr.decode()
    assert ".lock" in message
    assert "is locked" in message
    assert _chain(canon) == queue_before
    assert all(lock.exists() for lock in locks), "locks are reported, never deleted"
    # The operator confirms no integrator runs, removes the locks, and retries.
    for lock in locks:
        lock.unlink()
    rerun = _integrate(canon, contract, cand)
    assert rerun.returncode == 0, rerun.stderr.decode()
    assert len(_chain(canon)) == 2
