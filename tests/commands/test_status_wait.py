"""`status --wait` says on stderr what it waits for while it waits (no terminal here: plain
lines, no cursor movement), and stdout holds only the answer. Real processes throughout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.daemon_world import wait_until
from tests.gitutil import GIT_ENV, git, run_integrator


def _submit(served: dict[str, Path], task: str) -> str:
    """Issue a claim for `task`, commit a candidate in it and submit it (no daemon runs)."""
    agent = served["agent"]
    contract = served["root"] / f"{task}.json"
    base = git("rev-parse", "HEAD", cwd=served["canon"]).strip()
    done = run_integrator(
        "contract", "issue", "--repo", str(served["canon"]), "--task", task, "--path",
        f"{task}/**", "--holder", "carol", "--base", base, "-o", str(contract),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    git("fetch", "-q", "origin", cwd=agent)
    git("reset", "-q", "--hard", "origin/main", cwd=agent)
    (agent / task).mkdir()
    (agent / task / "f").write_text(task)
    git("add", task, cwd=agent)
    git("commit", "-q", "-m", task, cwd=agent)
    done = run_integrator(
        "submit", "--spool", str(served["spool"]), "--contract", str(contract),
        "--candidate", "HEAD", "--repo", str(agent), "--bundle",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _plain(stderr: str, sid: str) -> list[str]:
    """The progress lines of `sid` in `stderr`, none of them drawn over (no \\r, no ESC)."""
    lines = [line for line in stderr.splitlines() if line.startswith(f"integrator: {sid}: ")]
    assert all("\r" not in line and "\x1b" not in line for line in lines), stderr
    return lines


def test_status_wait_on_a_spool_says_where_it_waits_and_prints_only_the_verdict(
    served: dict[str, Path],
) -> None:
    """`status --wait 60 --json` on a submission no daemon took yet says on stderr that it
    is next in new/; once `serve --once` files it, stdout is the verdict's one JSON
    document and nothing else."""
    sid = _submit(served, "sw")
    err = served["root"] / "status.err"
    with err.open("wb") as err_file:
        status = subprocess.Popen(
            [sys.executable, "-m", "integrator", "status", "--spool", str(served["spool"]),
             "--submission", sid, "--wait", "60", "--json"],
            stdout=subprocess.PIPE, stderr=err_file, env={**os.environ, **GIT_ENV},
        )  # fmt: skip
        try:
            wait_until(lambda: f"integrator: {sid}: next in new/" in err.read_text(), 30)
            serve = run_integrator(
                "serve", "--repo", str(served["canon"]), "--spool", str(served["spool"]),
                "--once",
            )  # fmt: skip
            assert serve.returncode == 0, serve.stderr
            out, _ = status.communicate(timeout=60)
        finally:
            if status.poll() is None:
                status.kill()
                status.wait()
    assert status.returncode == 0, err.read_text()
    doc = json.loads(out)  # one document: a second one (or a progress line) fails here
    assert doc["submission"] == sid and doc["verdict"]["decision"] == "ACCEPTED"
    lines = _plain(err.read_text(), sid)
    assert lines and lines[0].startswith(f"integrator: {sid}: next in new/ (")
    assert lines[0].endswith(" of 60 s)")


def test_status_wait_on_an_intake_says_what_it_waits_for(served: dict[str, Path]) -> None:
    """`status --intake --wait 2.5` with no verdict published: progress lines on stderr
    naming the intake, nothing on stdout, exit 4 when the wait is over."""
    sid = "20260601T120000000000Z-0a1b2c3d"
    url = str(served["canon"])
    done = run_integrator(
        "status", "--intake", url, "--task", "t1", "--submission", sid, "--wait", "2.5",
        cwd=served["agent"],
    )  # fmt: skip
    assert done.returncode == 4, done.stderr
    assert done.stdout == ""
    lines = _plain(done.stderr, sid)
    assert lines and lines[0].startswith(f"integrator: {sid}: waiting for its verdict on {url}")
    assert "look" in lines[-1]  # each poll of the intake is counted on the line
    assert len(lines) <= 2  # a new count alone is no new plain line (one at 10 s at most)
    assert "no verdict for" in done.stderr


def test_a_short_status_wait_says_nothing_of_progress(served: dict[str, Path]) -> None:
    """A wait under a second is answered without a progress line (exit 4, stdout empty)."""
    sid = _submit(served, "sq")
    done = run_integrator(
        "status", "--spool", str(served["spool"]), "--submission", sid, "--wait", "0.5",
    )  # fmt: skip
    assert done.returncode == 4
    assert done.stdout == ""
    assert _plain(done.stderr, sid) == []
    assert f"no verdict for {sid} within 0.5 s" in done.stderr
