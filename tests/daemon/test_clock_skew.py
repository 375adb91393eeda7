"""A host whose clock is behind cannot land an expired lease: it refuses to judge leases
(exit 4, the measured skew) while a host with a right clock fences the candidate. The slow
clock is real: the daemon runs under libfaketime (`faketime -f -2h`)."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from integrator.daemon.clock_check import Reading, server_date, skew_problem
from tests.daemon_world import PYTHON
from tests.gitutil import GIT_ENV, git
from tests.gitutil import run_integrator_raw as cli
from tests.remote_world import RemoteWorld

FAKETIME = shutil.which("faketime")


def test_only_a_reading_in_this_hosts_future_past_the_limit_is_refused() -> None:
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    near = Reading("claims", now + timedelta(seconds=299))
    far = Reading("probe of host-b", now + timedelta(hours=2))
    behind = Reading("queue", now - timedelta(days=3))  # old records say nothing
    assert skew_problem([], now, 300) is None
    assert skew_problem([near, behind], now, 300) is None
    problem = skew_problem([near, far, behind], now, 300)
    assert problem is not None and "7200 s behind probe of host-b" in problem


def test_the_servers_date_header_is_read_from_any_answer() -> None:
    """An http server's Date, even on a 401 (a server that authenticates has one too)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(401)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/canon.git"
        reading = server_date(url)
        assert reading is not None
        assert abs((reading.at - datetime.now(UTC)).total_seconds()) < 60
        assert server_date("git://127.0.0.1:1/canon.git") is None
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.skipif(FAKETIME is None, reason="needs faketime (Debian package faketime)")
def test_a_slow_clock_does_not_land_an_expired_lease(remote: RemoteWorld, tmp_path: Path) -> None:
    right, slow = remote.mirror("right"), remote.mirror("slow")
    contract = tmp_path / "c.json"
    args = ["contract", "issue", "--repo", str(right), "--task", "t1", "--lease", "1s",
            "--path", "t1/**", "-o", str(contract)]  # fmt: skip
    assert cli(*args).returncode == 0
    agent = remote.agent("a")
    (agent / "t1").mkdir(exist_ok=True)
    (agent / "t1" / "x").write_text("late\n")
    git("add", "-A", cwd=agent)
    git("commit", "-qm", "late work", cwd=agent)
    sent = cli("submit", "--intake", remote.intake, "--contract", str(contract),
               "--candidate", "HEAD", "--repo", str(agent))  # fmt: skip
    assert sent.returncode == 0, sent.stderr.decode()
    sid = sent.stdout.decode().split()[-1]
    time.sleep(2)  # the lease is over, on every right clock
    once = ["serve", "--once", "--intake", remote.intake, "--log-format", "json"]
    env = {**os.environ, **GIT_ENV}  # an offset shifts the monotonic clock by a constant too
    behind = subprocess.run(
        [str(FAKETIME), "-f", "-2h", PYTHON, "-m", "integrator", *once,
         "--repo", str(slow), "--spool", str(tmp_path / "spool-slow")],
        capture_output=True, check=False, env=env, timeout=180,
    )  # fmt: skip
    assert behind.returncode == 4, behind.stdout.decode() + behind.stderr.decode()
    out = behind.stdout.decode() + behind.stderr.decode()
    assert "behind" in out and "max-clock-skew" in out
    assert remote.landed() == []
    done = cli(*once, "--repo", str(right), "--spool", str(tmp_path / "spool-right"))
    assert done.returncode == 0, done.stderr.decode()
    verdict = remote.verdict(f"refs/integrator/verdicts/t1/{sid}")
    assert verdict["decision"] == "FENCED"
    assert "LEASE_EXPIRED" in json.dumps(verdict)
    assert remote.landed() == []
