"""Queue controls with real processes: a pause recorded in git keeps every submission
waiting (nothing decided, nothing lost) until resume, for the local daemon and for a daemon
on another mirror of a remote; `integrate` refuses to land while paused; an urgent
submission lands before the rest of its drain."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from tests.daemon_world import World, hand_over, wait_until
from tests.gitutil import git
from tests.gitutil import run_integrator_raw as cli
from tests.remote_world import RemoteWorld


def _queue(world: World, *args: str) -> dict[str, object]:
    done = cli("queue", *args, "--repo", str(world.repo), "--json")
    assert done.returncode == 0, done.stderr.decode()
    document: dict[str, object] = json.loads(done.stdout)
    return document


def test_a_pause_keeps_submissions_waiting_until_resume(world: World) -> None:
    """Paused: `serve --once` decides nothing and leaves the submissions in new/, and
    `integrate` exits 4 naming the reason; after resume both land; the control's history
    is the ref's log."""
    sids = [world.submit(f"p{i}") for i in range(3)]
    paused = _queue(world, "pause", "--reason", "release freeze", "--actor", "rm@example")
    assert paused["paused"] is True and paused["reason"] == "release freeze"
    served = world.once()
    assert served.proc.returncode == 0, served.log.read_text()
    assert sorted(world.spool.entries("new")) == sorted(sids)
    assert world.landed() == []
    assert served.events("queue.paused")[0]["reason"] == "release freeze"
    data, oid = world.candidate("solo")
    contract = world.tmp / "solo.json"
    hand_over(world.repo, data, contract)
    refused = cli("integrate", "--repo", str(world.repo), "--contract", str(contract),
                  "--candidate", oid)  # fmt: skip
    assert refused.returncode == 4
    assert "paused" in refused.stderr.decode() and "release freeze" in refused.stderr.decode()
    status = _queue(world, "status")
    assert status["paused"] is True
    shown = cli("queue", "status", "--repo", str(world.repo)).stdout.decode()
    assert "PAUSED by rm@example since " in shown and "release freeze" in shown, shown

    _queue(world, "resume", "--reason", "freeze over")
    again = _queue(world, "resume", "--reason", "twice")  # nothing paused: nothing recorded
    assert again == {"target": "main", "paused": False, "changed": False}
    served = world.once()
    assert served.proc.returncode == 0
    assert sorted(world.spool.entries("accepted")) == sorted(sids)
    assert len(world.landed()) == 3
    log = git("log", "--format=%s", "refs/integrator/queue-control/main", cwd=world.repo)
    assert log.splitlines() == ["resume main: freeze over", "pause main: release freeze"]


def test_an_urgent_submission_lands_before_the_rest_of_its_drain(world: World) -> None:
    """Three submissions, then one sent with `submit --urgent`: in the one drain that takes
    them all, the urgent one is the first landing on the queue."""
    for i in range(3):
        world.submit(f"n{i}")
    data, oid = world.candidate("hot")
    contract = world.tmp / "hot.json"
    hand_over(world.repo, data, contract)
    sent = cli("submit", "--spool", str(world.spool.root), "--contract", str(contract),
               "--candidate", oid, "--repo", str(world.repo), "--urgent")  # fmt: skip
    assert sent.returncode == 0, sent.stderr.decode()
    sid = sent.stdout.decode().strip()
    assert (world.spool.folder("new") / sid / "urgent").exists()
    served = world.once()
    assert served.proc.returncode == 0, served.log.read_text()
    landed = world.landed()
    assert landed[0] == oid and len(landed) == 4


def test_a_pause_is_read_by_a_daemon_on_another_mirror(remote: RemoteWorld, tmp_path: Path) -> None:
    """Remote mode: a pause pushed through one mirror stops a daemon serving another; after
    resume it decides the submission (the intake gets its verdict)."""
    coordinator = remote.mirror("coordinator")
    contract = tmp_path / "c.json"
    remote.issue(coordinator, "t1", ["t1/**"], contract)
    agent = remote.agent("a1")
    (agent / "t1/f.txt").write_text("mine\n")
    git("commit", "-qam", "t1", cwd=agent)
    sent = cli("submit", "--intake", remote.intake, "--contract", str(contract),
               "--candidate", "HEAD", "--repo", str(agent))  # fmt: skip
    assert sent.returncode == 0, sent.stderr.decode()
    sid = sent.stdout.decode().strip()
    done = cli("queue", "pause", "--repo", str(coordinator), "--reason", "incident")
    assert done.returncode == 0, done.stderr.decode()
    daemon = remote.serve(remote.mirror("host"), tmp_path / "spool", name="paused")
    log = tmp_path / f"paused-{len(remote.procs) - 1}.log"
    wait_until(lambda: "queue.paused" in log.read_text(), 60, "the daemon to see the pause")
    assert remote.landed() == []
    assert cli("status", "--intake", remote.intake, "--submission", sid, "--task", "t1",
               "--repo", str(agent)).returncode == 4  # fmt: skip
    done = cli("queue", "resume", "--repo", str(coordinator))
    assert done.returncode == 0, done.stderr.decode()
    verdict = cli("status", "--intake", remote.intake, "--submission", sid, "--repo", str(agent),
                  "--task", "t1", "--wait", "60")  # fmt: skip
    assert verdict.returncode == 0, verdict.stderr.decode()
    assert len(remote.landed()) == 1
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(30) == 0
