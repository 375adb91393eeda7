"""`integrator gate` and `integrator integrate` — one candidate, one verdict."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from integrator import refnames
from integrator.commands._common import add_repo, read_input
from integrator.report.kinds import FORMATS

if TYPE_CHECKING:
    from integrator.landing.evaluation import Evaluation

GATE_HELP = f"""\
Check one candidate against its ownership contract without moving any ref: the contract
parses (v1, strict), the live claim (when the repository has claims) is current, the base
is an ancestor, and the diff recomputed from base to candidate stays inside the contract —
every path, both ends of every rename, modes, symlinks, submodules, collisions, patch
size and semantic resources. Every violation is reported, not only the first.

A clone without claim refs cannot tell whether the contract is the authorized one: the
verdict then carries CLAIM_UNVERIFIED (review). Fetch the claims first —
  git fetch origin '{refnames.ALL_REFSPEC}'
— or pass --static to check the contract's own rules only.

exit codes: 0 ACCEPTED, 1 FENCED, 3 REVIEW, 2 usage or configuration error, 4 retryable.
"""

INTEGRATE_HELP = """\
Gate a candidate with live claim checks, merge it onto the queue head, write a staging
commit, and in one `git update-ref --stdin` transaction verify the policy ref, move the
queue ref (and the target branch when it follows the queue) and consume the claim.
Integrating a candidate that already landed reports the earlier result and writes nothing.

exit codes: 0 ACCEPTED, 1 FENCED, 3 REVIEW, 2 usage or configuration error, 4 retryable.
"""


def _common(parser: argparse.ArgumentParser) -> None:
    add_repo(parser)
    parser.add_argument(
        "--contract", required=True, metavar="FILE", help="the ownership contract (- for stdin)"
    )
    parser.add_argument("--candidate", required=True, metavar="REV", help="the candidate commit")
    parser.add_argument(
        "--format", choices=FORMATS, default="text", help="output format (default: text)"
    )
    parser.add_argument("--json", action="store_true", help="same as --format json")


def register(sub: Any) -> None:
    gate: argparse.ArgumentParser = sub.add_parser(
        "gate",
        help="one-shot, read-only verdict on a candidate (for CI)",
        description=GATE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(gate)
    gate.add_argument(
        "--policy",
        type=Path,
        metavar="FILE",
        help="policy TOML to use instead of the repository's (for repositories without "
        "integrator init)",
    )
    gate.add_argument(
        "--static",
        action="store_true",
        help="check the contract's own rules, not that it is the authorized one (no claim "
        "refs needed; the verdict says static: true)",
    )
    gate.set_defaults(func=run_gate)
    integrate: argparse.ArgumentParser = sub.add_parser(
        "integrate",
        help="gate, merge onto the queue head and land a candidate atomically",
        description=INTEGRATE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(integrate)
    integrate.set_defaults(func=run_integrate)


def _emit(args: argparse.Namespace, evaluation: Evaluation, worktree: str | None = None) -> int:
    from integrator.landing.evaluation import Complete
    from integrator.report.formats import (
        append_github_summary,
        contract_in_worktree,
        render,
        write_document,
    )

    verdict = evaluation.verdict
    fmt = "json" if args.json else args.format
    changes = evaluation.diff.changes if isinstance(evaluation, Complete) else ()
    color = fmt == "text" and sys.stdout.isatty() and "NO_COLOR" not in os.environ
    anchor = contract_in_worktree(args.contract, worktree)
    text = render(verdict, fmt, changes=changes, color=color, contract_path=anchor)
    write_document(text, fmt)
    if fmt == "github":
        append_github_summary(verdict, os.environ)
    return verdict.exit_code


def run_gate(args: argparse.Namespace) -> int:
    from integrator.documents.policy import PolicyState, load_policy_file
    from integrator.landing.engine import Integrator
    from integrator.records.canonical import Canonical

    data = read_input(args.contract)
    with Canonical(args.repo) as canonical:
        canonical.refresh()
        override = None
        if args.policy is not None:
            policy = load_policy_file(args.policy)
            override = PolicyState(policy, 0, args.policy.read_text("utf-8"))
        engine = Integrator(canonical, policy_override=override, static=args.static)
        return _emit(args, engine.evaluate(data, args.candidate), canonical.repo.workdir)


def run_integrate(args: argparse.Namespace) -> int:
    from integrator.landing.engine import Integrator
    from integrator.landing.evaluation import Stopped
    from integrator.records.canonical import Canonical

    data = read_input(args.contract)
    with Canonical(args.repo) as canonical:
        engine = Integrator(canonical)
        verdict = engine.integrate(data, args.candidate)
        return _emit(args, Stopped(verdict), canonical.repo.workdir)
