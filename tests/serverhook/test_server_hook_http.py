"""The server hook behind real servers: lighttpd + git http-backend with basic auth (the
pusher is the user the web server authenticated) and git daemon (no authentication: only a
signed push option makes an integrator). Both are bound to 127.0.0.1 and stopped by PID."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from integrator.plumbing.signing import push_option
from tests.gitutil import commit_files, git, make_repo
from tests.gitutil import run_integrator as integrator

USERS = {"agent": "agent-secret", "integrator": "integrator-secret"}
EXEC_PATH = Path(
    subprocess.run(
        ["git", "--exec-path"], capture_output=True, text=True, check=True
    ).stdout.strip()
)
LIGHTTPD = shutil.which("lighttpd") or next(
    (p for p in ("/usr/sbin/lighttpd", "/usr/local/sbin/lighttpd") if os.access(p, os.X_OK)), None
)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for(predicate: object, proc: subprocess.Popen[bytes], log: Path, what: str) -> bool:
    """Poll until `predicate()` holds; False when the process died first (a taken port)."""
    assert callable(predicate)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if predicate():
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.02)
    raise AssertionError(f"{what} did not start: {log.read_text(errors='replace')}")


def stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop a server by its PID and reap it."""
    if proc.poll() is None:
        os.kill(proc.pid, 15)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, 9)
            proc.wait(timeout=10)


def push(
    work: Path,
    url: str,
    *refspecs: str,
    flags: tuple[str, ...] = (),
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`git push --porcelain` from `work`, never prompting for a password."""
    return subprocess.run(
        ["git", "-c", "credential.helper=", "push", "--porcelain", *flags, url, *refspecs],
        cwd=work,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "GIT_TERMINAL_PROMPT": "0", **(env or {})},
    )


@dataclass
class World:
    """A bare server repository (main at `base`), a work repository holding `new`."""

    server: Path
    work: Path
    base: str
    new: str

    def refs(self) -> str:
        return git("for-each-ref", "--format=%(objectname) %(refname)", cwd=self.server)


def leases(world: World) -> tuple[str, ...]:
    """An integrator's push: atomic, with a lease on each ref it moves."""
    return (
        "--atomic",
        f"--force-with-lease=refs/heads/main:{world.base}",
        "--force-with-lease=refs/integrator/claims/x:",
    )


def make_world(root: Path, name: str, *install: str) -> World:
    server = make_repo(root / f"{name}.git", bare=True)
    work = make_repo(root.parent / f"{name}-work")
    base = commit_files(work, {"a.txt": "1\n"}, "one")
    git("push", "-q", str(server), "HEAD:refs/heads/main", cwd=work)
    git("config", "integrator.target", "main", cwd=server)  # what install protects
    new = commit_files(work, {"a.txt": "2\n"}, "two")
    proc = integrator("server-hook", "install", "--repo", str(server), *install, cwd=work)
    assert proc.returncode == 0, proc.stderr
    return World(server, work, base, new)


# --- lighttpd + git http-backend ------------------------------------------------------


@dataclass
class Http:
    port: int
    repos: Path

    def url(self, name: str, user: str | None = None) -> str:
        auth = f"{user}:{USERS[user]}@" if user else ""
        return f"http://{auth}127.0.0.1:{self.port}/git/{name}.git"


LIGHTTPD_CONF = """\
server.bind           = "127.0.0.1"
server.port           = {port}
server.document-root  = "{root}/docroot"
server.errorlog       = "{root}/error.log"
server.modules        = ( "mod_alias", "mod_setenv", "mod_auth", "mod_authn_file", "mod_cgi" )
alias.url = ( "/git/" => "{backend}/" )
$HTTP["url"] =~ "^/git/" {{
  cgi.assign = ( "" => "" )
  setenv.set-environment = ( "GIT_PROJECT_ROOT" => "{root}/repos", "GIT_HTTP_EXPORT_ALL" => "1" )
  auth.backend = "htpasswd"
  auth.backend.htpasswd.userfile = "{root}/htpasswd"
  auth.require = ( "" => ( "method" => "basic", "realm" => "git", "require" => "valid-user" ) )
}}
"""


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Http]:
    """lighttpd serving git http-backend with basic auth for `agent` and `integrator`."""
    if LIGHTTPD is None:
        pytest.skip("lighttpd is not installed (apt-get install lighttpd; see .ci/debian-packages)")
    root = tmp_path_factory.mktemp("http")
    (root / "docroot").mkdir()
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
        subprocess.run([LIGHTTPD, "-tt", "-f", str(conf)], check=True, capture_output=True)
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
        yield Http(port, root / "repos")
    finally:
        stop(proc)


def test_agent_cannot_push_claims_or_main(http: Http) -> None:
    """The agent's pushes to refs/integrator/claims/x and to main are refused with the hook's
    lines naming the agent, and the server's refs do not change."""
    world = make_world(http.repos, "refuse", "--allow", "integrator")
    before = world.refs()
    for ref in ("refs/integrator/claims/x", "refs/heads/main"):
        proc = push(world.work, http.url("refuse", "agent"), f"{world.new}:{ref}")
        assert proc.returncode == 1, proc
        assert "[remote rejected] (pre-receive hook declined)" in proc.stdout
        assert f"remote: integrator: refused {ref}: only integrators may" in proc.stderr
        assert "pusher 'agent' (REMOTE_USER) is not in integrator.hook.allow" in proc.stderr
    assert world.refs() == before


def _submission_commit(work: Path, task: str, holder: str) -> str:
    """A submission commit as `integrator submit` pushes one (only what the hook reads)."""
    document = f'{{"contract": {{"taskId": "{task}", "lease": {{"holder": "{holder}"}}}}}}\n'
    blob = git("hash-object", "-w", "--stdin", cwd=work, input=document.encode())
    tree = git("mktree", cwd=work, input=f"100644 blob {blob}\tsubmission.json\n".encode())
    return git("commit-tree", tree, "-m", f"submission of {task}", cwd=work)


def test_agent_submits_and_pushes_its_own_branch(http: Http) -> None:
    """The agent's submission ref and its own branch land in one push: the server
    authenticated the pusher as `agent`, the holder of the submission's lease."""
    world = make_world(http.repos, "agent", "--allow", "integrator")
    submit, branch = (
        "refs/integrator/submit/task/20260101T000000000000Z-0123abcd",
        "refs/heads/agent/task",
    )
    mine = _submission_commit(world.work, "task", "agent")
    proc = push(world.work, http.url("agent", "agent"), f"{mine}:{submit}", f"{world.new}:{branch}")
    assert proc.returncode == 0, proc.stderr
    assert f"{mine} {submit}" in world.refs() and f"{world.new} {branch}" in world.refs()


@pytest.mark.parametrize(
    ("task", "holder", "why"),
    [
        ("task", "victim", "does not hold the contract's lease"),  # another agent's contract
        ("other", "agent", "not of the task its ref names"),  # its own, under another task
        (None, None, "cannot be read"),  # no submission.json at all
    ],
)
def test_only_the_lease_holder_may_submit_under_a_contract(
    http: Http, task: str | None, holder: str | None, why: str
) -> None:
    """Through http-backend with basic auth: a pusher the server authenticated may create a
    submission ref only for a contract whose lease it holds, under that contract's task."""
    name = f"holder-{task}-{holder}"
    world = make_world(http.repos, name, "--allow", "integrator")
    ref = "refs/integrator/submit/task/20260101T000000000000Z-0123abcd"
    commit = world.new if task is None else _submission_commit(world.work, task, str(holder))
    proc = push(world.work, http.url(name, "agent"), f"{commit}:{ref}")
    assert proc.returncode != 0
    assert why in proc.stderr, proc.stderr
    assert ref not in world.refs()


def test_integrator_moves_claims_and_main(http: Http) -> None:
    """The integrator's atomic, leased push of a claim and main is accepted."""
    world = make_world(http.repos, "integrate", "--allow", "integrator")
    proc = push(
        world.work,
        http.url("integrate", "integrator"),
        f"{world.new}:refs/heads/main",
        f"{world.new}:refs/integrator/claims/x",
        flags=leases(world),
    )
    assert proc.returncode == 0, proc.stderr
    assert world.refs() == f"{world.new} refs/heads/main\n{world.new} refs/integrator/claims/x"


def test_headers_cannot_name_the_pusher(http: Http) -> None:
    """Request headers reach the hook only as HTTP_* variables, never as REMOTE_USER or
    GL_USER: an agent sending `Remote-User: integrator` is still the agent."""
    world = make_world(http.repos, "headers", "--allow", "integrator")
    log = world.server.parent / "headers-env.log"
    chained = world.server / "hooks" / "pre-receive.chained"
    chained.write_text(f"#!/bin/sh\nenv > {log}\n")
    chained.chmod(0o755)
    assert (
        integrator("server-hook", "install", "--repo", str(world.server), cwd=world.work).returncode
        == 0
    )
    headers = {
        "GIT_CONFIG_COUNT": "2",
        "GIT_CONFIG_KEY_0": "http.extraHeader",
        "GIT_CONFIG_VALUE_0": "Remote-User: integrator",
        "GIT_CONFIG_KEY_1": "http.extraHeader",
        "GIT_CONFIG_VALUE_1": "GL-User: integrator",
    }
    url = http.url("headers", "agent")
    assert push(world.work, url, f"{world.new}:refs/heads/agent/x", env=headers).returncode == 0
    seen = set(log.read_text().splitlines())
    assert {"REMOTE_USER=agent", "HTTP_REMOTE_USER=integrator", "HTTP_GL_USER=integrator"} <= seen
    assert not any(line.startswith("GL_USER=") for line in seen)
    refused = push(world.work, url, f"{world.new}:refs/heads/main", env=headers)
    assert refused.returncode == 1 and "pusher 'agent' (REMOTE_USER)" in refused.stderr


def test_unauthenticated_pushes_get_401(http: Http) -> None:
    """Without credentials the web server answers 401 and git gives up before sending."""
    world = make_world(http.repos, "anonymous", "--allow", "integrator")
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(
            http.url("anonymous") + "/info/refs?service=git-receive-pack", timeout=10
        )
    assert caught.value.code == 401
    before = world.refs()
    proc = push(world.work, http.url("anonymous"), f"{world.new}:refs/heads/agent/x")
    assert proc.returncode == 128 and "could not read Username" in proc.stderr
    assert world.refs() == before


# --- git daemon: no authentication, signed pushes -------------------------------------


@dataclass
class Daemon:
    port: int
    root: Path

    def url(self, name: str) -> str:
        return f"git://127.0.0.1:{self.port}/{name}.git"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    """`git daemon --enable=receive-pack` in the foreground, ready once it logs so."""
    root = tmp_path_factory.mktemp("daemon") / "repos"
    root.mkdir()
    for _attempt in range(5):
        port = free_port()
        log = root.parent / "daemon.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [
                    str(EXEC_PATH / "git-daemon"),
                    "--reuseaddr",
                    "--informative-errors",
                    "--verbose",
                    "--enable=receive-pack",
                    "--export-all",
                    f"--base-path={root}",
                    "--listen=127.0.0.1",
                    f"--port={port}",
                ],
                stdout=out,
                stderr=out,
            )
        if wait_for(
            lambda log=log: b"Ready to rumble" in log.read_bytes(), proc, log, "git daemon"
        ):
            break
    else:
        raise AssertionError("git daemon found no free port")
    try:
        yield Daemon(port, root)
    finally:
        stop(proc)


@pytest.fixture
def signed_world(
    daemon: Daemon, tmp_path: Path, request: pytest.FixtureRequest
) -> tuple[World, bytes]:
    key_file = tmp_path / "key"
    assert integrator("server-hook", "keygen", "-o", str(key_file), cwd=tmp_path).returncode == 0
    world = make_world(daemon.root, request.node.name, "--key-file", str(key_file))
    return world, key_file.read_bytes().strip()


def signed_push(world: World, url: str, option: str) -> subprocess.CompletedProcess[str]:
    return push(
        world.work,
        url,
        f"{world.new}:refs/heads/main",
        f"{world.new}:refs/integrator/claims/x",
        flags=("-o", option, *leases(world)),
    )


def updates(world: World) -> list[tuple[str, str, str]]:
    return [
        (world.base, world.new, "refs/heads/main"),
        ("0" * 40, world.new, "refs/integrator/claims/x"),
    ]


def test_anonymous_pushes_touch_only_agent_refs(
    daemon: Daemon, signed_world: tuple[World, bytes]
) -> None:
    """Over git daemon anyone may push a branch or a submission, but not main."""
    world, _key = signed_world
    url = daemon.url(world.server.stem)
    assert push(world.work, url, f"{world.new}:refs/heads/agent/x").returncode == 0
    refused = push(world.work, url, f"{world.new}:refs/heads/main")
    assert refused.returncode == 1 and "the pusher is not authenticated" in refused.stderr


def test_a_signed_push_may_move_authority_refs_once(
    daemon: Daemon, signed_world: tuple[World, bytes]
) -> None:
    """A push carrying a valid integrator-hmac option lands; the same option replayed onto
    the same server state is refused, and nothing moves."""
    world, key = signed_world
    url = daemon.url(world.server.stem)
    option = push_option(key, updates(world))
    landed = signed_push(world, url, option)
    assert landed.returncode == 0, landed.stderr
    assert world.refs() == f"{world.new} refs/heads/main\n{world.new} refs/integrator/claims/x"
    # Put the server back (directly, as an operator would, skipping hooks) and replay.
    git("update-ref", "refs/heads/main", world.base, cwd=world.server)
    git("update-ref", "-d", "refs/integrator/claims/x", cwd=world.server)
    before = world.refs()
    replayed = signed_push(world, url, option)
    assert replayed.returncode == 1
    assert "the signature was used before (a replay)" in replayed.stderr
    assert world.refs() == before


def test_tampered_and_stale_signatures_are_refused(
    daemon: Daemon, signed_world: tuple[World, bytes]
) -> None:
    """An option signed for other updates, with another key, or too long ago lets nothing through."""
    world, key = signed_world
    url = daemon.url(world.server.stem)
    before = world.refs()
    other = commit_files(world.work, {"a.txt": "3\n"}, "three")
    cases = {
        "does not match the pushed updates": push_option(
            key,
            [
                (world.base, other, "refs/heads/main"),
                ("0" * 40, world.new, "refs/integrator/claims/x"),
            ],
        ),
        "does not match": push_option(b"another key of thirty-two bytes!", updates(world)),
        "s old (limit 300 s)": push_option(key, updates(world), now=int(time.time()) - 1000),
    }
    for expected, option in cases.items():
        proc = signed_push(world, url, option)
        assert proc.returncode == 1 and expected in proc.stderr, (expected, proc.stderr)
    assert world.refs() == before
