"""Intake hygiene under a flood (issue T, hole 4b), on a real `git daemon` intake and real
`serve --once` runs: one small pack pushed as 120 submission refs costs the daemon one
header read and one small rejection per ref, never a spool copy per ref; a document many
refs share is read and decided once; a poll judges at most INTAKE_POLL_SUBMISSIONS refs and
reads at most INTAKE_POLL_BYTES of documents; and an honest submission pushed after the
flood (with an id younger than the flood's forged ones) is decided in the first run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from integrator.daemon import admission
from integrator.limits import INTAKE_POLL_BYTES, INTAKE_POLL_SUBMISSIONS
from tests.gitutil import git
from tests.gitutil import run_integrator_raw as cli
from tests.intake_pushes import (
    SUBMIT,
    VERDICTS,
    folder_bytes,
    push_refs,
    submission_commit,
)
from tests.remote_world import RemoteWorld


def _intake(world: RemoteWorld, prefix: str) -> dict[str, str]:
    out = git("for-each-ref", "--format=%(refname) %(objectname)", prefix,
              cwd=world.server.root / "intake.git")  # fmt: skip
    return dict(line.split(" ", 1) for line in out.splitlines() if line)


def _ancient(i: int) -> str:
    """A submission id the flood forges: 1970, so it sorts before any honest one."""
    return f"19700101T{i:012d}Z-{i:08x}"


def _honest(world: RemoteWorld, tmp_path: Path) -> tuple[str, str]:
    """t1's agent submits a candidate inside its contract; (its id, its candidate)."""
    contract = tmp_path / "t1.json"
    world.issue(world.mirror("coordinator"), "t1", ["t1/**"], contract)
    agent = world.agent("honest")
    (agent / "t1/f.txt").write_text("honest\n")
    git("commit", "-qam", "honest", cwd=agent)
    done = cli("submit", "--intake", world.intake, "--contract", str(contract),
               "--candidate", "HEAD", "--repo", str(agent))  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode().strip(), git("rev-parse", "HEAD", cwd=agent)


def _run(world: RemoteWorld, mirror: Path, spool: Path) -> list[dict[str, Any]]:
    """One `serve --once` (one poll of the intake); the events it logged."""
    proc = world.serve(mirror, spool, "--once")
    assert proc.wait(180) == 0
    log = world.tmp / f"serve-{len(world.procs) - 1}.log"
    return [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]


def _refused(events: list[dict[str, Any]]) -> list[int]:
    return [e["refs"] for e in events if e["event"] == "intake.refused"]


def test_one_oversize_document_pushed_as_120_refs_is_answered_without_being_read(
    remote: RemoteWorld, tmp_path: Path
) -> None:
    sid, head = _honest(remote, tmp_path)
    flooder = remote.agent("flooder")
    base = git("rev-parse", "HEAD", cwd=flooder)
    commit = submission_commit(flooder, b" " * (3 << 20), base)  # 3 MiB of spaces
    names = [f"f{i % 40}/{_ancient(i)}" for i in range(120)]
    push_refs(flooder, remote.intake, commit, names)
    mirror, spool = remote.mirror("host"), tmp_path / "spool"

    events = _run(remote, mirror, spool)
    assert remote.verdict(f"{VERDICTS}t1/{sid}")["decision"] == "ACCEPTED"
    assert remote.landed() == [head]
    answered = len(_intake(remote, VERDICTS)) - 1
    assert answered == INTAKE_POLL_SUBMISSIONS - 1  # the honest one had its turn first
    assert len(_intake(remote, SUBMIT)) == 120 - answered
    assert _refused(events) == [answered]  # in one push
    assert folder_bytes(spool) < 256 << 10, folder_bytes(spool)  # no megabyte per ref

    _run(remote, mirror, spool)
    assert _intake(remote, SUBMIT) == {}
    for name in names:
        rejected = remote.verdict(f"{VERDICTS}{name}")
        assert rejected["reason"] == admission.too_large(3 << 20), rejected
    assert folder_bytes(spool) < 256 << 10


def test_one_document_under_many_refs_and_commits_is_read_and_decided_once(
    remote: RemoteWorld, tmp_path: Path
) -> None:
    """A 700 KiB submission.json (valid size, not JSON) in two commits, pushed as 120 refs:
    the spool holds it once (decided once: rejected as malformed, at the first ref); every
    other ref is a duplicate, rejected at its own ref. 120 copies would be 84 MiB."""
    flooder = remote.agent("flooder")
    base = git("rev-parse", "HEAD", cwd=flooder)
    document = b" " * (700 << 10)
    one = submission_commit(flooder, document, base)
    other = git("commit-tree", f"{one}^{{tree}}", "-p", base, "-m", "the same, again",
                cwd=flooder)  # fmt: skip
    assert one != other
    push_refs(flooder, remote.intake, one, [f"f{i % 40}/{_ancient(i)}" for i in range(60)])
    push_refs(flooder, remote.intake, other, [f"f{i % 40}/{_ancient(i)}" for i in range(60, 120)])
    mirror, spool = remote.mirror("host"), tmp_path / "spool"

    _run(remote, mirror, spool)
    assert len(_intake(remote, VERDICTS)) == INTAKE_POLL_SUBMISSIONS
    assert folder_bytes(spool) < len(document) + (256 << 10), folder_bytes(spool)
    _run(remote, mirror, spool)
    assert _intake(remote, SUBMIT) == {}
    assert folder_bytes(spool) < len(document) + (256 << 10), folder_bytes(spool)
    reasons = [remote.verdict(ref)["reason"] for ref in _intake(remote, VERDICTS)]
    assert reasons.count(admission.DUPLICATE) == 119
    (decided,) = [r for r in reasons if r != admission.DUPLICATE]
    assert "submission.json" in decided  # the spool's reader: not a submission document


def test_a_flood_of_distinct_documents_under_one_task_waits_behind_an_honest_one(
    remote: RemoteWorld, tmp_path: Path
) -> None:
    """30 distinct 600 KiB documents under one task, with ids older than any honest one,
    then one honest submission: the first run takes the honest one (tasks take turns) and
    reads no more than INTAKE_POLL_BYTES of the flood; later runs take the rest."""
    flooder = remote.agent("flooder")
    base = git("rev-parse", "HEAD", cwd=flooder)
    size = 600 << 10
    for i in range(30):
        commit = submission_commit(flooder, b" " * size + str(i).encode(), base)
        push_refs(flooder, remote.intake, commit, [f"flood/{_ancient(i)}"])
    sid, head = _honest(remote, tmp_path)
    mirror, spool = remote.mirror("host"), tmp_path / "spool"

    _run(remote, mirror, spool)
    assert remote.verdict(f"{VERDICTS}t1/{sid}")["decision"] == "ACCEPTED"
    assert remote.landed() == [head]
    taken = len(list((spool / "rejected").iterdir()))  # each flood document: not JSON
    assert 0 < taken <= INTAKE_POLL_BYTES // size
    assert folder_bytes(spool) <= INTAKE_POLL_BYTES + (256 << 10)
    for _ in range(4):
        if not _intake(remote, SUBMIT):
            break
        _run(remote, mirror, spool)
    assert _intake(remote, SUBMIT) == {}
    assert len(_intake(remote, VERDICTS)) == 31
