"""Shared-checkout fleets: in-place claims, owned-path commits under one lock, the guard."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from integrator.clock import utcnow
from integrator.documents.policy import default_policy
from integrator.fleet import guard
from integrator.fleet.assignments import Fleet
from integrator.fleet.taskqueue import Queue
from tests.factories import task_file
from tests.gitutil import commit_files, git, make_repo


@pytest.fixture
def shared(tmp_path: Path) -> Path:
    """One checkout, tasks A (src/a/**) and B (src/b/**) claimed in place, both edited."""
    repo = make_repo(tmp_path / "repo")
    commit_files(repo, {"src/a/old.py": "old\n", "src/b/y.py": "y\n", "docs/x.md": "x\n"}, "init")
    git("reset", "-q", "--hard", cwd=repo)
    queue = Queue.find(repo)
    queue.add(task_file("A", ["src/a/**"]))
    queue.add(task_file("B", ["src/b/**"]))
    fleet = Fleet(repo)
    for agent in ("agent-a", "agent-b"):
        outcome = fleet.claim(agent, in_place=True)
        assert outcome.assignment is not None and outcome.assignment.lock_mode == "paths"
        assert outcome.assignment.contract is not None
        assert outcome.assignment.contract.worktree_id is None
    (repo / "src/a/new.py").write_text("new\n")
    (repo / "src/a/old.py").unlink()
    (repo / "src/b/y.py").write_text("changed\n")
    (repo / "docs/x.md").write_text("stray edit\n")
    return repo


def commit(repo: Path, task: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "integrator", "commit", "--task", task, "--json", *extra],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )


def files_of(repo: Path, rev: str = "HEAD") -> list[str]:
    return sorted(git("show", "--name-only", "--format=", rev, cwd=repo).split())


def test_commit_takes_only_the_tasks_owned_paths(shared: Path) -> None:
    """Task A's commit holds its new file and its deletion, nothing of B or docs/."""
    out = commit(shared, "A", "-m", "A: rework")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert sorted(doc["paths"]) == ["src/a/new.py", "src/a/old.py"]
    assert files_of(shared) == ["src/a/new.py", "src/a/old.py"]
    assert "Task: A" in git("log", "-1", "--format=%B", cwd=shared)
    status = git("status", "--porcelain", "--untracked-files=no", cwd=shared).splitlines()
    assert sorted(line.strip() for line in status) == ["M docs/x.md", "M src/b/y.py"]


def test_commit_refuses_when_unowned_changes_are_staged(shared: Path) -> None:
    """Something staged that task A does not own makes `commit --task A` refuse, exit 1."""
    head = git("rev-parse", "HEAD", cwd=shared)
    git("add", "src/b/y.py", cwd=shared)
    out = commit(shared, "A")
    assert out.returncode == 1
    assert "src/b/y.py" in out.stderr and "git restore --staged" in out.stderr
    assert git("rev-parse", "HEAD", cwd=shared) == head


def test_concurrent_commits_are_serialised_and_keep_their_paths(shared: Path) -> None:
    """Two agents committing at once both succeed, each commit holding only its task."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "integrator", "commit", "--task", task, "--json"],
            cwd=shared,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for task in ("A", "B")
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    commits = {
        git("log", "-1", "--format=%(trailers:key=Task,valueonly)", rev, cwd=shared).strip(): rev
        for rev in ("HEAD", "HEAD~1")
    }
    assert files_of(shared, commits["A"]) == ["src/a/new.py", "src/a/old.py"]
    assert files_of(shared, commits["B"]) == ["src/b/y.py"]
    assert git("status", "--porcelain", "--untracked-files=no", cwd=shared) == "M docs/x.md"


def test_nothing_to_commit_is_not_an_error(shared: Path) -> None:
    """A task with no changes of its own commits nothing and exits 0."""
    assert commit(shared, "A").returncode == 0
    again = commit(shared, "A")
    assert again.returncode == 0 and json.loads(again.stdout)["commit"] is None


def test_claimed_task_file_supplies_ownership_without_a_contract(tmp_path: Path) -> None:
    """With no live claim, the claimed task file's write set decides what is committed."""
    repo = make_repo(tmp_path / "repo")
    commit_files(repo, {"README.md": "r\n"}, "init")
    git("reset", "-q", "--hard", cwd=repo)
    queue = Queue.find(repo)
    queue.add(task_file("C", ["lib/**"]))
    assert queue.claim("someone", default_policy()) is not None
    (repo / "lib").mkdir()
    (repo / "lib/z.py").write_text("z\n")
    (repo / "README.md").write_text("not C's\n")
    out = commit(repo, "C")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["ownedBy"] == "task file C@someone.md"
    assert files_of(repo) == ["lib/z.py"]


def test_unknown_task_is_a_usage_error(shared: Path) -> None:
    """Committing for a task that is neither claimed nor contracted exits 2."""
    out = commit(shared, "NOPE")
    assert out.returncode == 2 and "claim it first" in out.stderr


def test_guard_in_a_shared_checkout_follows_integrator_task(shared: Path) -> None:
    """$INTEGRATOR_TASK selects the in-place contract: A may write src/a, not src/b."""
    inside = guard.evaluate(["src/a/z.py"], shared, utcnow(), in_place_task="A")
    outside = guard.evaluate(["src/b/y.py"], shared, utcnow(), in_place_task="A")
    nobody = guard.evaluate(["src/a/z.py"], shared, utcnow())
    assert inside.allowed and not outside.allowed and not nobody.allowed
    event = json.dumps(
        {
            "hook_event_name": "PreToolUse",
            "tool_name": "Write",
            "tool_input": {"file_path": str(shared / "src/b/y.py"), "content": ""},
            "cwd": str(shared),
        }
    )
    proc = subprocess.run(
        [sys.executable, "-m", "integrator", "guard"],
        input=event,
        cwd=shared,
        capture_output=True,
        text=True,
        env={**os.environ, "INTEGRATOR_TASK": "A"},
        check=False,
    )
    reason = json.loads(proc.stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    assert "src/b/y.py" in reason and "task A" in reason


@pytest.fixture
def gated(tmp_path: Path) -> tuple[Path, dict[str, Path]]:
    """A checkout prepared with `integrator init`: tasks A and B claimed in place, both
    edited, contracts written to files."""
    from integrator.records.prepare import prepare

    repo = make_repo(tmp_path / "repo")
    commit_files(repo, {"src/a/old.py": "old\n", "src/b/y.py": "y\n", "docs/x.md": "x\n"}, "init")
    git("reset", "-q", "--hard", cwd=repo)
    prepare(repo, update_checkout=True)  # a fleet's main checkout, on main
    queue = Queue.find(repo)
    queue.add(task_file("A", ["src/a/**"]))
    queue.add(task_file("B", ["src/b/**"]))
    contracts: dict[str, Path] = {}
    for agent in ("agent-a", "agent-b"):
        outcome = Fleet(repo).claim(agent, in_place=True)
        assert outcome.assignment is not None and outcome.assignment.contract is not None
        contract = outcome.assignment.contract
        contracts[contract.task_id] = tmp_path / f"{contract.task_id}.json"
        contracts[contract.task_id].write_text(contract.to_json())
    (repo / "src/a/new.py").write_text("new\n")
    (repo / "src/a/old.py").unlink()
    (repo / "src/b/y.py").write_text("changed\n")
    (repo / "docs/x.md").write_text("stray edit\n")
    return repo, contracts


def test_gated_commit_is_a_candidate_on_the_contract_base(
    gated: tuple[Path, dict[str, Path]],
) -> None:
    """With a queue, `commit` moves no ref and leaves HEAD and the index alone: it makes a
    candidate whose parent is the contract's base and whose change is the task's only."""
    repo, contracts = gated
    refs = git("for-each-ref", cwd=repo)
    head = git("rev-parse", "HEAD", cwd=repo)
    out = commit(repo, "A", "-m", "A: rework")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    base = json.loads(contracts["A"].read_text())["baseCommit"]
    assert doc["base"] == base
    assert git("rev-parse", f"{doc['commit']}^", cwd=repo) == base
    assert sorted(doc["paths"]) == ["src/a/new.py", "src/a/old.py"]
    changed = git("diff", "--name-status", base, doc["commit"], cwd=repo).splitlines()
    assert sorted(changed) == ["A\tsrc/a/new.py", "D\tsrc/a/old.py"]
    assert "Task: A" in git("log", "-1", "--format=%B", doc["commit"], cwd=repo)
    assert git("for-each-ref", cwd=repo) == refs
    assert git("rev-parse", "HEAD", cwd=repo) == head
    assert git("diff", "--cached", "--name-only", cwd=repo) == ""
    assert sorted(doc["leftAlone"]) == ["docs/x.md", "src/b/y.py"]


def test_gated_commits_of_two_tasks_both_land(gated: tuple[Path, dict[str, Path]]) -> None:
    """Each task's candidate holds its own change only, so both pass the gate and land in
    either order; the canonical branch moves only through the queue, and the shared
    checkout (on main, kept in step) follows it without losing the edit nobody landed."""
    from tests.gitutil import run_integrator

    repo, contracts = gated
    candidates = {}
    for task in ("B", "A"):
        out = commit(repo, task)
        assert out.returncode == 0, out.stderr
        candidates[task] = json.loads(out.stdout)["commit"]
    for task in ("B", "A"):
        done = run_integrator(
            "integrate", "--repo", str(repo), "--contract", str(contracts[task]),
            "--candidate", candidates[task], "--json", cwd=repo,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert json.loads(done.stdout)["decision"] == "ACCEPTED"
    assert git("rev-parse", "refs/heads/main", cwd=repo) == git(
        "rev-parse", "refs/integrator/queue/main", cwd=repo
    )
    assert git("show", "main:src/b/y.py", cwd=repo) == "changed"
    assert git("show", "main:src/a/new.py", cwd=repo) == "new"
    # The shared checkout is on main, kept in step: what landed is its own again, and the
    # stray edit nobody landed is still there, unstaged.
    assert git("status", "--porcelain", "--untracked-files=no", cwd=repo) == "M docs/x.md"


def test_gated_commit_without_a_live_claim_is_refused(
    gated: tuple[Path, dict[str, Path]],
) -> None:
    """With a queue, a task without a live contract has nothing to commit against."""
    repo, _ = gated
    git("update-ref", "-d", "refs/integrator/claims/A", cwd=repo)
    refs = git("for-each-ref", cwd=repo)
    out = commit(repo, "A")
    assert out.returncode == 2
    assert "task A has no claim" in out.stderr and "--in-place" in out.stderr
    assert git("for-each-ref", cwd=repo) == refs
