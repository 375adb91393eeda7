"""Lock modes and workspace binding: none for cognitive work, exclusive worktrees for writers."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from integrator.errors import ConfigurationError, WorkspaceBusyError, WorkspaceConfigurationError
from integrator.fleet.assignments import Fleet
from integrator.fleet.taskqueue import Queue
from integrator.fleet.tasks import parse_task
from integrator.fleet.workspace import (
    Exclusive,
    NoLock,
    Workspaces,
    bound_contract,
    parse_workspaces,
    resolve_lock_mode,
    worktree_id,
)
from integrator.records.canonical import Canonical
from integrator.records.claims import Claims
from tests.factories import task_file
from tests.gitutil import commit_files, git, make_repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = make_repo(tmp_path / "repo")
    commit_files(path, {"src/a.py": "a\n", "docs/x.md": "x\n", "pyproject.toml": "[x]\n"}, "init")
    git("reset", "-q", "--hard", cwd=path)
    return path


def registry(repo: Path, text: str) -> None:
    Queue.find(repo).init()
    (repo / ".agents" / "workspaces.toml").write_text(text, encoding="utf-8")


def add(repo: Path, *texts: str) -> None:
    queue = Queue.find(repo)
    for text in texts:
        queue.add(text)


def claim_refs(repo: Path) -> list[str]:
    out = git("for-each-ref", "--format=%(refname)", "refs/integrator/claims", cwd=repo)
    return out.split()


# --- the decision table (pure) -------------------------------------------------------------

REG = Workspaces(primary="shared", agents=(("alice", "alice-ws"),))


def test_cognitive_task_takes_no_lock() -> None:
    """requires_filesystem false: lock mode none, no workspace at all."""
    resolution = resolve_lock_mode(parse_task(task_file("T")), "alice", REG)
    assert isinstance(resolution, NoLock) and resolution.workspace is None


def test_explicit_workspace_wins_over_agent_and_primary() -> None:
    """A task's own workspace beats the agent's binding and the primary."""
    resolution = resolve_lock_mode(
        parse_task(task_file("T", ["src/**"], workspace="review")), "alice", REG
    )
    assert resolution == Exclusive("review", "task", resolution.reason)


def test_agent_binding_then_primary() -> None:
    """A writing task uses the agent's workspace, else the project's primary."""
    writer = parse_task(task_file("T", ["src/**"]))
    assert resolve_lock_mode(writer, "alice", REG).workspace == "alice-ws"
    fallback = resolve_lock_mode(writer, "bob", REG)
    assert isinstance(fallback, Exclusive) and fallback.source == "primary"


def test_no_binding_anywhere_is_a_loud_configuration_error() -> None:
    """No task, agent or primary workspace: WorkspaceConfigurationError saying what to add."""
    with pytest.raises(WorkspaceConfigurationError, match=r'\[agents\.bob\] workspace = "bob"'):
        resolve_lock_mode(parse_task(task_file("T", ["src/**"])), "bob", Workspaces())


def test_registry_rejects_unknown_keys_and_bad_names() -> None:
    """The registry is strict: unknown keys and unusable names fail to load."""
    assert (
        parse_workspaces('primary = "p"\n[agents.a]\nworkspace = "w"\n').agent_workspace("a") == "w"
    )
    for bad in ('primry = "p"', '[agents.a]\nworkspace = "a/b"', "[agents.a]\nws = 1"):
        with pytest.raises(ConfigurationError, match=r"workspaces\.toml"):
            parse_workspaces(bad)


# --- claims through the fleet -------------------------------------------------------------


def test_cognitive_task_gets_no_workspace_lock_or_contract(repo: Path) -> None:
    """Claiming a cognitive task creates no worktree, no lock file and no claim ref."""
    add(repo, task_file("THINK"))
    outcome = Fleet(repo).claim("alice")
    assert outcome.assignment is not None
    assert outcome.assignment.lock_mode == "none"
    assert outcome.assignment.worktree is None and outcome.assignment.contract is None
    assert claim_refs(repo) == []
    assert not (repo / ".trees").exists() and not (repo / ".agents" / "locks").exists()


def test_coding_task_without_binding_fails_loudly_and_returns_to_inbox(repo: Path) -> None:
    """`task claim` of a writing task with no workspace exits 2 and leaves it in the inbox."""
    add(repo, task_file("CODE", ["src/**"]))
    out = subprocess.run(
        [sys.executable, "-m", "integrator", "task", "claim", "--agent", "bob"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 2
    assert "WorkspaceConfigurationError" not in out.stderr  # one actionable line instead
    assert "agent bob has no workspace" in out.stderr and "workspaces.toml" in out.stderr
    queue = Queue.find(repo)
    assert [e.task_id for e in queue.entries("inbox")] == ["CODE"]
    assert queue.entries("claimed") == () and claim_refs(repo) == []


def test_coding_task_gets_a_worktree_bound_to_its_contract(repo: Path) -> None:
    """The agent's workspace becomes a worktree at the queue head holding the contract."""
    registry(repo, '[agents.alice]\nworkspace = "alice"\n')
    add(repo, task_file("CODE", ["/pyproject.toml", "src/**"]))
    assignment = Fleet(repo).claim("alice").assignment
    assert assignment is not None and assignment.lock_mode == "exclusive"
    worktree = repo / ".trees" / "alice"
    assert assignment.worktree == worktree
    assert git("rev-parse", "HEAD", cwd=worktree) == git("rev-parse", "HEAD", cwd=repo)
    contract = bound_contract(worktree)
    assert contract == assignment.contract and contract is not None
    assert contract.worktree_id == worktree_id(worktree) == "alice"
    assert contract.lease.holder == "alice"
    assert list(contract.paths) == [
        "/pyproject.toml",
        "src/**",
        "/uv.lock",
        "/poetry.lock",
        "/pdm.lock",
    ]
    assert "lockfile:uv.lock" in contract.resources
    with Canonical(repo) as canonical:
        claim = canonical.claim("CODE")
        assert claim is not None and claim.view.state == "live"
        assert claim.contract.digest == contract.digest
    assert "/.trees/" in (repo / ".git" / "info" / "exclude").read_text()


def test_queue_head_is_the_base_when_it_exists(repo: Path) -> None:
    """New work starts from refs/integrator/queue/<target>, not from the branch."""
    ahead = commit_files(repo, {"src/b.py": "b\n"}, "queued", ref="refs/integrator/queue/main")
    registry(repo, 'primary = "shared"\n')
    add(repo, task_file("CODE", ["src/**"]))
    assignment = Fleet(repo).claim("anyone").assignment
    assert assignment is not None and assignment.contract is not None
    assert assignment.contract.base_commit == ahead
    assert assignment.worktree is not None
    assert git("rev-parse", "HEAD", cwd=assignment.worktree) == ahead


def test_two_agents_racing_one_workspace_first_wins_second_is_refused(repo: Path) -> None:
    """Two processes claim into the primary workspace: one binds it, the other is refused."""
    registry(repo, 'primary = "shared"\n')
    add(repo, task_file("A", ["src/**"]), task_file("B", ["docs/**"]))
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "integrator", "task", "claim", "--agent", name],
            cwd=repo,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("one", "two")
    ]
    results = [(p.wait(timeout=60), p.communicate()) for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 1]
    refused = next(err for code, (_, err) in results if code == 1)
    assert "workspace shared is held exclusively by task" in refused
    queue = Queue.find(repo)
    assert len(queue.entries("claimed")) == 1 and len(queue.entries("inbox")) == 1


def test_complete_frees_the_workspace_but_keeps_the_claim_for_the_daemon(repo: Path) -> None:
    """After complete, the worktree is unbound and reusable; an overlapping task waits for
    the live claim until it is revoked (here: completed without a candidate)."""
    registry(repo, '[agents.alice]\nworkspace = "alice"\n')
    add(repo, task_file("A", ["src/**"]), task_file("B", ["src/a.py"]))
    fleet = Fleet(repo)
    first = fleet.claim("alice").assignment
    assert first is not None and first.worktree is not None
    fleet.complete("A", agent="alice")
    assert bound_contract(first.worktree) is None
    assert not (repo / ".agents" / "locks" / "alice.json").exists()
    blocked = fleet.claim("alice")
    assert blocked.assignment is None and "live claim" in blocked.skipped[0]
    assert any("live claim of A" in why for why in fleet.plan().waiting["B"])
    with Canonical(repo) as canonical:
        Claims(canonical).revoke("A", "no candidate after all")
    second = fleet.claim("alice").assignment
    assert second is not None and second.task.id == "B" and second.worktree == first.worktree


def test_complete_without_candidate_revokes_at_once(repo: Path) -> None:
    """`complete --no-candidate` revokes the claim so the next overlapping task can start."""
    registry(repo, 'primary = "shared"\n')
    add(repo, task_file("A", ["src/**"]), task_file("B", ["src/a.py"]))
    fleet = Fleet(repo)
    assert fleet.claim("x").assignment is not None
    fleet.complete("A", no_candidate=True)
    nxt = fleet.claim("x").assignment
    assert nxt is not None and nxt.task.id == "B"


def test_requeue_stale_revokes_the_contract_and_frees_the_workspace(repo: Path) -> None:
    """A stale exclusive claim goes back to the inbox, revoked, unbound, unlocked."""
    registry(repo, 'primary = "shared"\n')
    add(repo, task_file("A", ["src/**"]))
    fleet = Fleet(repo)
    first = fleet.claim("ghost").assignment
    assert first is not None and first.worktree is not None
    assert [e.task_id for e in fleet.requeue_stale(timedelta(0))] == ["A"]
    with Canonical(repo) as canonical:
        claim = canonical.claim("A")
        assert claim is not None and claim.view.state == "revoked"
    assert bound_contract(first.worktree) is None
    again = fleet.claim("heir").assignment
    assert again is not None and again.contract is not None
    assert again.contract.ownership_generation == 2


def test_dirty_workspace_is_refused_and_the_task_returns(repo: Path) -> None:
    """Uncommitted leftovers in a workspace refuse the next task instead of mixing with it."""
    registry(repo, 'primary = "shared"\n')
    add(repo, task_file("A", ["src/**"]), task_file("B", ["docs/**"]))
    fleet = Fleet(repo)
    first = fleet.claim("x").assignment
    assert first is not None and first.worktree is not None
    (first.worktree / "src" / "a.py").write_text("changed\n")
    fleet.complete("A", no_candidate=True)
    with pytest.raises(WorkspaceBusyError, match="uncommitted changes"):
        fleet.claim("x")
    assert [e.task_id for e in Queue.find(repo).entries("inbox")] == ["B"]
