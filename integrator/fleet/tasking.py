"""The task queue's operations as `integrator task …` and the MCP server's `claim_task`
call them, each returning the `--json` document and the text the command prints."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from integrator.errors import IntegratorError
from integrator.fleet.assignments import Fleet
from integrator.fleet.hooks import install
from integrator.fleet.taskqueue import Queue
from integrator.fleet.workspace import agent_name, exclude_path

WORKSPACES_TEMPLATE = """\
# Workspaces for tasks that write files (requires_filesystem: true). See docs/fleet.md.
# A task's own `workspace:` wins, then the agent's, then `primary`; with none of them a
# writing task fails with WorkspaceConfigurationError (there is no silent fallback).
# primary = "shared"
#
# [agents.alice]
# workspace = "alice"          # a git worktree at .trees/alice, created on first use
#
# [workspaces.alice]
# path = ".trees/alice"        # optional: where the worktree lives (relative to the checkout)
"""


def init_queue(repo: Path, *, ignore: bool = True) -> Path:
    """Create the queue folders and a workspaces.toml (unless there is one); the queue's
    folder. `ignore` keeps the queue out of git (.git/info/exclude)."""
    queue = Queue.find(repo)
    queue.init()
    if ignore:
        # Queue state changes on every claim; keep it out of `git status` and `git add -A`.
        exclude_path(queue.root.parent, f"/{queue.root.name}/")
    registry = queue.root / "workspaces.toml"
    if not registry.exists():
        registry.write_text(WORKSPACES_TEMPLATE, encoding="utf-8")
    return queue.root


def list_document(repo: Path) -> tuple[dict[str, object], str]:
    """The queue: the `--json` document and the text `task list` prints (the inbox, ready
    or why not, the claims and the tasks done)."""
    fleet = Fleet(repo)
    plan = fleet.plan()
    snapshot = fleet.queue.snapshot()
    why = {e.task_id: list(plan.waiting.get(e.task_id, ())) for e in snapshot.inbox}
    inbox = [{"id": t, "ready": t in plan.ready, "why": w} for t, w in why.items()]
    claimed = [
        {"id": e.task_id, "agent": e.agent, "since": e.since.isoformat(),
         "worktree": str(fleet.worktree_of(e.task_id) or "") or None}
        for e in snapshot.claimed
    ]  # fmt: skip
    done = [{"id": e.task_id, "agent": e.agent} for e in snapshot.done]
    lines = [f"queue {fleet.queue.root} (partition ceiling {plan.ceiling})"]
    lines += [
        f"  inbox    {t}: " + ("ready" if t in plan.ready else "waiting — " + "; ".join(w))
        for t, w in why.items()
    ]
    lines += [f"  claimed  {c['id']} by {c['agent']} since {c['since']}" for c in claimed]
    lines += [f"  done     {d['id']} by {d['agent']}" for d in done]
    doc: dict[str, object] = {
        "inbox": inbox, "claimed": claimed, "done": done, "ceiling": plan.ceiling,
    }  # fmt: skip
    return doc, "\n".join(lines)


def claim_document(
    repo: Path,
    *,
    agent: str | None = None,
    task_id: str | None = None,
    lease: timedelta = timedelta(hours=1),
    in_place: bool = False,
    guard: bool = False,
) -> tuple[dict[str, object], str]:
    """Claim a task; the `--json` document and the text `task claim` prints (the MCP
    server's `claim_task` returns the same document)."""
    agent = agent_name(agent)
    fleet = Fleet(repo, lease=lease)
    outcome = fleet.claim(agent, task_id=task_id, in_place=in_place)
    assignment = outcome.assignment
    if assignment is None:
        plan = fleet.plan()
        waiting = {k: list(v) for k, v in plan.waiting.items()}
        state = "inbox:blocked" if fleet.queue.entries("inbox", parse=False) else "inbox:empty"
        details = [f"  {k}: {'; '.join(v)}" for k, v in waiting.items()]
        details += [f"  skipped {s}" for s in outcome.skipped if s.split(":")[0] not in waiting]
        doc: dict[str, object] = {
            "claimed": None,
            "state": state,
            "waiting": waiting,
            "skipped": list(outcome.skipped),
        }
        return doc, "\n".join([state, *details])
    if guard and assignment.worktree is not None:
        install(assignment.worktree)
    claimed = assignment.to_json()
    claimed["skipped"] = list(outcome.skipped)
    digest = assignment.contract.digest if assignment.contract else "-"
    if assignment.worktree is not None:
        where = f"workspace {assignment.resolution.workspace} at {assignment.worktree}, {digest}"
    elif assignment.contract is not None:
        where = f"shared checkout, contract {digest}; export INTEGRATOR_TASK={assignment.task.id}"
    else:
        where = "no workspace, no lock, no contract"
    header = (
        f"claimed:{assignment.claimed_file}\n"
        f"task {assignment.task.id}: lock mode {assignment.lock_mode} ({where})\n"
    )
    return claimed, header + "\n" + assignment.task.body.rstrip()


def error_document(err: IntegratorError) -> dict[str, object]:
    """A failed claim as JSON, shaped like the "nothing claimed" document plus the error."""
    return {
        "claimed": None,
        "state": "error",
        "error": {"type": type(err).__name__, "message": str(err), "exitCode": err.exit_code},
    }
