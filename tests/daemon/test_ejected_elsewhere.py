"""A host that decides a submission after validation ejected its landing (it took the
submission late: killed and restarted, or pushed again) answers FENCED VALIDATION_FAILED,
recovered; every channel of that host must call it what the others do — `ejected` — and
its registry must say where the landing is (found by the system soak: its history said
FENCED while every other host said ejected)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.daemon.test_remote import _candidate
from tests.git_server import git_daemon
from tests.gitutil import git
from tests.gitutil import run_integrator_raw as cli
from tests.promotion_world import CHECK_SCRIPT, MARKER
from tests.remote_world import RemoteWorld


def test_a_late_decision_of_an_ejected_landing_reads_ejected(tmp_path: Path) -> None:
    files = {"t0/f.txt": "0\n", "ci/check.sh": CHECK_SCRIPT}
    with git_daemon(tmp_path / "srv") as server:
        world = RemoteWorld(tmp_path, server, files)
        try:
            policy = tmp_path / "policy.toml"
            policy.write_text(
                "version = 1\n[validation]\n"
                f'command = ["sh", "ci/check.sh", "{tmp_path / "runs.log"}"]\n'
            )
            coordinator = world.mirror("coordinator")
            assert cli("policy", "set", str(policy), "--repo", str(coordinator)).returncode == 0
            contract = tmp_path / "c0.json"
            world.issue(coordinator, "t0", ["t0/**"], contract)
            agent = _candidate(world, 0, {"t0/f.txt": "agent\n", f"t0/{MARKER}": "broken\n"})
            done = cli("submit", "--intake", world.intake, "--contract", str(contract),
                       "--candidate", "HEAD", "--repo", str(agent))  # fmt: skip
            assert done.returncode == 0, done.stderr.decode()
            sid = done.stdout.decode().split()[-1]
            ref = f"refs/integrator/submit/t0/{sid}"
            pushed = git("ls-remote", world.intake, ref, cwd=agent).split()[0]
            a, b = world.mirror("host-a"), world.mirror("host-b")
            assert world.serve(a, tmp_path / "spool-a", "--once", "--no-promote").wait(120) == 0
            assert cli("promote", "--repo", str(world.mirror("promoter")), "--once").returncode == 0
            git("push", "-q", world.intake, f"{pushed}:{ref}", cwd=agent)  # B takes it late
            spool_b = tmp_path / "spool-b"
            assert world.serve(b, spool_b, "--once", "--no-promote").wait(120) == 0
            verdict = json.loads((spool_b / "fenced" / sid / "verdict.json").read_text())
            assert verdict["recovered"] is True, verdict
            assert [v["code"] for v in verdict["violations"]] == ["VALIDATION_FAILED"]

            status = cli("status", "--spool", str(spool_b), "--submission", sid, "--json")
            assert status.returncode == 1
            assert json.loads(status.stdout)["landing"]["state"] == "ejected"
            rows = json.loads(cli("history", "--spool", str(spool_b), "--json").stdout)
            mine = [r for r in rows if r["submission"] == sid and r["kind"] == "decision"]
            assert [r["landing"]["state"] for r in mine] == ["ejected"], mine
        finally:
            world.stop()
