"""mergetrain, the closest Python peer, landing the same agent branches as integrator.

mergetrain is installed from PyPI into its own virtual environment under the output
folder, pinned so figures compare across releases. It is driven without a terminal the
way its MCP server does it: `deploy --json` validates the queued train and returns the
exact plan with its `deploy_plan_sha` (the interactive `[y/N]` prompt is skipped with
`--json`), then `deploy --json --expected-plan <sha>` pushes that plan. Its enqueue
refuses a branch that is not checked out in a clean live worktree, so each agent branch
gets a worktree first; those are sparse (root files only, sparse index) because the
agents' checkouts exist before landing starts and are set-up, not landing work.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.workload import CandidateSet, Workload
from integrator.plumbing import git

MERGETRAIN = "mergetrain==3.7.1"
CONFIG = "version: 2\n\nproject:\n  name: bench\n\ngates: []\n"


@dataclass(frozen=True)
class PeerRun:
    """Wall time to land `branches` agent branches, or why it could not be measured."""

    branches: int
    wall_s: float | None
    enqueue_s: float | None = None
    deploy_s: float | None = None
    tree: str | None = None
    note: str = ""


def _run(args: list[str], cwd: Path, *, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args,
        cwd=cwd,
        capture_output=True,
        text=True,
        env=git.git_env(),
        timeout=timeout,
        check=False,
    )


def _must(args: list[str], cwd: Path) -> str:
    proc = _run(args, cwd)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args[:3])} failed: {(proc.stderr or proc.stdout)[-400:]}")
    return proc.stdout


def ensure_venv(root: Path) -> tuple[Path | None, str]:
    """`root/mergetrain-venv/bin/mergetrain`, installed when missing; or (None, why not)."""
    venv = root / "mergetrain-venv"
    exe = venv / "bin" / "mergetrain"
    if exe.exists():
        return exe, "reused"
    made = _run([sys.executable, "-m", "venv", str(venv)], root)
    if made.returncode != 0:
        return None, f"python -m venv failed: {made.stderr.strip()[-300:]}"
    pip = _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", MERGETRAIN], root)
    if pip.returncode != 0 or not exe.exists():
        return None, f"pip install {MERGETRAIN} failed: {pip.stderr.strip()[-300:]}"
    return exe, "installed"


def _agent_worktree(repo: Path, path: Path, branch: str) -> None:
    """A clean worktree of `branch` holding only the root files (mergetrain's enqueue check)."""
    _must(["git", "worktree", "add", "-q", "--no-checkout", str(path), branch], repo)
    _must(["git", "sparse-checkout", "set", "--cone", "--sparse-index"], path)
    _must(["git", "read-tree", "-mu", "HEAD"], path)


def setup(workload: Workload, candidates: CandidateSet, count: int, root: Path) -> Path:
    """A working clone with mergetrain initialised, a bare remote, and `count` agent branches."""
    remote, repo = root / "remote.git", root / "repo"
    _must(["git", "clone", "-q", "--bare", str(workload.path), str(remote)], root)
    _must(["git", "clone", "-q", str(remote), str(repo)], root)
    for key, value in (("user.name", "bench"), ("user.email", "bench@localhost")):
        _must(["git", "config", key, value], repo)
    (repo / ".mergetrain.yaml").write_text(CONFIG)
    _must(["git", "add", ".mergetrain.yaml"], repo)
    _must(["git", "commit", "-q", "-m", "mergetrain configuration"], repo)
    _must(["git", "push", "-q", "origin", "main"], repo)
    specs = [f"{oid}:refs/heads/agent/{i:04d}" for i, oid in enumerate(candidates.oids[:count])]
    _must(["git", "fetch", "-q", str(workload.path), *specs], repo)
    for i in range(count):
        _agent_worktree(repo, root / "agents" / f"{i:04d}", f"agent/{i:04d}")
    return repo


def land(exe: Path, repo: Path, count: int) -> PeerRun:
    """Enqueue `count` agent branches, validate the train, and push it; timed as a whole."""
    started = time.perf_counter()
    for i in range(count):
        out = _run(
            [
                str(exe),
                "enqueue",
                "--task",
                f"bench-{i:04d}",
                "--branch",
                f"agent/{i:04d}",
                "--json",
            ],
            repo,
        )
        if out.returncode != 0:
            return PeerRun(count, None, note=f"enqueue {i} failed: {out.stdout[-300:]}")
    enqueued = time.perf_counter()
    preview = _run([str(exe), "deploy", "--json"], repo)
    try:
        plan = json.loads(preview.stdout)
    except ValueError:
        return PeerRun(count, None, note=f"deploy --json printed no JSON: {preview.stderr[-300:]}")
    sha = plan.get("deploy_plan_sha")
    if plan.get("result") != "confirmation_required" or not sha:
        return PeerRun(
            count, None, note=f"validation did not produce a plan: {preview.stdout[-400:]}"
        )
    pushed = _run([str(exe), "deploy", "--json", "--expected-plan", str(sha)], repo)
    done = time.perf_counter()
    try:
        result = json.loads(pushed.stdout)
    except ValueError:
        result = {}
    if result.get("result") != "success":
        return PeerRun(count, None, note=f"deploy did not succeed: {pushed.stdout[-400:]}")
    remote = repo.parent / "remote.git"
    tree = _must(["git", "rev-parse", "main^{tree}"], remote).strip()
    return PeerRun(
        count,
        done - started,
        enqueue_s=enqueued - started,
        deploy_s=done - enqueued,
        tree=tree,
        note=f"{MERGETRAIN}, batch mode, gates: [], atomic push to a local bare remote",
    )


def differing_paths(remote: Path, theirs_tree: str, ours_repo: Path, ours_ref: str) -> list[str]:
    """Paths where mergetrain's final tree and integrator's differ, beyond mergetrain's config."""
    _must(["git", "fetch", "-q", str(ours_repo), f"+{ours_ref}:refs/bench/integrator"], remote)
    out = _must(
        ["git", "diff-tree", "-r", "--name-only", theirs_tree, "refs/bench/integrator^{tree}"],
        remote,
    )
    return [p for p in out.splitlines() if p and p != ".mergetrain.yaml"]
