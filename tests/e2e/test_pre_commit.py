"""The pre-commit framework runs integrator's commit-time check: the real `pre-commit`
(tests/e2e/install-ci-tools.sh, pinned) installs this project's .pre-commit-hooks.yaml at
HEAD into a generated repository whose worktree holds the contract of task CODE (src/**),
then refuses a commit that stages a path outside it and accepts one inside.

`integrator-guard` builds integrator into pre-commit's own environment (pip, from this
project's commit); `integrator-guard-system` runs the integrator on PATH."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from integrator.fleet.assignments import Fleet
from integrator.fleet.taskqueue import Queue
from tests.e2e import ci_tools
from tests.gitutil import GIT_ENV, commit_files, git, make_repo

pytestmark = pytest.mark.e2e

# pre-commit's environments, kept between runs (keyed by repository and rev).
HOME = ci_tools.TOOLS / "pre-commit-home"
# pip's words for a package index it could not reach or that lacks a pin.
UNREACHABLE = (
    "No matching distribution found",
    "Could not find a version that satisfies",
    "NewConnectionError",
    "Temporary failure in name resolution",
    "Network is unreachable",
    "ConnectTimeoutError",
    "ReadTimeoutError",
)


def bound_worktree(folder: Path, hook: str, rev: str) -> Path:
    """A repository with a committed .pre-commit-config.yaml naming `hook` of this project
    at `rev`, and the worktree of agent alice bound to task CODE (owns src/**)."""
    config = f"repos:\n  - repo: {ci_tools.ROOT}\n    rev: {rev}\n    hooks:\n      - id: {hook}\n"
    repo = make_repo(folder / "repo")
    commit_files(
        repo,
        {"src/a.py": "a\n", "docs/x.md": "x\n", ".pre-commit-config.yaml": config},
        "init",
    )
    git("reset", "-q", "--hard", cwd=repo)
    Queue.find(repo).init()
    (repo / ".agents" / "workspaces.toml").write_text('[agents.alice]\nworkspace = "alice"\n')
    Queue.find(repo).add("---\nid: CODE\nowns: [src/**]\nrequires_filesystem: true\n---\n# Code\n")
    assignment = Fleet(repo).claim("alice").assignment
    assert assignment is not None and assignment.worktree is not None
    return assignment.worktree


def environment(path_first: Path | None) -> dict[str, str]:
    env = {**os.environ, **GIT_ENV, "PRE_COMMIT_HOME": str(HOME)}
    env.pop("PRE_COMMIT", None)
    env.pop("SKIP", None)
    if path_first is not None:
        env["PATH"] = f"{path_first}{os.pathsep}{env['PATH']}"
    return env


def commit(worktree: Path, env: dict[str, str], message: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "commit", "-qm", message],
        cwd=worktree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )


@pytest.mark.parametrize("hook", ["integrator-guard", "integrator-guard-system"])
def test_pre_commit_refuses_a_commit_outside_the_contract(tmp_path: Path, hook: str) -> None:
    reason = ci_tools.missing("python", ci_tools.PRE_COMMIT)
    rev, why = ci_tools.head()
    if reason or rev is None:
        pytest.skip(reason or why)
    worktree = bound_worktree(tmp_path, hook, rev)
    # The system hook finds the integrator of this environment first on PATH.
    env = environment(Path(sys.executable).parent if hook.endswith("-system") else None)
    installed = subprocess.run(
        [str(ci_tools.PRE_COMMIT), "install"],
        cwd=worktree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    # Build the hook's environment now (pip, from the package index, for integrator-guard):
    # a package index that cannot be reached skips; any other failure is the hook's.
    built = subprocess.run(
        [str(ci_tools.PRE_COMMIT), "install-hooks"],
        cwd=worktree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    if built.returncode != 0:
        log = HOME / "pre-commit.log"
        text = built.stdout + built.stderr + (log.read_text() if log.is_file() else "")
        if any(sign in text for sign in UNREACHABLE):
            pytest.skip(f"pre-commit could not fetch {hook}'s dependencies: {text[-800:]}")
        raise AssertionError(text)
    hook_file = Path(
        git("rev-parse", "--path-format=absolute", "--git-path", "hooks", cwd=worktree)
    )
    assert "pre-commit" in (hook_file / "pre-commit").read_text()

    before = git("rev-parse", "HEAD", cwd=worktree)
    (worktree / "docs/x.md").write_text("changed outside the contract\n")
    (worktree / "src/a.py").write_text("owned change\n")
    git("add", "docs/x.md", "src/a.py", cwd=worktree)
    refused = commit(worktree, env, "sneak")
    output = refused.stdout + refused.stderr
    assert refused.returncode != 0, output
    assert "docs/x.md" in output and "Failed" in output, output
    assert git("rev-parse", "HEAD", cwd=worktree) == before

    # Deleting an unowned path is outside too (pre-commit passes no names for deletions;
    # the hook checks the index itself).
    git("reset", "-q", "--hard", cwd=worktree)
    git("rm", "-q", "docs/x.md", cwd=worktree)
    refused = commit(worktree, env, "delete")
    assert refused.returncode != 0 and "docs/x.md" in refused.stdout + refused.stderr
    assert git("rev-parse", "HEAD", cwd=worktree) == before

    git("reset", "-q", "--hard", cwd=worktree)
    (worktree / "src/a.py").write_text("owned change\n")
    (worktree / "src/b.py").write_text("new owned file\n")
    git("add", "src", cwd=worktree)
    accepted = commit(worktree, env, "owned")
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    assert git("log", "-1", "--format=%s", cwd=worktree) == "owned"
    assert git("show", "--name-only", "--format=", "HEAD", cwd=worktree).split() == [
        "src/a.py",
        "src/b.py",
    ]
    # Drop the environments of revs no configuration uses any more (earlier HEADs).
    subprocess.run([str(ci_tools.PRE_COMMIT), "gc"], env=env, capture_output=True, check=False)
