"""`integrator task …` — the shared task queue: add, list, claim, complete, release, requeue."""

from __future__ import annotations

import argparse
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from integrator.commands._common import duration, say
from integrator.errors import IntegratorError, UsageError
from integrator.fleet.assignments import Fleet
from integrator.fleet.hooks import install
from integrator.fleet.taskqueue import Queue
from integrator.fleet.workspace import agent_name, exclude_path


def _common(parser: argparse.ArgumentParser, *, json_flag: bool = True) -> None:
    parser.add_argument(
        "--repo",
        type=Path,
        default=Path(),
        metavar="PATH",
        help="any folder in any worktree of the repository (default: here)",
    )
    if json_flag:
        parser.add_argument("--json", action="store_true", help="print the result as JSON")


def _agent(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--agent", metavar="NAME", help="agent identity (default: $INTEGRATOR_AGENT or host-pid)"
    )


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "task",
        help="the shared task queue (.agents/inbox|claimed|done in the main checkout)",
        description="Claim tasks atomically from a queue shared by every worktree.",
    )
    inner = parser.add_subparsers(dest="task_command", metavar="ACTION", required=True)

    p = inner.add_parser("init", help="create the queue folders and a workspaces.toml")
    _common(p, json_flag=False)
    p.add_argument(
        "--no-ignore",
        dest="ignore",
        action="store_false",
        help="do not add .agents/ to .git/info/exclude (you mean to commit the queue)",
    )
    p.set_defaults(func=run_init)

    p = inner.add_parser("add", help="validate task files and publish them into the inbox")
    p.add_argument("files", nargs="+", type=Path, metavar="FILE")
    _common(p, json_flag=False)
    p.set_defaults(func=run_add)

    p = inner.add_parser("list", help="show inbox (ready or why not), claimed and done tasks")
    _common(p)
    p.set_defaults(func=run_list)

    p = inner.add_parser("claim", help="claim the first ready task (atomic rename)")
    _common(p)
    _agent(p)
    p.add_argument("--task", metavar="ID", help="claim this task only, if it is ready")
    p.add_argument("--lease", type=duration, default=timedelta(hours=1), help="contract lease")
    p.add_argument("--guard", action="store_true", help="install the write guard in the worktree")
    p.add_argument(
        "--in-place",
        action="store_true",
        help="shared checkout: no worktree; the write set is the lock; commit "
        "with `integrator commit --task` and export INTEGRATOR_TASK for the guard",
    )
    p.set_defaults(func=run_claim)

    for name, helptext, func in (
        ("complete", "claimed → done; frees the workspace (the claim stays)", run_complete),
        ("release", "claimed → inbox; revokes the attempt's contract", run_release),
        ("heartbeat", "mark a claim alive so requeue-stale leaves it", run_heartbeat),
    ):  # fmt: skip
        p = inner.add_parser(name, help=helptext)
        p.add_argument("task_id", metavar="ID")
        _common(p)
        _agent(p)
        if name == "release":
            p.add_argument("--reason", default="released by its agent")
        if name == "complete":
            p.add_argument(
                "--no-candidate",
                action="store_true",
                help="nothing was submitted: revoke the claim now instead of waiting for it",
            )
        p.set_defaults(func=func)

    p = inner.add_parser("requeue-stale", help="return claims older than DURATION to the inbox")
    p.add_argument("--older-than", type=duration, required=True, metavar="DURATION")
    _common(p)
    p.set_defaults(func=run_requeue)


def _print(args: argparse.Namespace, document: object, text: str) -> None:
    if getattr(args, "json", False):
        print(json.dumps(document, indent=2, ensure_ascii=False, default=str))
    else:
        say(text)


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


def run_init(args: argparse.Namespace) -> int:
    queue = Queue.find(args.repo)
    queue.init()
    if args.ignore:
        # Queue state changes on every claim; keep it out of `git status` and `git add -A`.
        exclude_path(queue.root.parent, f"/{queue.root.name}/")
    registry = queue.root / "workspaces.toml"
    if not registry.exists():
        registry.write_text(WORKSPACES_TEMPLATE, encoding="utf-8")
    say(queue.root)
    return 0


def run_add(args: argparse.Namespace) -> int:
    queue = Queue.find(args.repo)
    for path in args.files:
        try:
            text = path.read_text("utf-8")
        except OSError as err:
            raise UsageError(f"cannot read {path}: {err.strerror}") from err
        say(queue.add(text, source=path))
    return 0


def run_list(args: argparse.Namespace) -> int:
    fleet = Fleet(args.repo)
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
    _print(
        args,
        {"inbox": inbox, "claimed": claimed, "done": done, "ceiling": plan.ceiling},
        "\n".join(lines),
    )
    return 0


def run_claim(args: argparse.Namespace) -> int:
    try:
        return _claim(args)
    except IntegratorError as err:
        if args.json:
            # Agents pipe --json into jq: a failed claim must still be a document on stdout.
            # The error line (stderr) and the exit code come from the one handler in cli.py.
            _print(args, error_document(err), str(err))
        raise


def error_document(err: IntegratorError) -> dict[str, object]:
    """A failed claim as JSON, shaped like the "nothing claimed" document plus the error."""
    return {
        "claimed": None,
        "state": "error",
        "error": {"type": type(err).__name__, "message": str(err), "exitCode": err.exit_code},
    }


def _claim(args: argparse.Namespace) -> int:
    doc, text = claim_document(
        args.repo,
        agent=args.agent,
        task_id=args.task,
        lease=args.lease,
        in_place=args.in_place,
        guard=args.guard,
    )
    _print(args, doc, text)
    return 0


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


def run_complete(args: argparse.Namespace) -> int:
    fleet = Fleet(args.repo)
    path = fleet.complete(args.task_id, agent=args.agent, no_candidate=args.no_candidate)
    _print(args, {"task": args.task_id, "state": "done", "file": str(path)}, f"done:{path}")
    return 0


def run_release(args: argparse.Namespace) -> int:
    path = Fleet(args.repo).release(args.task_id, agent=args.agent, reason=args.reason)
    _print(args, {"task": args.task_id, "state": "inbox", "file": str(path)}, f"released:{path}")
    return 0


def run_heartbeat(args: argparse.Namespace) -> int:
    entry = Queue.find(args.repo).heartbeat(args.task_id, agent=args.agent)
    _print(args, {"task": entry.task_id, "since": entry.since.isoformat()}, f"alive:{entry.path}")
    return 0


def run_requeue(args: argparse.Namespace) -> int:
    moved = Fleet(args.repo).requeue_stale(args.older_than)
    doc = [{"task": e.task_id, "agent": e.agent, "since": e.since.isoformat()} for e in moved]
    text = "\n".join(
        f"requeued {e.task_id} (claimed by {e.agent} at {e.since.isoformat()})" for e in moved
    )
    _print(args, {"requeued": doc}, text or "nothing stale")
    return 0
