"""The intake's reader (`status --intake`, `submit --intake --wait`) on a real `git daemon`
with no hook, where anyone may write any ref: a submission is its task and its id, so a
verdict under another task's name is not its verdict, and a verdict at its own name on
another candidate, of another task or rejecting another id is an error — never a success."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.gitutil import git
from tests.gitutil import run_integrator_raw as cli
from tests.intake_pushes import SUBMIT, accepted, push_verdict
from tests.remote_world import RemoteWorld


def _world(remote: RemoteWorld, tmp_path: Path) -> tuple[Path, Path, str, str]:
    """t1 issued; an agent clone with a candidate inside it; (clone, contract, candidate,
    another commit)."""
    contract = tmp_path / "t1.json"
    remote.issue(remote.mirror("coordinator"), "t1", ["t1/**"], contract)
    agent = remote.agent("agent")
    other = git("rev-parse", "HEAD", cwd=agent)  # the base: a commit that is not the candidate
    (agent / "t1/f.txt").write_text("mine\n")
    git("commit", "-qam", "mine", cwd=agent)
    return agent, contract, git("rev-parse", "HEAD", cwd=agent), other


def _status(remote: RemoteWorld, agent: Path, sid: str, *args: str) -> tuple[int, str]:
    done = cli("status", "--intake", remote.intake, "--submission", sid, "--repo", str(agent),
               *args)  # fmt: skip
    return done.returncode, done.stdout.decode() + done.stderr.decode()


def test_status_reads_its_own_task_only_and_refuses_a_foreign_verdict(
    remote: RemoteWorld, tmp_path: Path
) -> None:
    agent, contract, head, other = _world(remote, tmp_path)
    done = cli("submit", "--intake", remote.intake, "--contract", str(contract),
               "--candidate", "HEAD", "--repo", str(agent))  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    sid = done.stdout.decode().strip()

    code, out = _status(remote, agent, sid)
    assert code == 2 and "status --intake needs the submission's task" in out, out
    code, out = _status(remote, agent, sid, "--task", "t2", "--contract", str(contract))
    assert code == 2 and "is not the contract's task" in out, out

    # The same id under another task, even naming this very candidate: not this verdict.
    push_verdict(agent, remote.intake, "a0", sid, accepted(head, "a0"))
    for args in (["--task", "t1"], ["--contract", str(contract)], ["--task", "t1", "--json"]):
        code, out = _status(remote, agent, sid, *args)
        assert code == 4 and "no verdict for" in out, (args, out)

    # At its own name: another candidate, another task, a rejection of another id.
    push_verdict(agent, remote.intake, "t1", sid, accepted(other, "t1"))
    code, out = _status(remote, agent, sid, "--contract", str(contract), "--candidate", "HEAD")
    assert code == 2 and f"verdict on candidate '{other}', not on {head}" in out, out
    push_verdict(agent, remote.intake, "t1", sid, accepted(head, "t9"))
    code, out = _status(remote, agent, sid, "--task", "t1", "--candidate", "HEAD")
    assert code == 2 and "of task 't9', not of t1" in out, out
    push_verdict(agent, remote.intake, "t1", sid, {
        "schema": "integrator.rejection.v1", "submission": "20260101T000000000000Z-00000000",
        "reason": "x", "rejectedAt": "2026-01-01T00:00:00Z",
    }, "rejection.json")  # fmt: skip
    code, out = _status(remote, agent, sid, "--task", "t1")
    assert code == 2 and f"rejects another submission than {sid}" in out, out
    push_verdict(agent, remote.intake, "t1", sid, {"decision": "ACCEPTED", "extra": [1]})
    code, out = _status(remote, agent, sid, "--task", "t1")
    assert code == 2 and "holds no verdict document" in out, out

    push_verdict(agent, remote.intake, "t1", sid, accepted(head, "t1"))  # its own, at last
    code, out = _status(remote, agent, sid, "--contract", str(contract), "--candidate", "HEAD")
    assert code == 0 and f"{sid} ACCEPTED" in out, out


@contextmanager
def _publisher(remote: RemoteWorld, repo: Path, answer: str, under: str | None) -> Iterator[None]:
    """A rogue 'daemon': every submission ref on the intake is answered with an ACCEPTED
    verdict naming `answer` — at its own ref, or (`under`) at the same id of another task."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            listed = git("ls-remote", "--refs", remote.intake, f"{SUBMIT}*", cwd=repo)
            for line in listed.splitlines():
                task, sid = line.split("\t")[1].removeprefix(SUBMIT).split("/")
                push_verdict(repo, remote.intake, under or task, sid, accepted(answer, task))
            stop.wait(0.1)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(30)


def test_submit_wait_never_reports_a_verdict_that_is_not_its_own(
    remote: RemoteWorld, tmp_path: Path
) -> None:
    """`submit --intake --wait`: a verdict on another candidate published at its own ref is
    an error (exit 2, naming both candidates); a verdict on its candidate published under
    another task with its id is not its verdict (it keeps waiting: exit 4)."""
    agent, contract, head, other = _world(remote, tmp_path)
    submit = ["submit", "--intake", remote.intake, "--contract", str(contract),
              "--candidate", "HEAD", "--repo", str(agent)]  # fmt: skip
    git("init", "-q", str(tmp_path / "rogue"), cwd=tmp_path)
    with _publisher(remote, tmp_path / "rogue", other, None):
        done = cli(*submit, "--wait", "60")
    err = done.stderr.decode()
    assert done.returncode == 2 and f"not on {head}, the one submitted" in err, err
    assert done.stdout == b""

    with _publisher(remote, tmp_path / "rogue", head, "a0"):
        done = cli(*submit, "--wait", "3")
    err = done.stderr.decode()
    assert done.returncode == 4 and "no verdict for" in err and "of task t1" in err, err
