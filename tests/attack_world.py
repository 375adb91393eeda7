"""A world for the attack scenario (tests/daemon/test_attack_scenario.py): a canonical
repository and an intake on one real server bound to 127.0.0.1 — a plain `git daemon` with
no hook (anyone may push any ref), or lighttpd + `git http-backend` with basic auth and
integrator's server hook (the pusher is the user the web server authenticated) — with a
coordinator, integrator hosts and agents, each pushing as its own user."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pytest

from integrator.documents.trailers import TRAILER_CANDIDATE
from tests.daemon_world import spawn_integrator
from tests.git_server import git_daemon
from tests.gitutil import GIT_ENV, commit_files, git, make_repo
from tests.gitutil import run_integrator_raw as cli
from tests.serverhook.test_server_hook_http import (
    EXEC_PATH,
    LIGHTTPD,
    LIGHTTPD_CONF,
    free_port,
    stop,
    wait_for,
)

# Every party pushes as its own user on the http server (the coordinator and the integrator
# hosts are the hook's integrators); the git daemon authenticates no one.
USERS = {
    "agent-a": "a-secret",
    "agent-b": "b-secret",
    "attacker": "x-secret",
    "coordinator": "c-secret",
    "integrator": "i-secret",
}
INTEGRATORS = ("coordinator", "integrator")
QUEUE = "refs/integrator/queue/main"


class Server(Protocol):
    root: Path  # the folder holding canon.git and intake.git
    guarded: bool  # integrator's server hook is installed

    def url(self, name: str, user: str) -> str: ...


@dataclass
class DaemonServer:
    root: Path
    port: int
    guarded: bool = False

    def url(self, name: str, user: str) -> str:
        return f"git://127.0.0.1:{self.port}/{name}.git"  # no one is authenticated


@dataclass
class HttpServer:
    root: Path
    port: int
    guarded: bool = True

    def url(self, name: str, user: str) -> str:
        return f"http://{user}:{USERS[user]}@127.0.0.1:{self.port}/git/{name}.git"


@contextmanager
def daemon_server(root: Path) -> Iterator[DaemonServer]:
    with git_daemon(root) as daemon:
        yield DaemonServer(root, daemon.port)


@contextmanager
def http_server(root: Path) -> Iterator[HttpServer]:
    """lighttpd serving git http-backend under /git/ with basic auth for USERS, stopped by
    its PID."""
    if LIGHTTPD is None:
        pytest.skip("lighttpd is not installed (apt-get install lighttpd; see .ci/debian-packages)")
    (root / "docroot").mkdir(parents=True)
    (root / "repos").mkdir()
    (root / "htpasswd").write_text(
        "".join(
            f"{user}:{{SHA}}{base64.b64encode(hashlib.sha1(pw.encode()).digest()).decode()}\n"
            for user, pw in USERS.items()
        )
    )
    for _attempt in range(5):
        port = free_port()
        conf = root / "lighttpd.conf"
        conf.write_text(
            LIGHTTPD_CONF.format(port=port, root=root, backend=EXEC_PATH / "git-http-backend")
        )
        log = root / "lighttpd.out"
        with open(log, "wb") as out:
            proc = subprocess.Popen([LIGHTTPD, "-D", "-f", str(conf)], stdout=out, stderr=out)

        def listening(port: int = port) -> bool:
            with socket.socket() as probe:
                return probe.connect_ex(("127.0.0.1", port)) == 0

        if wait_for(listening, proc, log, "lighttpd"):
            break
    else:
        raise AssertionError("lighttpd found no free port")
    try:
        yield HttpServer(root / "repos", port)
    finally:
        stop(proc)


def run_git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """git with the pinned settings, never prompting for a password, not checked."""
    return subprocess.run(
        ["git", "-c", "credential.helper=", *args], cwd=cwd, capture_output=True, text=True,
        check=False, env={**os.environ, **GIT_ENV, "GIT_TERMINAL_PROMPT": "0"},
    )  # fmt: skip


def hash_blob(repo: Path, data: bytes) -> str:
    return subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo, input=data,
                          capture_output=True, check=True).stdout.decode().strip()  # fmt: skip


@dataclass
class AttackWorld:
    tmp: Path
    server: Server
    files: dict[str, str]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    serves: int = 0

    def __post_init__(self) -> None:
        self.canon = make_repo(self.server.root / "canon.git", bare=True)
        self.intake_repo = make_repo(self.server.root / "intake.git", bare=True)
        seed = make_repo(self.tmp / "seed")
        commit_files(seed, self.files, "base")
        git("push", "-q", str(self.canon), "HEAD:refs/heads/main", cwd=seed)
        if self.server.guarded:
            allow = [arg for user in INTEGRATORS for arg in ("--allow", user)]
            for repo in (self.canon, self.intake_repo):
                done = cli("server-hook", "install", "--repo", str(repo), *allow,
                           "--target", "main")  # fmt: skip
                assert done.returncode == 0, done.stderr.decode()

    def url(self, user: str) -> str:
        return self.server.url("canon", user)

    def intake(self, user: str) -> str:
        return self.server.url("intake", user)

    def mirror(self, name: str, user: str, *init: str) -> Path:
        """A host's mirror, prepared with `init --remote` pushing as `user` (idempotent)."""
        path = self.tmp / f"{name}.git"
        done = cli("init", "--repo", str(path), "--remote", self.url(user), *init)
        assert done.returncode == 0, done.stderr.decode()
        return path

    def issue(self, mirror: Path, task: str, paths: list[str], holder: str) -> Path:
        """Issue `task`'s contract to `holder`: the contract file (its key beside it)."""
        out = self.tmp / "contracts" / f"{task}.json"
        out.parent.mkdir(exist_ok=True)
        args = ["contract", "issue", "--repo", str(mirror), "--task", task, "--lease", "2h",
                "--holder", holder, "-o", str(out)]  # fmt: skip
        for p in paths:
            args += ["--path", p]
        done = cli(*args)
        assert done.returncode == 0, done.stderr.decode()
        return out

    def agent(self, user: str, files: dict[str, str]) -> tuple[Path, str]:
        """`user`'s clone of the canonical repository with one commit of `files`."""
        path = self.tmp / "agents" / user
        git("clone", "-q", self.url(user), str(path), cwd=self.tmp)
        return path, commit_files(path, files, f"{user}'s change")

    def submit(self, user: str, agent: Path, contract: Path, *args: str) -> str:
        done = cli("submit", "--intake", self.intake(user), "--contract", str(contract),
                   "--candidate", "HEAD", "--repo", str(agent), *args)  # fmt: skip
        assert done.returncode == 0, done.stderr.decode()
        return done.stdout.decode().split()[-1]

    def status(self, user: str, agent: Path, task: str, sid: str) -> tuple[int, str]:
        """`status --intake` of task/sid read by `user`'s clone: exit code and output."""
        done = cli("status", "--intake", self.intake(user), "--task", task, "--submission",
                   sid, "--repo", str(agent), "--json")  # fmt: skip
        return done.returncode, (done.stdout + done.stderr).decode()

    def serve_once(self, mirror: Path, expect: int = 0) -> str:
        """One `serve --once` round of the host `mirror` (pushing as the integrator user),
        which exits with `expect`: its log."""
        spool = self.tmp / f"spool-{mirror.stem}"
        served = spawn_integrator(
            self.tmp, self.procs, "serve", "--repo", str(mirror), "--spool", str(spool),
            "--intake", self.intake("integrator"), "--poll", "0.2", "--log-format", "json",
            "--once", name=f"serve-{mirror.stem}-{self.serves}",
        )  # fmt: skip
        self.serves += 1
        code = served.proc.wait(120)
        log = served.log.read_text()
        assert code == expect, f"exit {code}: {log}"
        return log

    def refs(self, repo: Path, prefix: str) -> dict[str, str]:
        out = git("for-each-ref", "--format=%(refname) %(objectname)", prefix, cwd=repo)
        return dict(line.split(" ", 1) for line in out.splitlines() if line)

    def landed(self) -> list[str]:
        """Candidates on the server's queue, oldest first (one per staging commit)."""
        out = git("log", "--first-parent", "--reverse",
                  f"--format=%(trailers:key={TRAILER_CANDIDATE},valueonly)", QUEUE,
                  cwd=self.canon)  # fmt: skip
        return [line.strip() for line in out.splitlines() if line.strip()]

    def verdict(self, task: str, sid: str) -> dict[str, Any]:
        ref = f"refs/integrator/verdicts/{task}/{sid}"
        for name in ("verdict.json", "rejection.json"):
            done = run_git(self.intake_repo, "show", f"{ref}:{name}")
            if done.returncode == 0:
                doc: dict[str, Any] = json.loads(done.stdout)
                return doc
        raise AssertionError(f"{ref} holds no verdict")

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()


def push(repo: Path, url: str, *refspecs: str) -> subprocess.CompletedProcess[str]:
    """A forced `git push --porcelain` from `repo` (not checked: the server may refuse)."""
    return run_git(repo, "push", "--porcelain", "--force", url, *refspecs)


def forged_verdict(repo: Path, candidate: str, task: str) -> str:
    """A commit holding an ACCEPTED verdict no daemon wrote (and no verdict.sig)."""
    doc = {"schema": "integrator.verdict.v1", "decision": "ACCEPTED", "violations": [],
           "resources": [], "candidate": candidate, "taskId": task}  # fmt: skip
    blob = hash_blob(repo, json.dumps(doc).encode() + b"\n")
    tree = git("mktree", cwd=repo, input=f"100644 blob {blob}\tverdict.json\n".encode())
    return git("commit-tree", tree, "-m", "forged verdict", cwd=repo)


def forged_claim(repo: Path, url: str, task: str, public: str) -> str:
    """A descendant of `task`'s claim on the server naming the attempt key `public`, made
    live again (its contract unchanged): the commit, in `repo`."""
    ref = f"refs/integrator/claims/{task}"
    git("fetch", "-q", url, f"+{ref}:{ref}", cwd=repo)
    state = json.loads(git("show", f"{ref}:claim.json", cwd=repo))
    state |= {"attemptKey": public, "state": "live", "event": "renew"}
    for gone in ("stagingCommit", "candidate", "reason"):
        state.pop(gone, None)
    contract = git("rev-parse", f"{ref}:contract.json", cwd=repo)
    claim = hash_blob(repo, json.dumps(state, indent=2).encode() + b"\n")
    tree = git("mktree", cwd=repo, input=(f"100644 blob {claim}\tclaim.json\n"
               f"100644 blob {contract}\tcontract.json\n").encode())  # fmt: skip
    return git("commit-tree", tree, "-p", ref, "-m", f"renew: {task}", cwd=repo)
