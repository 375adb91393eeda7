"""Host and server failures are never a submission's fault (the system as a team runs it)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from integrator.limits import MAX_CRASHES
from integrator.store.spool import REJECTION_FILE, Spool
from tests.daemon_world import PYTHON, World, hand_over, key_for, submission, wait_until
from tests.git_server import git_daemon
from tests.gitutil import GIT_ENV, git
from tests.gitutil import run_integrator_raw as cli
from tests.promotion_world import CHECK_SCRIPT, MARKER
from tests.remote_world import RemoteWorld


def _clone_with_work(world: World, tmp_path: Path, task: str) -> Path:
    clone = tmp_path / f"clone-{task}"
    git("clone", "-q", str(world.repo), str(clone), cwd=tmp_path)
    (clone / "work" / task).mkdir(parents=True)
    (clone / "work" / task / "f.txt").write_text(f"{task}\n")
    git("add", "-A", cwd=clone)
    git("commit", "-qm", f"work on {task}", cwd=clone)
    return clone


def test_a_relative_spool_with_a_bundle_lands(world: World, tmp_path: Path) -> None:
    """`submit --spool DIR --bundle` and `serve --spool DIR` with DIR relative to the
    current folder (the form the demo uses) land the candidate: git is never handed a path
    relative to a folder it does not run in."""
    data, _ = world.candidate("relative")
    contract = tmp_path / "contract.json"
    hand_over(world.repo, data, contract)
    clone = _clone_with_work(world, tmp_path, "relative")
    spool = os.path.relpath(world.spool.root, tmp_path)
    submitted = subprocess.run(
        [PYTHON, "-m", "integrator", "submit", "--create", "--spool", spool, "--contract", "contract.json",
         "--candidate", "HEAD", "--repo", str(clone), "--bundle"],
        cwd=tmp_path, capture_output=True, check=False,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr.decode()
    sid = submitted.stdout.decode().split()[-1]
    served = subprocess.run(
        [PYTHON, "-m", "integrator", "serve", "--once", "--repo", str(world.repo),
         "--spool", spool, "--log-format", "json"],
        cwd=tmp_path, capture_output=True, check=False,
    )  # fmt: skip
    assert served.returncode == 0, served.stderr.decode()
    status = subprocess.run(
        [PYTHON, "-m", "integrator", "status", "--spool", spool, "--submission", sid, "--json"],
        cwd=tmp_path, capture_output=True, check=False,
    )  # fmt: skip
    assert json.loads(status.stdout)["verdict"]["decision"] == "ACCEPTED", status.stdout
    assert status.returncode == 0


def _events(log: Path, name: str) -> list[dict[str, object]]:
    out = []
    for line in log.read_text().splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("event") == name:
            out.append(event)
    return out


def test_a_git_server_outage_is_never_the_submissions_fault(
    remote: RemoteWorld, tmp_path: Path
) -> None:
    """A git server that goes down under a running daemon: the submission it takes
    meanwhile is retried with backoff (its place kept, never counted towards the crash
    limit and REJECTED), and lands ACCEPTED once the server is back."""
    mirror = remote.mirror("host-a")
    contract = tmp_path / "c.json"
    remote.issue(mirror, "t1", ["t1/**"], contract)
    agent = remote.agent("a1")
    (agent / "t1" / "f.txt").write_text("agent\n")
    git("commit", "-qam", "agent work", cwd=agent)
    spool = tmp_path / "spool"
    proc = remote.serve(mirror, spool, name="outage")
    log = tmp_path / "outage-0.log"
    wait_until(lambda: _events(log, "daemon.ready"), 30, "the daemon")
    port = remote.server.port
    remote.server.stop()
    done = cli("submit", "--create", "--spool", str(spool), "--contract", str(contract),
               "--candidate", "HEAD", "--repo", str(agent), "--bundle")  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    sid = done.stdout.decode().split()[-1]
    wait_until(lambda: len(_events(log, "daemon.retry_later")) >= 2, 60, "retries")
    time.sleep(6)  # long enough for MAX_CRASHES attempts at the old 0.5/1/2 s backoff
    # Still waiting (in new/: the batch reads authority before it claims anything, and the
    # server is down), never rejected nor counted as a crash.
    assert Spool(spool).find(sid)[0] in ("new", "work")  # type: ignore[index]
    assert not _events(log, "integrate.crashed")
    remote.server.start(port)
    wait_until(lambda: Spool(spool).find(sid)[0] == "accepted", 120, "landed")  # type: ignore[index]
    assert remote.landed() == [git("rev-parse", "HEAD", cwd=agent)]
    kinds = {event.get("kind") for event in _events(log, "daemon.retry_later")}
    assert kinds <= {"git-server", "intake"}, kinds
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    assert MAX_CRASHES == 3


def test_readyz_and_metrics_tell_the_truth_while_the_server_is_down(
    remote: RemoteWorld, tmp_path: Path
) -> None:
    """With the git server stopped, /readyz answers 503 naming the server, the intake's
    failure is counted by kind in the metrics, and the log says so once rather than at
    every poll; when the server is back, /readyz is ready again."""
    mirror = remote.mirror("host-a")
    proc = remote.serve(mirror, tmp_path / "spool", "--http", "127.0.0.1:0", name="health")
    log = tmp_path / "health-0.log"
    listening = wait_until(lambda: _events(log, "http.listening"), 30, "the health server")
    base = f"http://127.0.0.1:{listening[0]['port']}"

    def ready() -> tuple[int, dict[str, object]]:
        try:
            with urllib.request.urlopen(f"{base}/readyz", timeout=10) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    wait_until(lambda: ready()[0] == 200, 30, "ready with the server up")
    port = remote.server.port
    remote.server.stop()

    def remote_down() -> dict[str, object] | None:
        code, body = ready()
        checks = body["checks"]
        assert isinstance(checks, dict)
        return body if code == 503 and not checks["remote"]["ok"] else None

    body = wait_until(remote_down, 30, "503 naming the git server")
    assert "does not answer" in json.dumps(body), body
    time.sleep(3)  # a dozen polls at 0.2 s
    with urllib.request.urlopen(f"{base}/metrics", timeout=10) as answer:
        metrics = answer.read().decode()
    assert 'integrator_infrastructure_errors_total{kind="intake"}' in metrics, metrics
    assert len(_events(log, "intake.unavailable")) <= 2
    remote.server.start(port)
    wait_until(lambda: ready()[0] == 200, 30, "ready again with the server back")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0


def _stopped(pid: int) -> bool:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return fields[0] == "T"


def _fenced_on_two_hosts(remote: RemoteWorld, tmp_path: Path) -> tuple[str, bytes]:
    """One intake submission that both hosts decide (FENCED): host B is stopped right
    before its hold while host A decides, holds and publishes, then B goes on. Returns the
    submission id and B's log."""
    mirrors = [remote.mirror(name) for name in ("host-a", "host-b")]
    contract = tmp_path / "c.json"
    remote.issue(mirrors[0], "t1", ["t1/**"], contract)
    agent = remote.agent("a1")
    (agent / "shared" / "x").write_text("not mine\n")
    git("commit", "-qam", "outside the contract", cwd=agent)
    done = cli("submit", "--intake", remote.intake, "--contract", str(contract),
               "--candidate", "HEAD", "--repo", str(agent))  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    sid = done.stdout.decode().split()[-1]
    once = ["serve", "--once", "--intake", remote.intake, "--log-format", "json"]
    late = subprocess.Popen(
        [PYTHON, "-m", "integrator", *once, "--repo", str(mirrors[1]),
         "--spool", str(tmp_path / "spool-b")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env={**os.environ, **GIT_ENV, "INTEGRATOR_FAULT": "stop:before-hold"},
    )  # fmt: skip
    try:
        wait_until(lambda: _stopped(late.pid), 60, "host B decided, before its hold")
        first = cli(*once, "--repo", str(mirrors[0]), "--spool", str(tmp_path / "spool-a"))
        assert first.returncode == 0, first.stderr.decode()
        os.kill(late.pid, signal.SIGCONT)
        out, _ = late.communicate(timeout=120)
    finally:
        if late.poll() is None:
            late.kill()
            late.wait()
    assert late.returncode == 0, out.decode()
    return sid, out


def test_daemons_deciding_one_submission_converge_without_errors(
    remote: RemoteWorld, tmp_path: Path
) -> None:
    """Two hosts take the same intake submission and both fence it: the one whose hold
    comes second finds the first one's record on the server, drops its own and exits 0 —
    another daemon holding it first is not an error — and the server keeps one hold."""
    sid, out = _fenced_on_two_hosts(remote, tmp_path)
    assert b"hold.converged" in out
    records = git("log", "--format=%s", f"refs/integrator/held/{sid}", cwd=remote.canon)
    holds = [line for line in records.splitlines() if line.startswith(("hold ", "approve "))]
    assert holds == [f"hold {sid}: FENCED PATH_NOT_OWNED"], records
    for name in ("a", "b"):
        assert Spool(tmp_path / f"spool-{name}").find(sid)[0] == "fenced"  # type: ignore[index]


def test_a_missing_candidate_is_rejected_with_what_to_do(world: World) -> None:
    """A submission whose candidate commit the daemon cannot read is REJECTED with "push
    it, or use --bundle" (nothing of its ownership was judged), not FENCED as if it broke
    its contract; a candidate naming a blob likewise."""
    data, _ = world.candidate("missing")
    absent = world.spool.submit(
        submission(json.loads(data), "ab" * 20), key=key_for(world.repo, json.loads(data))
    )
    blob = git("hash-object", "-w", "--stdin", cwd=world.repo, input=b"not a commit\n")
    data2, _ = world.candidate("blob")
    not_commit = world.spool.submit(
        submission(json.loads(data2), blob), key=key_for(world.repo, json.loads(data2))
    )
    assert world.once().wait() == 0
    for sid, what in ((absent, "is not in the repository"), (not_commit, "is a blob")):
        found = world.spool.find(sid)
        assert found is not None and found[0] == "rejected", found
        reason = json.loads((found[1] / REJECTION_FILE).read_text())["reason"]
        assert what in reason and "--bundle" in reason, reason


def test_an_ejected_landing_is_not_reported_accepted_on_the_intake(
    tmp_path: Path,
) -> None:
    """With validation on and remote mode, a candidate the validation command fails is
    ejected; the daemon that accepted it publishes its verdict again, so `status --intake`
    answers FENCED (VALIDATION_FAILED), exit 1 — not the ACCEPTED, exit 0, it first said —
    while the innocent landing still answers ACCEPTED."""
    files = {"t0/f.txt": "0\n", "t1/f.txt": "0\n", "ci/check.sh": CHECK_SCRIPT}
    with git_daemon(tmp_path / "srv") as server:
        world = RemoteWorld(tmp_path, server, files)
        try:
            policy = tmp_path / "policy.toml"
            policy.write_text(
                "version = 1\n[validation]\n"
                f'command = ["sh", "ci/check.sh", "{tmp_path / "runs.log"}", '
                f'"{tmp_path / "lenient"}"]\nmax_batch = 2\n'
            )
            coordinator = world.mirror("coordinator")
            done = cli("policy", "set", str(policy), "--repo", str(coordinator))
            assert done.returncode == 0, done.stderr.decode()
            sids = {}
            for i in (0, 1):
                contract = tmp_path / f"c{i}.json"
                world.issue(coordinator, f"t{i}", [f"t{i}/**"], contract)
                agent = world.agent(f"a{i}")
                (agent / f"t{i}/f.txt").write_text(f"agent {i}\n")
                if i == 1:
                    (agent / f"t{i}/{MARKER}").write_text("breaks the build\n")
                git("add", "-A", cwd=agent)
                git("commit", "-qm", f"agent {i}", cwd=agent)
                done = cli("submit", "--intake", world.intake, "--contract", str(contract),
                           "--candidate", "HEAD", "--repo", str(agent))  # fmt: skip
                assert done.returncode == 0, done.stderr.decode()
                sids[i] = done.stdout.decode().split()[-1]
            lander, spool = world.mirror("lander"), tmp_path / "spool"
            assert world.serve(lander, spool, "--once", "--no-promote").wait(120) == 0
            reader = world.agent("reader")
            status = ["status", "--intake", world.intake, "--repo", str(reader), "--json"]
            first = cli(*status, "--submission", sids[1], "--task", "t1")
            assert first.returncode == 0, first.stdout  # ACCEPTED: landed on the queue
            promoted = cli("promote", "--repo", str(world.mirror("promoter")), "--once")
            assert promoted.returncode == 0, promoted.stderr.decode()
            assert world.serve(lander, spool, "--once", "--no-promote").wait(120) == 0
            ejected = cli(*status, "--submission", sids[1], "--task", "t1")
            doc = json.loads(ejected.stdout)
            assert doc["verdict"]["decision"] == "FENCED", doc
            assert "VALIDATION_FAILED" in {v["code"] for v in doc["verdict"]["violations"]}
            assert ejected.returncode == 1
            innocent = cli(*status, "--submission", sids[0], "--task", "t0")
            assert innocent.returncode == 0, innocent.stdout
            assert json.loads(innocent.stdout)["verdict"]["decision"] == "ACCEPTED"
        finally:
            world.stop()


SECRET_HOOK = """#!/bin/sh
# A server rule on content: no file named SECRET in any pushed commit.
while read old new ref; do
  [ "$new" = 0000000000000000000000000000000000000000 ] && continue
  if git ls-tree -r --name-only "$new" 2>/dev/null | grep -q 'SECRET$'; then
    echo "content rule: $ref holds a SECRET" >&2
    exit 1
  fi
done
exit 0
"""


def _hook(remote: RemoteWorld, script: str) -> None:
    hook = remote.canon / "hooks" / "pre-receive"
    hook.write_text(script)
    hook.chmod(0o755)


def _bundled(
    remote: RemoteWorld, tmp_path: Path, mirror: Path, task: str, files: dict[str, str]
) -> str:
    contract = tmp_path / f"{task}.json"
    remote.issue(mirror, task, [f"{task}/**"], contract)
    agent = remote.agent(task)
    for path, text in files.items():
        (agent / path).parent.mkdir(parents=True, exist_ok=True)
        (agent / path).write_text(text)
    git("add", "-A", cwd=agent)
    git("commit", "-qm", f"work on {task}", cwd=agent)
    done = cli("submit", "--create", "--spool", str(tmp_path / "spool"), "--contract", str(contract),
               "--candidate", "HEAD", "--repo", str(agent), "--bundle")  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode().split()[-1]


def test_a_candidate_the_server_refuses_is_pinned_on_it(
    remote: RemoteWorld, tmp_path: Path
) -> None:
    """A server rule that refuses one candidate's content (its hook declines the push) is
    that candidate's: a write probe shows the server takes other writes, so it is counted
    and REJECTED with the server's reason at the crash limit, and the candidate beside it
    lands — it is not retried for ever, holding up the queue."""
    mirror = remote.mirror("host-a")
    bad = _bundled(remote, tmp_path, mirror, "t1", {"t1/SECRET": "key\n"})
    good = _bundled(remote, tmp_path, mirror, "t2", {"t2/f.txt": "fine\n"})
    _hook(remote, SECRET_HOOK)
    spool = Spool(tmp_path / "spool")
    for _ in range(MAX_CRASHES):
        cli("serve", "--once", "--repo", str(mirror), "--spool", str(spool.root),
            "--log-format", "json")  # fmt: skip
        found = spool.find(bad)
        if found is not None and found[0] == "rejected":
            break
    found = spool.find(bad)
    assert found is not None and found[0] == "rejected", found
    reason = json.loads((found[1] / REJECTION_FILE).read_text())["reason"]
    assert "refused the push" in reason, reason
    assert "content rule:" in reason and "holds a SECRET" in reason  # the hook's own words
    assert spool.find(good)[0] == "accepted"  # type: ignore[index]


def test_a_server_that_refuses_every_write_is_the_hosts_trouble(
    remote: RemoteWorld, tmp_path: Path
) -> None:
    """A server whose hook declines every push (it answers reads, takes no writes): the
    write probe is refused too, so nothing is counted against the submission, which waits
    in work/ and lands once the server takes writes again."""
    mirror = remote.mirror("host-a")
    sid = _bundled(remote, tmp_path, mirror, "t1", {"t1/f.txt": "fine\n"})
    _hook(remote, "#!/bin/sh\necho 'read-only for maintenance' >&2\nexit 1\n")
    spool = Spool(tmp_path / "spool")
    for _ in range(MAX_CRASHES + 1):
        once = cli("serve", "--once", "--repo", str(mirror), "--spool", str(spool.root),
                   "--log-format", "json")  # fmt: skip
        assert once.returncode == 4, once.stderr.decode()
    assert spool.find(sid)[0] == "work"  # type: ignore[index]
    assert spool.attempts(sid) == 0
    git("config", "receive.advertisePushOptions", "true", cwd=remote.canon)
    pushed = cli("submit", "--intake", remote.url, "--contract", str(tmp_path / "t1.json"),
                 "--candidate", "HEAD", "--repo", str(tmp_path / "agents" / "t1"))  # fmt: skip
    assert pushed.returncode == 4
    assert b"read-only for maintenance" in pushed.stderr  # every remote: line is kept
    (remote.canon / "hooks" / "pre-receive").unlink()
    once = cli("serve", "--once", "--repo", str(mirror), "--spool", str(spool.root))
    assert once.returncode == 0, once.stderr.decode()
    assert spool.find(sid)[0] == "accepted"  # type: ignore[index]


def test_a_review_decided_on_one_host_is_the_answer_on_every_host(
    remote: RemoteWorld, tmp_path: Path
) -> None:
    """Two hosts hold the same fenced submission; a release manager rejects it on host A.
    Host B then no longer lists it as held, and approving it there is refused with who
    rejected it and when — the gate is not run again and nothing on the server changes."""
    sid, _ = _fenced_on_two_hosts(remote, tmp_path)
    spools = [tmp_path / "spool-a", tmp_path / "spool-b"]
    rejected = cli("review", "reject", sid, "--spool", str(spools[0]), "--reason", "not ours",
                   "--actor", "alice")  # fmt: skip
    assert rejected.returncode == 0, rejected.stderr.decode()
    server = git("for-each-ref", "--format=%(refname) %(objectname)", "refs/integrator/",
                 cwd=remote.canon)  # fmt: skip
    listed = cli("review", "list", "--spool", str(spools[1]), "--json")
    assert listed.returncode == 0, listed.stderr.decode()
    assert json.loads(listed.stdout) == []
    approve = cli("review", "approve", sid, "--spool", str(spools[1]), "--actor", "bob")
    assert approve.returncode == 2, approve.stderr.decode()
    assert b"already rejected by alice" in approve.stderr
    assert Spool(spools[1]).find(sid)[0] == "archived"  # type: ignore[index]
    assert git("for-each-ref", "--format=%(refname) %(objectname)", "refs/integrator/",
               cwd=remote.canon) == server  # fmt: skip


def test_a_verdict_the_intake_refuses_is_exit_4_for_serve_once(
    remote: RemoteWorld, tmp_path: Path
) -> None:
    """An intake that refuses the verdict push: `serve --once` exits 4 naming the
    submission and the intake's own words (it used to exit 0 with the verdict unpublished);
    once the intake takes it, the next run publishes it and exits 0."""
    mirror = remote.mirror("host-a")
    contract = tmp_path / "c.json"
    remote.issue(mirror, "t1", ["t1/**"], contract)
    agent = remote.agent("a1")
    (agent / "t1" / "f.txt").write_text("agent\n")
    git("commit", "-qam", "agent work", cwd=agent)
    done = cli("submit", "--intake", remote.intake, "--contract", str(contract),
               "--candidate", "HEAD", "--repo", str(agent))  # fmt: skip
    sid = done.stdout.decode().split()[-1]
    hook = remote.server.root / "intake.git" / "hooks" / "pre-receive"
    hook.write_text(
        "#!/bin/sh\nwhile read old new ref; do case $ref in refs/integrator/verdicts/*)"
        " echo 'verdicts are frozen' >&2; exit 1;; esac; done\nexit 0\n"
    )
    hook.chmod(0o755)
    once = ["serve", "--once", "--repo", str(mirror), "--spool", str(tmp_path / "spool"),
            "--intake", remote.intake, "--log-format", "json"]  # fmt: skip
    refused = cli(*once)
    assert refused.returncode == 4, refused.stderr.decode()
    assert sid.encode() in refused.stderr and b"not published" in refused.stderr
    hook.unlink()
    assert cli(*once).returncode == 0
    assert remote.verdict(f"refs/integrator/verdicts/t1/{sid}")["decision"] == "ACCEPTED"
