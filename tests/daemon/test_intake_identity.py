"""A submission id is not an identity (issue T, hole 1): on a real `git daemon` intake, a
pusher that reuses another agent's pending or decided submission id — under its own task,
or under the same task — never gets its candidate answered as the other's, nor the other's
verdict as its own, and every ref is answered at its own verdict ref."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.gitutil import git
from tests.gitutil import run_integrator_raw as cli
from tests.intake_pushes import SUBMIT, VERDICTS, push_refs, submission_commit, submission_document
from tests.remote_world import RemoteWorld

IN_USE = "the submission id is already in use by another submission"


def _intake(world: RemoteWorld, prefix: str) -> dict[str, str]:
    """The intake's refs under `prefix`: name → object id."""
    out = git("for-each-ref", "--format=%(refname) %(objectname)", prefix,
              cwd=world.server.root / "intake.git")  # fmt: skip
    return dict(line.split(" ", 1) for line in out.splitlines() if line)


def _agent(world: RemoteWorld, name: str, path: str) -> tuple[Path, str]:
    """A clone with one commit changing `path`; (clone, its head)."""
    agent = world.agent(name)
    (agent / path).write_text(f"{name}\n")
    git("commit", "-qam", name, cwd=agent)
    return agent, git("rev-parse", "HEAD", cwd=agent)


def _submit(world: RemoteWorld, agent: Path, contract: Path) -> str:
    done = cli("submit", "--intake", world.intake, "--contract", str(contract),
               "--candidate", "HEAD", "--repo", str(agent))  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode().strip()


def _attack(world: RemoteWorld, agent: Path, head: str, contract: dict[str, Any],
            names: list[str], key: Path | None = None) -> str:  # fmt: skip
    """Push the attacker's own submission (its contract, its candidate, signed with its own
    attempt key `key` for the id the names share) under `names`."""
    sid = names[0].split("/")[1]
    document = submission_document(contract, head, key=key, sid=sid)
    commit = submission_commit(agent, document, head)
    push_refs(agent, world.intake, commit, names)
    return commit


def _status(world: RemoteWorld, agent: Path, sid: str, *args: str) -> tuple[int, str]:
    """`status --intake` of `sid`: its exit code, and what it printed (stdout, else stderr)."""
    done = cli("status", "--intake", world.intake, "--submission", sid, "--repo", str(agent),
               *args)  # fmt: skip
    return done.returncode, done.stdout.decode() or done.stderr.decode()


def _once(world: RemoteWorld, mirror: Path, spool: Path) -> None:
    assert world.serve(mirror, spool, "--once").wait(120) == 0


@pytest.mark.parametrize("attacker_task", ["a5", "z5"])
def test_an_id_reused_under_another_task_is_never_answered_with_the_other_verdict(
    remote: RemoteWorld, tmp_path: Path, attacker_task: str
) -> None:
    """The victim's submission t1/<id> is pending; the attacker pushes its own submission as
    <attacker_task>/<id> (sorting before or after t1). One of the two is decided — its
    own candidate, published at its own ref — and the other is rejected at its own ref
    ("already in use"): neither agent reads the other's verdict, and status of t1 never
    says ACCEPTED for the attacker's candidate."""
    coordinator = remote.mirror("coordinator")
    victim_contract, attacker_contract = tmp_path / "t1.json", tmp_path / "atk.json"
    remote.issue(coordinator, "t1", ["t1/**"], victim_contract)
    attacker_doc = remote.issue(coordinator, attacker_task, ["t5/**"], attacker_contract)
    victim, victim_head = _agent(remote, "victim", "t1/f.txt")
    attacker, attacker_head = _agent(remote, "attacker", "t5/f.txt")
    sid = _submit(remote, victim, victim_contract)
    key = Path(f"{attacker_contract}.key")  # contract issue -o FILE hands out FILE.key
    _attack(remote, attacker, attacker_head, attacker_doc, [f"{attacker_task}/{sid}"], key)

    _once(remote, remote.mirror("host"), tmp_path / "spool")

    assert _intake(remote, SUBMIT) == {}  # both answered
    mine, theirs = (
        remote.verdict(f"{VERDICTS}t1/{sid}"),
        remote.verdict(f"{VERDICTS}{attacker_task}/{sid}"),
    )
    first_is_attacker = attacker_task < "t1"  # a poll takes one id once; ties go by task
    decided, refused = (theirs, mine) if first_is_attacker else (mine, theirs)
    assert decided["decision"] == "ACCEPTED", decided
    assert decided["candidate"] == (attacker_head if first_is_attacker else victim_head)
    assert refused["schema"] == "integrator.rejection.v1" and refused["submission"] == sid
    assert IN_USE in refused["reason"]
    assert remote.landed() == [attacker_head if first_is_attacker else victim_head]

    code, out = _status(remote, victim, sid, "--contract", str(victim_contract),
                        "--candidate", "HEAD", "--json")  # fmt: skip
    if first_is_attacker:
        assert code == 2 and IN_USE in json.loads(out)["reason"], out
    else:
        assert code == 0 and json.loads(out)["verdict"]["candidate"] == victim_head, out
    code, out = _status(remote, attacker, sid, "--task", attacker_task, "--candidate", "HEAD")
    assert code == (0 if first_is_attacker else 2), out


def test_an_id_reused_after_its_verdict_is_rejected_or_dropped_not_answered(
    remote: RemoteWorld, tmp_path: Path
) -> None:
    """t1/<id> was decided and published; then, with the daemon restarted (nothing in
    memory), the attacker pushes its own submission as a5/<id> and as t1/<id> again. The
    a5 ref gets a rejection of its own; the t1 ref is dropped and t1's verdict is left as
    it was (it is the victim's); the attacker's candidate never lands; reading t1/<id>
    with the attacker's candidate is an error, never ACCEPTED."""
    coordinator = remote.mirror("coordinator")
    victim_contract, attacker_contract = tmp_path / "t1.json", tmp_path / "a5.json"
    remote.issue(coordinator, "t1", ["t1/**"], victim_contract)
    attacker_doc = remote.issue(coordinator, "a5", ["t5/**"], attacker_contract)
    victim, victim_head = _agent(remote, "victim", "t1/f.txt")
    attacker, attacker_head = _agent(remote, "attacker", "t5/f.txt")
    sid = _submit(remote, victim, victim_contract)
    mirror, spool = remote.mirror("host"), tmp_path / "spool"
    _once(remote, mirror, spool)
    published = _intake(remote, VERDICTS)
    assert list(published) == [f"{VERDICTS}t1/{sid}"]

    key = Path(f"{attacker_contract}.key")
    _attack(remote, attacker, attacker_head, attacker_doc, [f"a5/{sid}", f"t1/{sid}"], key)
    _once(remote, mirror, spool)

    assert _intake(remote, SUBMIT) == {}
    now = _intake(remote, VERDICTS)
    assert now[f"{VERDICTS}t1/{sid}"] == published[f"{VERDICTS}t1/{sid}"]  # untouched
    rejected = remote.verdict(f"{VERDICTS}a5/{sid}")
    assert rejected["submission"] == sid and IN_USE in rejected["reason"], rejected
    assert remote.landed() == [victim_head]
    code, out = _status(remote, victim, sid, "--task", "t1", "--candidate", victim_head)
    assert code == 0, out
    code, out = _status(remote, attacker, sid, "--task", "t1", "--candidate", "HEAD")
    assert code == 2 and f"not on {attacker_head}" in out, out
    code, out = _status(remote, attacker, sid, "--task", "a5")
    assert code == 2 and "REJECTED" in out and IN_USE in out, out


def test_a_ref_naming_another_task_than_its_contract_is_rejected_at_its_own_ref(
    remote: RemoteWorld, tmp_path: Path
) -> None:
    """A submission whose contract is t1's, pushed as t2/<id>, is rejected at
    verdicts/t2/<id> (the contract must be of the task the ref names) and never decided:
    no verdict of t1 is published under t2's name, nothing lands."""
    coordinator = remote.mirror("coordinator")
    contract = tmp_path / "t1.json"
    doc = remote.issue(coordinator, "t1", ["t1/**"], contract)
    agent, head = _agent(remote, "agent", "t1/f.txt")
    sid = "20260101T000000000000Z-0123abcd"
    _attack(remote, agent, head, doc, [f"t2/{sid}"])
    _once(remote, remote.mirror("host"), tmp_path / "spool")
    rejected = remote.verdict(f"{VERDICTS}t2/{sid}")
    assert "its contract is of another task than the ref names" in rejected["reason"]
    assert remote.landed() == [] and _intake(remote, SUBMIT) == {}
