"""`integrator commit --task ID` — commit only a task's owned paths in a shared checkout.

See `integrator.fleet.commit` for what is committed and onto what.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from integrator.commands._common import say


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "commit",
        help="commit only a task's owned paths, serialized under one repository-wide lock",
        description=(
            "For fleets sharing one checkout: stage and commit only the paths task ID owns "
            "(its live contract, else its claimed task file's write set). Refuses when "
            "unowned changes are staged; leaves unowned working-tree changes untouched."
        ),
    )
    parser.add_argument("--task", required=True, metavar="ID")
    parser.add_argument("-m", "--message", metavar="MSG", help="commit message")
    parser.add_argument("--repo", type=Path, default=Path(), metavar="PATH")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from integrator.fleet.commit import commit_task
    from integrator.fleet.workspace import worktree_root

    result = commit_task(worktree_root(args.repo), args.task, args.message)
    if args.json:
        say(
            json.dumps(
                {
                    "task": result.task,
                    "commit": result.commit,
                    "paths": list(result.paths),
                    "leftAlone": list(result.left_alone),
                    "ownedBy": result.owner,
                    "base": result.base,
                },
                indent=2,
            )
        )
        return 0
    if result.commit is None:
        say(f"nothing to commit for task {result.task}")
    elif result.base is not None:
        say(
            f"candidate {result.commit} for task {result.task} on base {result.base[:12]}: "
            f"{', '.join(result.paths)}\n"
            f"submit it: integrator submit --spool DIR --contract CONTRACT --candidate "
            f"{result.commit}"
        )
    else:
        say(f"committed {result.commit[:12]} for task {result.task}: {', '.join(result.paths)}")
    if result.left_alone:
        say(f"left {len(result.left_alone)} changes outside task {result.task} untouched")
    return 0
