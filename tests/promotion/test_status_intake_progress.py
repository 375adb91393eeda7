"""`status --intake --until promoted --wait` says on stderr what it waits for — the
verdict, then the landing's promotion — and stdout holds only the answer; against a real
`git daemon` on 127.0.0.1, with validation on (the target waits for a promoter)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.gitutil import commit_files, git
from tests.gitutil import run_integrator_raw as cli
from tests.promotion_world import CHECK_SCRIPT
from tests.remote_world import RemoteWorld


def test_an_intake_wait_for_the_promotion_says_where_the_landing_is(
    remote: RemoteWorld, tmp_path: Path
) -> None:
    """Landed on the queue, not promoted: a 2.5 s wait answers 4 with nothing on stdout and
    plain progress lines naming the landing on the queue; after `promote --once` the same
    status prints one JSON document (promoted) and exits 0."""
    world = remote
    (tmp_path / "policy.toml").write_text(
        'version = 1\n[validation]\ncommand = ["sh", "ci/check.sh", '
        f'"{tmp_path / "runs.log"}", "{tmp_path / "lenient"}"]\n'
    )
    seed = tmp_path / "seed"
    commit_files(seed, {"ci/check.sh": CHECK_SCRIPT}, "the check")
    git("push", "-q", str(world.canon), "HEAD:refs/heads/main", cwd=seed)
    coordinator = world.mirror("coordinator")
    done = cli("policy", "set", str(tmp_path / "policy.toml"), "--repo", str(coordinator))
    assert done.returncode == 0, done.stderr.decode()
    contract = tmp_path / "t0.json"
    world.issue(coordinator, "t0", ["t0/**"], contract)
    agent = world.agent("t0")
    (agent / "t0" / "f.txt").write_text("t0 changed\n")
    git("commit", "-qam", "t0", cwd=agent)
    done = cli("submit", "--intake", world.intake, "--contract", str(contract),
               "--candidate", "HEAD", "--repo", str(agent))  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    sid = done.stdout.decode().split()[-1]
    lander = world.mirror("lander")
    assert world.serve(lander, tmp_path / "spool", "--once", "--no-promote").wait(120) == 0

    status = ("status", "--intake", world.intake, "--task", "t0", "--submission", sid,
              "--repo", str(agent), "--until", "promoted", "--json")  # fmt: skip
    waited = cli(*status, "--wait", "2.5")
    err = waited.stderr.decode()
    assert waited.returncode == 4, err
    assert waited.stdout == b""
    progress = [line for line in err.splitlines() if line.startswith(f"integrator: {sid}: ")]
    assert progress, err
    assert all("\r" not in line and "\x1b" not in line for line in progress)
    assert "ACCEPTED, waiting for its promotion (landing: queued as " in progress[-1]
    assert f"{sid} is ACCEPTED and on the queue, but not promoted within " in err

    assert cli("promote", "--repo", str(lander), "--once").returncode == 0
    answered = cli(*status, "--wait", "60")
    assert answered.returncode == 0, answered.stderr.decode()
    doc = json.loads(answered.stdout)  # one document, nothing else on stdout
    assert doc["submission"] == sid and doc["landing"]["state"] == "promoted"
