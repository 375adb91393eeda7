"""`integrator guard` — stop a write outside the worktree's contract before it happens.

Hook mode (no arguments) reads one agent tool event on stdin and answers in the agent's
hook protocol; `--path` checks paths for scripts; `--staged` checks the index (the
pre-commit hook); `guard install` writes the hook settings where each agent reads them
(`integrator.fleet.hooks`), `guard trust` does an agent's trust step, `guard doctor` tells
whether each agent will really run the hook, `guard show` the contract this checkout
writes under.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from integrator.commands._common import print_json, say
from integrator.errors import EXIT_FENCED, EXIT_OK, UsageError

# integrator.fleet.hooks.AGENTS, spelled here so that a hook call that writes nothing (a
# plain shell command, a read) is answered without loading the contract models (a test
# pins that the two agree).
AGENTS = ("claude", "codex", "gemini")


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "guard",
        help="allow or deny file writes against the contract bound to this worktree",
        description=(
            "Without arguments: read a Claude Code/Codex PreToolUse or Gemini BeforeTool "
            "event on stdin and allow or deny it (fail closed). --path P: check paths, exit "
            "1 when one is denied. --staged: check the paths staged for commit. In a shared "
            "checkout, $INTEGRATOR_TASK names the task whose in-place contract applies. A "
            "checkout with nothing bound denies every write unless the hook runs for the "
            "coordinator ($INTEGRATOR_COORDINATOR=1, no $INTEGRATOR_AGENT or $INTEGRATOR_TASK)."
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
    _register_actions(inner)


def _agents_option(parser: argparse.ArgumentParser, default: str | None) -> None:
    parser.add_argument(
        "--agents",
        "--agent",
        dest="agents",
        default=default,
        help=f"comma-separated, from {', '.join(AGENTS)}"
        + (" (default: all)" if default else " (default: those installed here)"),
    )


def _register_actions(inner: Any) -> None:
    p = inner.add_parser(
        "install",
        help="write agent hook settings and a pre-commit hook",
        description="Claude Code: <worktree>/.claude/settings.local.json. Codex: the main "
        "checkout's .codex/hooks.json (Codex reads worktree hooks there) and a .codex/ "
        "folder in the worktree. Gemini CLI: <worktree>/.gemini/settings.json. Prints the "
        "trust step each agent still needs.",
    )
    p.add_argument("--worktree", type=Path, default=Path(), metavar="PATH")
    _agents_option(p, ",".join(AGENTS))
    p.set_defaults(func=run_install)

    p = inner.add_parser(
        "trust",
        help="do an agent's trust step (writes its user config, printing the change)",
        description="codex: trust the main checkout as a project and the guard's hooks by "
        "hash in $CODEX_HOME/config.toml. gemini: trust the worktree folder in "
        "~/.gemini/trustedFolders.json. claude: nothing to write (prints what applies). "
        "Prints the exact diff; --dry-run writes nothing. Never overrides explicit distrust.",
    )
    p.add_argument("--worktree", type=Path, default=Path(), metavar="PATH")
    _agents_option(p, None)
    p.add_argument("--dry-run", action="store_true", help="print the change, write nothing")
    p.set_defaults(func=run_trust)

    p = inner.add_parser(
        "doctor",
        help="tell whether each agent will really run the guard's hook here",
        description="Per agent: the settings file, a hook that runs this Python, a matcher "
        "covering the write tools (Bash too for Codex), Codex's .codex/ marker and project "
        "and hook trust, Gemini's folder trust. Exit 0 when every agent checked will run "
        "it, 1 otherwise.",
    )
    p.add_argument("--worktree", type=Path, default=Path(), metavar="PATH")
    _agents_option(p, None)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run_doctor)

    p = inner.add_parser("show", help="the contract this checkout writes under, and if it is live")
    p.add_argument("--worktree", type=Path, default=Path(), metavar="PATH")
    p.add_argument("--json", action="store_true", help="print it as JSON")
    p.set_defaults(func=run_show)


def _agents(text: str | None) -> list[str] | None:
    if text is None:
        return None
    agents = [a.strip() for a in text.split(",") if a.strip()]
    unknown = sorted(set(agents) - set(AGENTS))
    if unknown or not agents:
        raise UsageError(f"unknown agents {unknown}; choose from {', '.join(AGENTS)}")
    return agents


def run(args: argparse.Namespace) -> int:
    if not args.path and not args.staged:
        return run_hook(args)
    from integrator.clock import utcnow
    from integrator.fleet import guard

    decision = guard.check_paths(
        Path.cwd(),
        utcnow(),
        os.environ,
        paths=args.path,
        staged=args.staged,
        allow_outside=args.allow_outside,
    )
    if args.json:
        print_json(decision.to_json())
    else:
        for verdict in decision.paths:
            mark = "allow" if verdict.allowed else "deny "
            say(f"{mark} {verdict.relative or verdict.given}: {verdict.reason}")
        if not decision.allowed:
            say(decision.reason, err=True)
    return EXIT_OK if decision.allowed else EXIT_FENCED


def run_hook(args: argparse.Namespace) -> int:
    try:
        data = sys.stdin.buffer.read()
    except Exception as err:  # fail closed: even an unreadable stdin blocks
        say(f"integrator guard: cannot read the hook input: {err}", err=True)
        return 2
    from integrator.fleet.events import unmediated_answer

    quick = unmediated_answer(data, cwd=Path(os.getcwd()))
    if quick is not None:
        sys.stdout.write(quick)
        return 0
    from integrator.clock import utcnow
    from integrator.fleet import guard

    answer, _decision = guard.run_hook(
        data,
        cwd=Path(os.getcwd()),
        now=utcnow(),
        allow_outside=args.allow_outside,
        in_place_task=os.environ.get(guard.TASK_ENV),
        coordinator=guard.coordinator_mode(os.environ),
    )
    sys.stdout.write(answer.stdout)
    sys.stderr.write(answer.stderr)
    return answer.exit_code


def run_install(args: argparse.Namespace) -> int:
    from integrator.fleet.hooks import install

    installed = install(args.worktree, agents=_agents(args.agents) or list(AGENTS))
    for path in installed.written:
        say(str(path))
    for warning in installed.warnings:
        say(f"warning: {warning}", err=True)
    for step in installed.next_steps:
        say(f"next: {step}", err=True)
    return 0


def run_trust(args: argparse.Namespace) -> int:
    from integrator.fleet.hooks import TRUST_STEPS
    from integrator.fleet.trust import codex_trust_plan, gemini_trust_plan
    from integrator.fleet.workspace import worktree_root

    agents = _agents(args.agents)
    if agents is None:
        raise UsageError("name the agent to trust: --agent codex, gemini or claude")
    root = worktree_root(args.worktree)
    for agent in agents:
        if agent == "claude":
            say(f"claude: nothing to write. {TRUST_STEPS['claude']}")
            continue
        plan = (codex_trust_plan if agent == "codex" else gemini_trust_plan)(root, os.environ)
        if not plan.changed:
            say(f"{agent}: {plan.path} already trusts this checkout; nothing to write")
            continue
        verb = "would write" if args.dry_run else "writing"
        say(f"{agent}: {verb} {plan.path}:")
        say(plan.diff(), end="")
        if not args.dry_run:
            plan.write()
    return 0


def run_doctor(args: argparse.Namespace) -> int:
    from integrator.fleet.doctor import doctor, report_json
    from integrator.fleet.workspace import worktree_root

    root = worktree_root(args.worktree)
    reports = doctor(root, os.environ, _agents(args.agents))
    document = report_json(root, reports)
    if args.json:
        print_json(document)
    else:
        for report in reports:
            state = "runs the guard" if report.ok else "will NOT run the guard"
            if not report.installed:
                state += " (not installed)"
            say(f"{report.agent}: {state}")
            for check in report.checks:
                say(f"  {'ok ' if check.ok else 'NO '} {check.name}: {check.detail}")
            for note in report.notes:
                say(f"  note: {note}")
    return EXIT_OK if document["ok"] else EXIT_FENCED


def run_show(args: argparse.Namespace) -> int:
    from integrator.clock import utcnow
    from integrator.fleet import guard

    document = guard.bound_status(
        args.worktree.resolve(), utcnow(), in_place_task=os.environ.get(guard.TASK_ENV)
    )
    if args.json:
        print_json(document)
    else:
        say(f"worktree {document['worktree']} (task {document['task'] or 'none'})")
        say("writable" if document["writable"] else f"NOT writable: {document['problem']}")
        if document["contract"] is not None:
            say(json.dumps(document["contract"], indent=2))
    return EXIT_OK
