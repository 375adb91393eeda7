"""The filesystem task queue: atomic claims under real process races, readiness, requeue."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import timedelta
from pathlib import Path

import pytest

from integrator.documents.policy import default_policy
from integrator.errors import ClaimConflictError, UsageError
from integrator.fleet.taskqueue import Queue
from integrator.fleet.workspace import agent_name
from tests.factories import task_file
from tests.gitutil import commit_files, git, make_repo
from tests.gitutil import run_integrator as integrator

POLICY = default_policy()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = make_repo(tmp_path / "repo")
    commit_files(path, {"README.md": "hello\n"}, "init")
    git("reset", "-q", "--hard", cwd=path)
    return path


WORKER = textwrap.dedent(
    """
    import json, os, sys, time
    from pathlib import Path
    from integrator.documents.policy import default_policy
    from integrator.fleet.taskqueue import Queue

    root, agent, go, hold = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), float(sys.argv[4])
    queue, policy = Queue(root), default_policy()
    while not go.exists():
        time.sleep(0.001)
    log = []
    while queue.entries("inbox", parse=False):
        claimed = queue.claim(agent, policy)
        if claimed is None:
            time.sleep(0.002)
            continue
        start = time.monotonic()
        time.sleep(hold)
        end = time.monotonic()
        queue.complete(claimed.task.id, agent=agent)
        log.append([claimed.task.id, start, end])
    print(json.dumps(log))
    """
)


def race(tmp_path: Path, root: Path, workers: int, hold: float) -> list[list[object]]:
    script = tmp_path / "worker.py"
    script.write_text(WORKER, encoding="utf-8")
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])}
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(root), f"agent{i}", str(go), str(hold)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for i in range(workers)
    ]
    time.sleep(0.3)  # let every worker start and spin on the barrier
    go.touch()
    logs: list[list[object]] = []
    for proc in procs:
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        logs.extend(json.loads(out))
    return logs


def test_racing_processes_claim_each_task_exactly_once(tmp_path: Path, repo: Path) -> None:
    """Six processes race for twenty cognitive tasks: every task is claimed exactly once."""
    queue = Queue.find(repo)
    for i in range(20):
        queue.add(task_file(f"T{i:02d}"))
    logs = race(tmp_path, queue.root, workers=6, hold=0.0)
    claimed = sorted(str(entry[0]) for entry in logs)
    assert claimed == [f"T{i:02d}" for i in range(20)]
    assert len(queue.entries("done")) == 20
    assert queue.entries("inbox") == () and queue.entries("claimed") == ()


def test_overlapping_tasks_are_never_held_at_once(tmp_path: Path, repo: Path) -> None:
    """Racing processes never hold two overlapping tasks at the same time."""
    queue = Queue.find(repo)
    owners = {f"T{i}": [f"src/g{i % 3}/**"] for i in range(9)}
    owners["T9"] = ["src/**"]  # overlaps every other task
    for task_id, owns in owners.items():
        queue.add(task_file(task_id, owns))
    logs = race(tmp_path, queue.root, workers=4, hold=0.02)
    assert sorted(str(e[0]) for e in logs) == sorted(owners)
    spans = {str(e[0]): (float(str(e[1])), float(str(e[2]))) for e in logs}
    for (a, owns_a), (b, owns_b) in itertools.combinations(owners.items(), 2):
        if owns_a == owns_b or "T9" in (a, b):
            (a0, a1), (b0, b1) = spans[a], spans[b]
            assert a1 < b0 or b1 < a0, f"{a} and {b} overlap but ran together"


def test_overlapping_tasks_are_never_both_ready(repo: Path) -> None:
    """Of two overlapping tasks only the first is claimable, the second after it is done."""
    queue = Queue.find(repo)
    queue.add(task_file("A", ["src/**"]))
    queue.add(task_file("B", ["src/b.py"]))
    assert queue.plan(POLICY).ready == ("A",)
    first = queue.claim("one", POLICY)
    assert first is not None and first.task.id == "A"
    assert queue.claim("two", POLICY) is None
    assert any("A" in why for why in queue.plan(POLICY).waiting["B"])
    queue.complete("A", agent="one")
    second = queue.claim("two", POLICY)
    assert second is not None and second.task.id == "B"


def test_claimers_racing_through_the_cli_win_once_each(repo: Path) -> None:
    """Four `integrator task claim` processes race for two tasks: two win, two find none."""
    queue = Queue.find(repo)
    queue.add(task_file("A"))
    queue.add(task_file("B"))
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "integrator", "task", "claim", "--json", "--agent", f"a{i}"],
            cwd=repo,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        results.append(json.loads(out))
    won = sorted(r["task"] for r in results if r.get("task"))
    assert won == ["A", "B"]
    assert sum(1 for r in results if r.get("claimed", "") is None) == 2
    assert all(r["lockMode"] == "none" for r in results if r.get("task"))


def test_crashed_claimer_task_returns_after_requeue_stale(repo: Path) -> None:
    """A claimer killed after claiming leaves a stale claim that requeue-stale returns."""
    queue = Queue.find(repo)
    queue.add(task_file("A"))
    crash = (
        "import os, signal, sys; from integrator.fleet.taskqueue import Queue; "
        "from integrator.documents.policy import default_policy; "
        "Queue.find(sys.argv[1]).claim('doomed', default_policy()); "
        "os.kill(os.getpid(), signal.SIGKILL)"
    )
    proc = subprocess.run([sys.executable, "-c", crash, str(repo)], check=False)
    assert proc.returncode == -signal.SIGKILL
    assert [e.task_id for e in queue.entries("claimed")] == ["A"]
    fresh = integrator("task", "requeue-stale", "--older-than", "1h", "--json", cwd=repo)
    assert json.loads(fresh.stdout) == {"requeued": []}
    stale = queue.entries("claimed")[0].path
    two_hours_ago = time.time() - 7200
    os.utime(stale, (two_hours_ago, two_hours_ago))
    out = integrator("task", "requeue-stale", "--older-than", "1h", "--json", cwd=repo)
    assert out.returncode == 0, out.stderr
    assert [r["task"] for r in json.loads(out.stdout)["requeued"]] == ["A"]
    again = queue.claim("survivor", POLICY)
    assert again is not None and again.task.id == "A"


def test_heartbeat_keeps_a_claim_from_being_requeued(repo: Path) -> None:
    """A claim whose agent beats its heart recently is not stale."""
    queue = Queue.find(repo)
    queue.add(task_file("A"))
    claimed = queue.claim("a", POLICY)
    assert claimed is not None
    old = time.time() - 7200
    os.utime(claimed.path, (old, old))
    queue.heartbeat("A", agent="a")
    assert queue.requeue_stale(timedelta(hours=1)) == []


def test_blocked_by_resolves_only_when_the_blocker_is_done(repo: Path) -> None:
    """A declared blocker keeps its dependant waiting while claimed, not after done."""
    queue = Queue.find(repo)
    queue.add(task_file("A"))
    queue.add(task_file("B", blocked_by=["A"]))
    assert queue.plan(POLICY).ready == ("A",)
    queue.claim("x", POLICY)
    assert queue.plan(POLICY).ready == ()
    queue.complete("A")
    assert queue.plan(POLICY).ready == ("B",)


def test_release_returns_a_task_and_agent_must_match(repo: Path) -> None:
    """release moves the task back; another agent's name is refused."""
    queue = Queue.find(repo)
    queue.add(task_file("A"))
    queue.claim("owner", POLICY)
    with pytest.raises(ClaimConflictError, match="claimed by owner"):
        queue.release("A", agent="intruder")
    queue.release("A", agent="owner")
    assert [e.task_id for e in queue.entries("inbox")] == ["A"]


def test_add_refuses_duplicates_and_invalid_files(repo: Path) -> None:
    """The inbox never gets the same id twice nor a file that does not parse."""
    queue = Queue.find(repo)
    queue.add(task_file("A"))
    with pytest.raises(UsageError, match="already in the inbox"):
        queue.add(task_file("A"))
    with pytest.raises(UsageError, match="unknown key"):
        queue.add("---\nid: B\nbogus: 1\n---\n")


def test_broken_files_are_reported_and_a_broken_claim_holds_everything(repo: Path) -> None:
    """A misnamed inbox file waits with a reason; an unreadable claimed file blocks all."""
    queue = Queue.find(repo)
    queue.init()
    (queue.folder("inbox") / "wrong.md").write_text(task_file("A"), encoding="utf-8")
    queue.add(task_file("B"))
    plan = queue.plan(POLICY)
    assert plan.ready == ("B",)
    assert "must be named A.md" in plan.waiting["wrong"][0]
    (queue.folder("claimed") / "C@x.md").write_text("garbage", encoding="utf-8")
    blocked = queue.plan(POLICY)
    assert blocked.ready == ()
    assert "unreadable" in blocked.waiting["B"][0]


def test_queue_is_found_from_any_worktree(repo: Path, tmp_path: Path) -> None:
    """`git rev-parse --git-common-dir` leads every worktree to the main checkout's queue."""
    git("worktree", "add", "-q", "--detach", str(tmp_path / "wt"), "HEAD", cwd=repo)
    (tmp_path / "wt" / "sub").mkdir()
    assert Queue.find(tmp_path / "wt" / "sub").root == Queue.find(repo).root == repo / ".agents"


def test_agent_names_are_made_file_safe() -> None:
    """Agent identities end up in file names, so unsafe characters are replaced."""
    assert agent_name("alice@host/1") == "alice_host_1"
    with pytest.raises(UsageError):
        agent_name("///")


def test_init_hides_the_queue_from_git_and_list_reports_it(repo: Path) -> None:
    """`task init` git-excludes .agents/; `task list --json` shows ready and waiting tasks."""
    assert integrator("task", "init", cwd=repo).returncode == 0
    Queue.find(repo).add(task_file("A", ["src/**"]))
    Queue.find(repo).add(task_file("B", ["src/b.py"]))
    assert git("status", "--porcelain", cwd=repo) == ""
    listed = json.loads(integrator("task", "list", "--json", cwd=repo).stdout)
    assert [(i["id"], i["ready"]) for i in listed["inbox"]] == [("A", True), ("B", False)]
    assert listed["ceiling"] == 1
