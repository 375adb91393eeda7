"""`integrator task …` — the shared task queue: add, list, claim, complete, release, requeue."""

from __future__ import annotations

import argparse
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from integrator.commands._common import duration, say
from integrator.errors import IntegratorError, UsageError


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


def run_init(args: argparse.Namespace) -> int:
    from integrator.fleet.tasking import init_queue

    say(init_queue(args.repo, ignore=args.ignore))
    return 0


def run_add(args: argparse.Namespace) -> int:
    from integrator.fleet.taskqueue import Queue

    queue = Queue.find(args.repo)
    for path in args.files:
        try:
            text = path.read_text("utf-8")
        except OSError as err:
            raise UsageError(f"cannot read {path}: {err.strerror}") from err
        say(queue.add(text, source=path))
    return 0


def run_list(args: argparse.Namespace) -> int:
    from integrator.fleet.tasking import list_document

    doc, text = list_document(args.repo)
    _print(args, doc, text)
    return 0


def run_claim(args: argparse.Namespace) -> int:
    from integrator.fleet.tasking import error_document

    try:
        return _claim(args)
    except IntegratorError as err:
        if args.json:
            # Agents pipe --json into jq: a failed claim must still be a document on stdout.
            # The error line (stderr) and the exit code come from the one handler in cli.py.
            _print(args, error_document(err), str(err))
        raise


def _claim(args: argparse.Namespace) -> int:
    from integrator.fleet.tasking import claim_document

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


def run_complete(args: argparse.Namespace) -> int:
    from integrator.fleet.assignments import Fleet

    fleet = Fleet(args.repo)
    path = fleet.complete(args.task_id, agent=args.agent, no_candidate=args.no_candidate)
    _print(args, {"task": args.task_id, "state": "done", "file": str(path)}, f"done:{path}")
    return 0


def run_release(args: argparse.Namespace) -> int:
    from integrator.fleet.assignments import Fleet

    path = Fleet(args.repo).release(args.task_id, agent=args.agent, reason=args.reason)
    _print(args, {"task": args.task_id, "state": "inbox", "file": str(path)}, f"released:{path}")
    return 0


def run_heartbeat(args: argparse.Namespace) -> int:
    from integrator.fleet.taskqueue import Queue

    entry = Queue.find(args.repo).heartbeat(args.task_id, agent=args.agent)
    _print(args, {"task": entry.task_id, "since": entry.since.isoformat()}, f"alive:{entry.path}")
    return 0


def run_requeue(args: argparse.Namespace) -> int:
    from integrator.fleet.assignments import Fleet

    moved = Fleet(args.repo).requeue_stale(args.older_than)
    doc = [{"task": e.task_id, "agent": e.agent, "since": e.since.isoformat()} for e in moved]
    text = "\n".join(
        f"requeued {e.task_id} (claimed by {e.agent} at {e.since.isoformat()})" for e in moved
    )
    _print(args, {"requeued": doc}, text or "nothing stale")
    return 0
