"""The one git runner: every git process starts in `integrator.plumbing.git`; a git that
hangs is killed and reported as an infrastructure error; git's stderr is quoted bounded."""

from __future__ import annotations

import ast
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from integrator.errors import ConfigurationError, GitError, GitTimeoutError, InfrastructureError
from integrator.plumbing import remote
from integrator.plumbing.git import (
    STDERR_LIMIT,
    git_env,
    last_line,
    open_git,
    run_git,
)
from integrator.plumbing.transaction import classify_failure
from tests.gitutil import make_repo

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "integrator"
RUNNER = "integrator.plumbing.git"

# Modules that start programs other than git, and why. Every git goes through the runner.
NOT_GIT: dict[str, str] = {
    "integrator.promotion.runner": "runs the validation command a head is checked with",
    "integrator.rollout.shadow": "runs the shadow command a rollout compares against",
    "integrator.landing.workers": "starts the Python evaluation worker processes",
    "integrator.serverhook.run": "chains the server's previous pre-receive hook",
    "integrator.demo.stage": "the demo plays a user at a terminal (its git is the user's)",
    "integrator.demo.local": "the demo runs `integrator guard` as an agent's hook would",
    "integrator.demo.remote": "the demo starts a git daemon and integrator daemons",
}

# Ways to start a process without importing subprocess.
_OS_SPAWNS = ("system", "popen", "posix_spawn", "posix_spawnp", "fork", "forkpty")
_OS_PREFIXES = ("exec", "spawn")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _starts_processes(tree: ast.AST) -> list[str]:
    """What in a module can start a process: subprocess imports, os spawns, asyncio's."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0] in ("subprocess", "pty")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in (
            "subprocess",
            "pty",
        ):
            found.append(f"from {node.module} import")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            owner, name = node.value.id, node.attr
            if owner == "os" and (name in _OS_SPAWNS or name.startswith(_OS_PREFIXES)):
                found.append(f"os.{name}")
            if owner == "asyncio" and name.startswith("create_subprocess"):
                found.append(f"asyncio.{name}")
    return found


def _process_starters() -> dict[str, list[str]]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        found = _starts_processes(ast.parse(path.read_text("utf-8")))
        if found:
            out[_module_name(path)] = found
    return out


def test_only_the_runner_starts_git() -> None:
    """No module but the runner imports subprocess, except those that run other programs."""
    starters = _process_starters()
    strays = {m: how for m, how in starters.items() if m != RUNNER and m not in NOT_GIT}
    assert strays == {}, "start git through integrator.plumbing.git (run_git / open_git)"
    assert RUNNER in starters


def test_the_allowlist_has_no_stale_entry() -> None:
    starters = _process_starters()
    assert [m for m in NOT_GIT if m not in starters] == []
    assert all(reason.strip() for reason in NOT_GIT.values())


# --- a real git that hangs: a server that accepts and never answers ------------------------


@pytest.fixture
def silent_url() -> Iterator[str]:
    """A git:// URL whose server accepts the connection and never says a word."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    port = server.getsockname()[1]
    try:
        yield f"git://127.0.0.1:{port}/silent-{os.getpid()}-{port}.git"
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        server.close()


def _gits_naming(text: str) -> list[int]:
    """Live processes whose command line names `text` (Linux /proc)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if text.encode() in cmdline:
            pids.append(int(entry.name))
    return pids


needs_proc = pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs /proc")


@needs_proc
def test_a_hung_git_times_out_and_is_gone(tmp_path: Path, silent_url: str) -> None:
    started = time.monotonic()
    with pytest.raises(GitTimeoutError) as caught:
        run_git(["ls-remote", silent_url], cwd=tmp_path, timeout=1.0)
    assert time.monotonic() - started < 30
    assert isinstance(caught.value, InfrastructureError)  # exit 4: retry
    assert str(caught.value) == "git ls-remote timed out after 1s"
    assert _gits_naming(silent_url) == []  # killed and reaped: not even a zombie


@needs_proc
def test_the_remote_keeps_its_own_timeout_message(
    tmp_path: Path, silent_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    mirror = make_repo(tmp_path / "mirror.git", bare=True)
    monkeypatch.setattr(remote, "PUSH_TIMEOUT", 1.0)
    with pytest.raises(InfrastructureError, match=r"^git ls-remote to the remote timed out$"):
        remote.remote_refs(mirror, silent_url, ["refs/heads/main"])
    assert _gits_naming(silent_url) == []


@needs_proc
def test_a_long_lived_git_is_bounded(tmp_path: Path, silent_url: str) -> None:
    repo = make_repo(tmp_path / "repo")
    batch = open_git(["cat-file", "--batch"], cwd=repo)
    assert batch.wait(0.2) is None  # it waits on its stdin
    assert batch.finish(timeout=10) == 0  # end of input: it exits by itself
    hung = open_git(["ls-remote", silent_url], cwd=repo)
    assert hung.wait(0.5) is None
    assert hung.finish(timeout=0.5) < 0  # closing stdin does not end it: killed
    with pytest.raises(ProcessLookupError):
        os.kill(hung.pid, 0)  # reaped
    assert _gits_naming(silent_url) == []


def test_a_failing_git_quotes_a_bounded_line(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    with pytest.raises(GitError) as caught:
        run_git(["rev-parse", "--verify", "x" * 20_000], cwd=repo)
    message = str(caught.value)
    assert message.startswith("git rev-parse failed: ")
    assert len(message) <= len("git rev-parse failed: ") + STDERR_LIMIT
    proc = run_git(["rev-parse", "--verify", "x" * 20_000], cwd=repo, check=False)
    assert proc.returncode != 0 and len(last_line(proc.stderr)) <= STDERR_LIMIT
    assert last_line(b"first\nsecond\n") == "second"
    assert last_line(b"", "none") == "none"
    long = classify_failure("fatal: " + "y" * 20_000, str(repo))
    assert isinstance(long, GitError) and len(str(long)) < STDERR_LIMIT + 50


def test_the_environment_and_the_folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = make_repo(tmp_path / "repo")
    bare = make_repo(tmp_path / "bare.git", bare=True)
    monkeypatch.setenv("GIT_DIR", str(bare))  # a caller's GIT_DIR never leaks into git
    monkeypatch.delenv("GIT_TERMINAL_PROMPT", raising=False)
    shown = run_git(["rev-parse", "--absolute-git-dir"], cwd=repo).stdout.decode().strip()
    assert Path(shown) == repo / ".git"
    in_bare = run_git(["rev-parse", "--absolute-git-dir"], git_dir=bare).stdout.decode().strip()
    assert Path(in_bare) == bare
    env = run_git(["-c", "alias.env=!env", "env"], cwd=repo, env={"X_RUNNER": "1"}).stdout
    lines = set(env.decode().splitlines())
    assert {"X_RUNNER=1", "LC_ALL=C", "GIT_TERMINAL_PROMPT=0"} <= lines
    assert git_env()["GIT_TERMINAL_PROMPT"] == "0"


def test_git_reads_no_stdin_it_was_not_given(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    proc = run_git(["cat-file", "--batch"], cwd=repo, timeout=30)  # end of input at once
    assert proc.returncode == 0 and proc.stdout == b""
    answer = run_git(["hash-object", "--stdin"], cwd=repo, input=b"hi\n").stdout
    assert answer == b"45b983be36b73c0788dc9cbcb76cbb80fc7bb057\n"


def test_no_git_is_a_configuration_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigurationError, match="git is not installed"):
        run_git(["version"], cwd=tmp_path)
    with pytest.raises(ConfigurationError, match="git is not installed"):
        open_git(["version"], cwd=tmp_path)
