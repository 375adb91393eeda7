"""Remote mode with real processes against a real `git daemon` on 127.0.0.1: several
integrators with their own mirrors serve one canonical repository and one intake,
coordinating only through the server's atomic pushes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.daemon_world import wait_until
from tests.gitutil import GIT_ENV, git
from tests.gitutil import run_integrator_raw as cli
from tests.remote_world import PYTHON, RemoteWorld

VERDICTS = "refs/integrator/verdicts/"
SUBMITS = "refs/integrator/submit/"


def _intake_refs(world: RemoteWorld, prefix: str) -> dict[str, str]:
    return world.refs(world.server.root / "intake.git", prefix)


def _submit(world: RemoteWorld, agent: Path, contract: Path) -> str:
    done = cli(
        "submit", "--intake", world.intake, "--contract", str(contract),
        "--candidate", "HEAD", "--repo", str(agent),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode().strip()


def _candidate(world: RemoteWorld, i: int, files: dict[str, str]) -> Path:
    agent = world.agent(f"a{i}")
    for path, text in files.items():
        (agent / path).parent.mkdir(parents=True, exist_ok=True)
        (agent / path).write_text(text)
    git("add", "-A", cwd=agent)
    git("commit", "-qm", f"agent {i}", cwd=agent)
    return agent


def test_three_integrators_serve_one_remote_through_the_intake(
    remote: RemoteWorld, tmp_path: Path
) -> None:
    """30 tasks' candidates arrive through the intake, a third of them stale or out of
    contract; 3 daemons with separate mirrors decide them: every valid candidate lands
    exactly once, every other is FENCED, every submission has its verdict on the intake,
    and the final tree is the valid changes'."""
    coordinator = remote.mirror("coordinator")
    mirrors = [remote.mirror(name) for name in ("host-a", "host-b", "host-c")]
    kinds: dict[int, str] = {}
    contracts: dict[int, Path] = {}
    for i in range(30):
        contracts[i] = tmp_path / f"c{i}.json"
        remote.issue(coordinator, f"t{i}", [f"t{i}/**"], contracts[i])
        kinds[i] = {0: "stale", 3: "outside"}.get(i % 6, "valid")
    for i, kind in kinds.items():
        if kind == "stale":  # the agent keeps generation 1; the task moved on to generation 2
            done = cli("contract", "reclaim", "--repo", str(coordinator), "--task", f"t{i}",
                       "--force", "-o", str(tmp_path / f"c{i}-gen2.json"))  # fmt: skip
            assert done.returncode == 0, done.stderr.decode()
    agents = {
        i: _candidate(
            remote,
            i,
            {f"t{i}/f.txt": f"agent {i}\n"} | ({"shared/x": "mine\n"} if kind == "outside" else {}),
        )
        for i, kind in kinds.items()
    }
    heads = {i: git("rev-parse", "HEAD", cwd=a) for i, a in agents.items()}
    with ThreadPoolExecutor(4) as pool:
        sids = dict(
            zip(
                kinds,
                pool.map(lambda i: _submit(remote, agents[i], contracts[i]), kinds),
                strict=True,
            )
        )
    procs = [
        remote.serve(m, tmp_path / f"spool-{n}", name=f"host{n}") for n, m in enumerate(mirrors)
    ]

    def settled() -> bool:
        return len(_intake_refs(remote, VERDICTS)) == 30 and not _intake_refs(remote, SUBMITS)

    wait_until(settled, 180, "30 verdicts published and no submission left")
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    assert [proc.wait(30) for proc in procs] == [0, 0, 0]

    landed = remote.landed()
    for i, kind in kinds.items():
        verdict = remote.verdict(f"{VERDICTS}t{i}/{sids[i]}")
        codes = {v["code"] for v in verdict.get("violations", [])}
        if kind == "valid":
            assert verdict["decision"] == "ACCEPTED", verdict
            assert landed.count(heads[i]) == 1
        else:
            assert verdict["decision"] == "FENCED", verdict
            assert codes >= ({"STALE_GENERATION"} if kind == "stale" else {"PATH_NOT_OWNED"})
            assert heads[i] not in landed
    assert len(landed) == len(set(landed)) == 20
    assert git("rev-parse", "main", cwd=remote.canon) == git(
        "rev-parse", "refs/integrator/queue/main", cwd=remote.canon
    )
    for i, kind in kinds.items():
        expected = f"agent {i}\n" if kind == "valid" else "0\n"
        assert git("show", f"main:t{i}/f.txt", cwd=remote.canon) + "\n" == expected
    assert git("show", "main:shared/x", cwd=remote.canon) == "x"
    git("fsck", "--no-dangling", cwd=remote.canon)


@pytest.mark.parametrize("point", ["before-transaction", "after-push", "before-publish"])
def test_a_daemon_killed_mid_landing_loses_nothing_and_lands_nothing_twice(
    remote: RemoteWorld, tmp_path: Path, point: str
) -> None:
    """SIGKILL at the push (before it; after the server applied it; before the verdict is
    published): another daemon, with its own mirror, answers every submission from the
    remote — each candidate lands once and gets its verdict."""
    coordinator = remote.mirror("coordinator")
    sids, heads = {}, {}
    for i in range(3):
        contract = tmp_path / f"c{i}.json"
        remote.issue(coordinator, f"t{i}", [f"t{i}/**"], contract)
        agent = _candidate(remote, i, {f"t{i}/f.txt": f"agent {i}\n"})
        heads[i] = git("rev-parse", "HEAD", cwd=agent)
        sids[i] = _submit(remote, agent, contract)
    first = remote.mirror("host-a")
    killed = remote.serve(
        first, tmp_path / "spool-a", "--once", env={"INTEGRATOR_FAULT": f"kill:{point}"}
    )
    assert killed.wait(60) == -signal.SIGKILL
    landed_before = remote.landed()
    assert len(landed_before) == (0 if point == "before-transaction" else 3)
    assert len(_intake_refs(remote, SUBMITS)) == 3  # nothing published: all still there

    second = remote.mirror("host-b")
    answer = remote.serve(second, tmp_path / "spool-b", "--once")
    assert answer.wait(60) == 0
    assert sorted(remote.landed()) == sorted(heads.values())  # each exactly once
    assert not _intake_refs(remote, SUBMITS)
    for i in range(3):
        verdict = remote.verdict(f"{VERDICTS}t{i}/{sids[i]}")
        assert verdict["decision"] == "ACCEPTED", verdict
        assert bool(verdict.get("recovered")) == (point != "before-transaction")


def test_two_coordinators_reclaiming_one_task_at_once_one_wins(
    remote: RemoteWorld, tmp_path: Path
) -> None:
    """Claim commands go through the server's compare-and-swap: a coordinator paused after
    it read the claim loses to one on another host that reclaimed meanwhile (exit 1), and
    the task is at generation 2, not 3."""
    coordinator = remote.mirror("coordinator")
    remote.issue(coordinator, "t0", ["t0/**"], tmp_path / "c0.json")
    slow, fast = remote.mirror("host-x"), remote.mirror("host-y")
    paused = subprocess.Popen(
        [PYTHON, "-m", "integrator", "contract", "reclaim", "--repo", str(slow), "--task", "t0",
         "--force"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={**os.environ, **GIT_ENV, "INTEGRATOR_FAULT": "stop:before-claim-transaction"},
    )  # fmt: skip
    remote.procs.append(paused)
    wait_until(lambda: _stopped(paused.pid), 60, "the slow coordinator to pause")
    won = cli("contract", "reclaim", "--repo", str(fast), "--task", "t0", "--force")
    assert won.returncode == 0, won.stderr.decode()
    os.kill(paused.pid, signal.SIGCONT)
    _, err = paused.communicate(timeout=60)
    assert paused.returncode == 1, err.decode()
    assert "refs/integrator/claims/t0" in err.decode()
    state = json.loads(git("show", "refs/integrator/claims/t0:claim.json", cwd=remote.canon))
    assert state["generation"] == 2 and state["event"] == "reclaim"


def _stopped(pid: int) -> bool:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return fields[0] == "T"


def test_a_server_without_atomic_pushes_is_refused(remote: RemoteWorld, tmp_path: Path) -> None:
    """`init --remote` refuses, with a clear error, a server that does not advertise atomic."""
    git("config", "receive.advertiseAtomic", "false", cwd=remote.canon)
    done = cli("init", "--repo", str(tmp_path / "m.git"), "--remote", remote.url)
    assert done.returncode == 2
    assert "does not support atomic pushes" in done.stderr.decode()
    assert remote.refs(remote.canon, "refs/integrator/") == {}


def test_status_waits_for_the_verdict(remote: RemoteWorld, tmp_path: Path) -> None:
    """`status --intake --wait` exits with the verdict's code once a daemon published it."""
    coordinator = remote.mirror("coordinator")
    contract = tmp_path / "c.json"
    remote.issue(coordinator, "t1", ["t1/**"], contract)
    agent = _candidate(remote, 1, {"t1/f.txt": "x\n", "shared/x": "mine\n"})
    sid = _submit(remote, agent, contract)
    assert (
        cli(
            "status",
            "--intake",
            remote.intake,
            "--submission",
            sid,
            "--task",
            "t1",
            "--repo",
            str(agent),
        ).returncode
        == 4
    )
    remote.serve(remote.mirror("host"), tmp_path / "spool")
    done = cli("status", "--intake", remote.intake, "--submission", sid, "--repo", str(agent),
               "--contract", str(contract), "--candidate", "HEAD", "--wait", "60", "--json")  # fmt: skip
    assert done.returncode == 1, done.stderr.decode()
    assert json.loads(done.stdout)["verdict"]["decision"] == "FENCED"


def test_a_claim_rewritten_on_the_server_is_fenced(remote: RemoteWorld, tmp_path: Path) -> None:
    """A claim chain only grows: a claim ref moved sideways on the server (a forged claim
    with wider paths, not descending from the one the mirror saw) fences CLAIM_REWRITTEN."""
    mirror = remote.mirror("host")
    contract = tmp_path / "c.json"
    issued = remote.issue(mirror, "t0", ["t0/**"], contract)
    cli("contract", "show", "--repo", str(mirror), "--task", "t0")  # the mirror sees the claim
    forged_doc = issued | {"paths": ["**"]}
    forged = tmp_path / "forged.json"
    forged.write_text(json.dumps(forged_doc))
    claim = json.loads(git("show", "refs/integrator/claims/t0:claim.json", cwd=remote.canon))
    from integrator.documents.contract import parse_contract

    claim["contractDigest"] = parse_contract(forged.read_bytes()).digest
    state = tmp_path / "claim.json"
    state.write_text(json.dumps(claim))
    blob_c = git("hash-object", "-w", str(forged), cwd=remote.canon)
    blob_s = git("hash-object", "-w", str(state), cwd=remote.canon)
    tree = git("mktree", cwd=remote.canon,
               input=f"100644 blob {blob_s}\tclaim.json\n100644 blob {blob_c}\tcontract.json\n".encode())  # fmt: skip
    sideways = git("commit-tree", tree, "-m", "forged", cwd=remote.canon)
    git("update-ref", "refs/integrator/claims/t0", sideways, cwd=remote.canon)
    agent = _candidate(remote, 0, {"shared/x": "stolen\n"})
    git("push", "-q", str(mirror), "HEAD:refs/heads/agent", cwd=agent)  # objects into the mirror
    done = cli("integrate", "--repo", str(mirror), "--contract", str(forged),
               "--candidate", git("rev-parse", "HEAD", cwd=agent), "--json")  # fmt: skip
    assert done.returncode == 1, done.stderr.decode()
    verdict = json.loads(done.stdout)
    assert [v["code"] for v in verdict["violations"]] == ["CLAIM_REWRITTEN"]
    assert remote.landed() == []
