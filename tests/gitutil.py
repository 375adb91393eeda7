"""Small helpers that build real git repositories for tests (no mocks of git)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_NAME": "Test Committer",
    "GIT_COMMITTER_EMAIL": "committer@example.invalid",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "LC_ALL": "C",
}

# A file's content, or a (content, mode) pair: mode "x" executable, "l" symlink,
# "g" gitlink (content is the submodule commit id). None deletes the path.
Spec = str | bytes | tuple[str | bytes, str] | None


def git(*args: str, cwd: str | Path, input: bytes | None = None) -> str:
    env = {**os.environ, **GIT_ENV}
    proc = subprocess.run(
        ["git", *args], cwd=cwd, input=input, capture_output=True, env=env, check=False
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"git {' '.join(args)} failed ({proc.returncode}): {proc.stderr.decode()}"
        )
    return proc.stdout.decode("utf-8", "surrogateescape").strip()


def make_repo(path: Path, *, bare: bool = False, branch: str = "main") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git("init", "-q", "-b", branch, *(["--bare"] if bare else []), str(path), cwd=path)
    return path


def declare_bare(path: Path) -> Path:
    """Declare the repository at `path` bare (`core.bare=true`; its folder stays `.git`).

    The fixtures write commits with a private index (`commit_files`) and never check
    anything out: as a non-bare repository with HEAD on main, such a repository is a
    checkout whose index and files stay behind every landing, which `integrator init`
    refuses. Declared bare, it is what it always was used as.
    """
    git("config", "core.bare", "true", cwd=path)
    return path


def commit_files(  # noqa: PLR0912 — one branch per kind of entry a test writes
    repo: Path,
    files: Mapping[str, Spec],
    message: str = "change",
    *,
    parent: str | None = "HEAD",
    ref: str | None = "HEAD",
) -> str:
    """Create a commit on top of `parent` applying `files`, without touching a work tree.

    Uses a private index so it works in bare repositories and never disturbs checkouts.
    Returns the new commit id; moves `ref` to it unless `ref` is None.
    """
    index = repo / ".test-index" if (repo / ".git").exists() else repo / "test-index"
    env_index = {"GIT_INDEX_FILE": str(index)}
    env = {**os.environ, **GIT_ENV, **env_index}

    def run(*args: str, input: bytes | None = None) -> str:
        proc = subprocess.run(
            ["git", *args], cwd=repo, input=input, capture_output=True, env=env, check=False
        )
        if proc.returncode != 0:
            raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr.decode()}")
        return proc.stdout.decode().strip()

    parent_oid = None
    if parent is not None:
        probe = subprocess.run(
            ["git", "rev-parse", "--verify", "-q", f"{parent}^{{commit}}"],
            cwd=repo,
            capture_output=True,
            env=env,
            check=False,
        )
        if probe.returncode == 0:
            parent_oid = probe.stdout.decode().strip()
    if parent_oid:
        run("read-tree", parent_oid)
    else:
        run("read-tree", "--empty")
    for path, spec in files.items():
        if spec is None:  # mode 0 removes it (--force-remove would need a work tree)
            run("update-index", "--index-info", input=f"0 {'0' * 40}\t{path}\n".encode())
            continue
        mode = "100644"
        content: str | bytes
        if isinstance(spec, tuple):
            content, kind = spec
            mode = {"x": "100755", "l": "120000", "g": "160000", "f": "100644"}[kind]
        else:
            content = spec
        if mode == "160000":
            oid = content.decode() if isinstance(content, bytes) else content
        else:
            data = content.encode() if isinstance(content, str) else content
            oid = run("hash-object", "-w", "--stdin", input=data)
        run("update-index", "--add", "--cacheinfo", f"{mode},{oid},{path}")
    tree = run("write-tree")
    args = ["commit-tree", tree, "-m", message]
    if parent_oid:
        args[2:2] = ["-p", parent_oid]
    commit = run(*args)
    if ref is not None:
        if ref == "HEAD":
            run("update-ref", "HEAD", commit)
        else:
            run("update-ref", ref, commit)
    index.unlink(missing_ok=True)
    return commit


def run_integrator_raw(
    *args: str,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
    stdin: bytes = b"",
    timeout: float = 300,
) -> subprocess.CompletedProcess[bytes]:
    """Run the `integrator` CLI as a process (`python -m integrator`, no check): the one way
    tests run it. Its environment is this one with the pinned git settings and `env` on top,
    or exactly `environ`; its stdin is `stdin` (empty by default, never the test runner's)."""
    return subprocess.run(
        [sys.executable, "-m", "integrator", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        check=False,
        env=dict(environ) if environ is not None else {**os.environ, **GIT_ENV, **(env or {})},
        timeout=timeout,
    )


def run_integrator(
    *args: str,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
    stdin: bytes = b"",
    timeout: float = 300,
    errors: str = "strict",
) -> subprocess.CompletedProcess[str]:
    """`run_integrator_raw` with its output decoded as UTF-8 (`errors` as for bytes.decode)."""
    done = run_integrator_raw(
        *args, cwd=cwd, env=env, environ=environ, stdin=stdin, timeout=timeout
    )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode("utf-8", errors),
        done.stderr.decode("utf-8", errors),
    )  # fmt: skip
