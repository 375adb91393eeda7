"""`integrator guard` — stop a write outside the worktree's contract before it happens.

Hook mode (no arguments) reads one agent tool event on stdin and answers in the agent's
hook protocol; `--path` checks paths for scripts; `--staged` checks the index (the
pre-commit hook); `guard install` writes the hook settings into a worktree
(`integrator.fleet.hooks`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from integrator.clock import utcnow
from integrator.errors import EXIT_FENCED, EXIT_OK, UsageError
from integrator.fleet import guard
from integrator.fleet.hooks import AGENTS, install
from integrator.fleet.workspace import worktree_root

# In a shared checkout (`task claim --in-place`) nothing is bound to the worktree; the
# agent's environment names its task instead, and hooks inherit that environment.
TASK_ENV = "INTEGRATOR_TASK"


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "guard",
        help="allow or deny file writes against the contract bound to this worktree",
        description=(
            "Without arguments: read a Claude Code/Codex PreToolUse or Gemini BeforeTool "
            "event on stdin and allow or deny it (fail closed). --path P: check paths, exit "
            "1 when one is denied. --staged: check the paths staged for commit. In a shared "
            "checkout, $INTEGRATOR_TASK names the task whose in-place contract applies."
        ),
    )
    parser.add_argument("--path", action="append", default=[], metavar="P", help="path to check")
    parser.add_argument("--staged", action="store_true", help="check the staged paths")
    parser.add_argument(
        "--allow-outside",
        action="append",
        default=[],
        type=Path,
        metavar="DIR",
        help="allow writes under DIR outside the repository (e.g. /tmp)",
    )
    parser.add_argument("--json", action="store_true", help="print the decision as JSON")
    parser.set_defaults(func=run)
    inner = parser.add_subparsers(dest="guard_command", metavar="ACTION")
    install = inner.add_parser("install", help="write agent hook settings and a pre-commit hook")
    install.add_argument("--worktree", type=Path, default=Path(), metavar="PATH")
    install.add_argument(
        "--agents",
        default=",".join(AGENTS),
        help=f"comma-separated, from {', '.join(AGENTS)} (default: all)",
    )
    install.set_defaults(func=run_install)


def run(args: argparse.Namespace) -> int:
    if not args.path and not args.staged:
        return run_hook(args)
    cwd = Path.cwd()
    if args.staged:
        targets, relative = guard.staged_paths(worktree_root(cwd)), True
    else:
        targets, relative = list(args.path), False
    decision = guard.evaluate(
        targets,
        cwd,
        utcnow(),
        allow_outside=args.allow_outside,
        relative_to_root=relative,
        in_place_task=os.environ.get(TASK_ENV),
    )
    if args.json:
        print(json.dumps(decision.to_json(), indent=2, ensure_ascii=False))
    else:
        for verdict in decision.paths:
            mark = "allow" if verdict.allowed else "deny "
            print(f"{mark} {verdict.relative or verdict.given}: {verdict.reason}")
        if not decision.allowed:
            print(decision.reason, file=sys.stderr)
    return EXIT_OK if decision.allowed else EXIT_FENCED


def run_hook(args: argparse.Namespace) -> int:
    try:
        data = sys.stdin.buffer.read()
    except Exception as err:  # fail closed: even an unreadable stdin blocks
        print(f"integrator guard: cannot read the hook input: {err}", file=sys.stderr)
        return 2
    answer, _decision = guard.run_hook(
        data,
        cwd=Path(os.getcwd()),
        now=utcnow(),
        allow_outside=args.allow_outside,
        in_place_task=os.environ.get(TASK_ENV),
    )
    sys.stdout.write(answer.stdout)
    sys.stderr.write(answer.stderr)
    return answer.exit_code


def run_install(args: argparse.Namespace) -> int:
    agents = [a.strip() for a in args.agents.split(",") if a.strip()]
    unknown = sorted(set(agents) - set(AGENTS))
    if unknown:
        raise UsageError(f"unknown agents {unknown}; choose from {', '.join(AGENTS)}")
    installed = install(args.worktree, agents=agents)
    for path in installed.written:
        print(path)
    for warning in installed.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return 0
