"""A release manager's decision on one host is what every channel tells: the intake (the
deciding host's daemon publishes the new verdict), and every other host that held its own
copy (`status --spool`, `history`, `review list` there file it as decided)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from integrator.store import republish
from tests.daemon.test_remote import _candidate
from tests.gitutil import git
from tests.gitutil import run_integrator_raw as cli
from tests.remote_world import RemoteWorld, remote

__all__ = ["remote"]  # the fixture

SID = "20260601T120000123456Z-0a1b2c3d"


def _held_on(world: RemoteWorld, tmp_path: Path) -> tuple[str, Path, Path, Path, Path, Path]:
    """A stale candidate (its task reclaimed before it was decided), decided and held by
    host A, then pushed again and decided and held by host B: (id, agent, mirrors, spools)."""
    coordinator = world.mirror("coordinator")
    contract = tmp_path / "c0.json"
    world.issue(coordinator, "t0", ["t0/**"], contract)
    done = cli("contract", "reclaim", "--repo", str(coordinator), "--task", "t0", "--force",
               "-o", str(tmp_path / "c0-gen2.json"))  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    agent = _candidate(world, 0, {"t0/f.txt": "agent 0\n"})
    done = cli("submit", "--intake", world.intake, "--contract", str(contract),
               "--candidate", "HEAD", "--repo", str(agent))  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    sid = done.stdout.decode().split()[-1]
    ref = f"refs/integrator/submit/t0/{sid}"
    pushed = git("ls-remote", world.intake, ref, cwd=agent).split()[0]
    (a, spool_a), (b, spool_b) = ((world.mirror(n), tmp_path / f"spool-{n}") for n in "ab")
    assert world.serve(a, spool_a, "--once", "--no-promote").wait(120) == 0
    git("push", "-q", world.intake, f"{pushed}:{ref}", cwd=agent)  # B judges it too
    assert world.serve(b, spool_b, "--once", "--no-promote").wait(120) == 0
    for spool in (spool_a, spool_b):
        assert (spool / "fenced" / sid).is_dir(), sorted(os.listdir(spool))
    return sid, agent, a, spool_a, b, spool_b


def _status(*args: str) -> tuple[int, dict[str, object]]:
    done = cli("status", *args, "--json")
    return done.returncode, json.loads(done.stdout or b"{}")


def test_an_approval_on_one_host_is_told_on_the_intake_and_every_host(
    remote: RemoteWorld, tmp_path: Path
) -> None:
    sid, agent, a, spool_a, _b, spool_b = _held_on(remote, tmp_path)
    intake = ("--intake", remote.intake, "--task", "t0", "--repo", str(agent), "--submission", sid)
    code, doc = _status(*intake)
    assert (code, doc["verdict"]["decision"]) == (1, "FENCED"), doc  # type: ignore[index]

    done = cli("review", "approve", sid, "--spool", str(spool_a), "--repo", str(a),
               "--reason", "the reclaim was ours", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    assert republish.waiting(spool_a) == [sid]  # asked: the daemon publishes it

    assert remote.serve(a, spool_a, "--once", "--no-promote").wait(120) == 0
    assert republish.waiting(spool_a) == []
    code, doc = _status(*intake)
    assert (code, doc["verdict"]["decision"]) == (0, "ACCEPTED"), doc  # type: ignore[index]
    assert doc["landing"]["state"] == "promoted", doc  # type: ignore[index]

    # Host B held its own copy; it reads the server's record and files it as approved.
    code, doc = _status("--spool", str(spool_b), "--submission", sid)
    assert (code, doc["verdict"]["decision"], doc["folder"]) == (0, "ACCEPTED", "accepted"), doc  # type: ignore[index]
    assert doc["verdict"]["recovered"] is True  # type: ignore[index]
    assert doc["landing"]["state"] == "promoted", doc  # type: ignore[index]
    assert (
        json.loads((spool_b / "accepted" / sid / "review.json").read_text())["action"] == "approve"
    )
    rows = json.loads(cli("history", "--spool", str(spool_b), "--json").stdout)
    approvals = [r for r in rows if r["submission"] == sid and r.get("action") == "approve"]
    assert len(approvals) == 1 and approvals[0]["decision"] == "ACCEPTED", rows
    listed = cli("review", "list", "--spool", str(spool_b), "--repo", str(_b), "--json")
    assert sid not in listed.stdout.decode()


def test_a_rejection_on_one_host_is_filed_archived_on_another(
    remote: RemoteWorld, tmp_path: Path
) -> None:
    sid, _agent, a, spool_a, b, spool_b = _held_on(remote, tmp_path)
    done = cli("review", "reject", sid, "--spool", str(spool_a), "--repo", str(a),
               "--reason", "not wanted")  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    assert republish.waiting(spool_a) == []  # the verdict did not change: nothing to publish
    rows = json.loads(cli("history", "--spool", str(spool_b), "--json").stdout)
    assert [r["action"] for r in rows if r["submission"] == sid and r.get("action")] == ["reject"]
    assert (spool_b / "archived" / sid).is_dir()
    done = cli("review", "approve", sid, "--spool", str(spool_b), "--repo", str(b))
    assert done.returncode == 2 and b"already rejected" in done.stderr, done.stderr


def test_requests_survive_a_publication_in_flight(tmp_path: Path) -> None:
    """A request asked while the daemon publishes the one it took is a new request; names
    that are not submission ids are ignored; the list earlier versions kept is adopted."""
    republish.ask(tmp_path, SID)
    republish.ask(tmp_path, SID)  # idempotent
    assert republish.waiting(tmp_path) == [SID]
    republish.take(tmp_path, SID)
    republish.ask(tmp_path, SID)  # the verdict changed again meanwhile
    republish.done(tmp_path, SID)
    assert republish.waiting(tmp_path) == [SID]
    republish.take(tmp_path, SID)
    assert republish.waiting(tmp_path) == [SID]  # taken, not out yet: still waiting
    republish.done(tmp_path, SID)
    assert republish.waiting(tmp_path) == []
    for hostile in ("../x", "a b", ".taken", f"{SID}.x"):
        (tmp_path / republish.FOLDER / hostile.replace("/", "_")).write_bytes(b"")
    assert republish.waiting(tmp_path) == []
    other = "20260601T120000123457Z-0a1b2c3e"
    (tmp_path / republish.LEGACY_FILE).write_text(json.dumps([other, "../../etc", 3]))
    assert republish.waiting(tmp_path) == [other]
    assert not (tmp_path / republish.LEGACY_FILE).exists()
    try:
        republish.ask(tmp_path, "../escape")
    except ValueError:
        pass
    else:
        raise AssertionError("a name that is not an id was asked")
