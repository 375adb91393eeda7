"""A validation run leaves no process behind.

The command's process group was killed only at the timeout, so a command that exited 0
and left a background child (code the agents wrote) kept it running after its result was
recorded, able to touch later runs' checkouts. The group is now killed when the run ends."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from integrator.promotion.runner import RunRequest, run
from tests.gitutil import commit_files, git, make_repo


def test_a_run_leaves_no_process_behind(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "canon")
    commit_files(repo, {"ok.txt": "x\n"}, "base", ref="refs/heads/main")
    head = git("rev-parse", "main", cwd=repo)
    tree = git("rev-parse", "main^{tree}", cwd=repo)
    pidfile = tmp_path / "child.pid"
    request = RunRequest(target="main", head=head, tree=tree, base=head, landings=(), attempt=1)
    command = f"sleep 300 >/dev/null 2>&1 & echo $! > {pidfile}; exit 0"
    outcome = run(repo / ".git", command, 60, request, scratch=tmp_path)
    assert outcome.passed
    pid = int(pidfile.read_text())
    for _ in range(1000):  # SIGKILL takes effect asynchronously: wait (bounded) for it
        if not _running(pid):
            break
        time.sleep(0.01)
    alive = _running(pid)
    if alive:
        os.kill(pid, signal.SIGKILL)  # not left behind by the test either
    assert not alive, f"the command's background child {pid} outlived the run"


def _running(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting for its reaper does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
