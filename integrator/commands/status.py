"""`integrator status` — the overview, or the verdict of a submission from the intake or
the spool (integrator/commands/_verdict.py).

Only the parser is built here: the overview, answered by the daemon, must not pay for the
modules that read a verdict."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from integrator import refnames
from integrator.commands._common import configured
from integrator.docpath import doc


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "status",
        help="the overview (queue, spool, held, claims); with --submission, its verdict",
        description="With no --submission: the overview of --repo (default: here) and --spool "
        "— the queue and the promoter, what waits and what is held, the live claims, the last "
        f"decisions ({doc('overview.md')}). "
        "With --submission: read the verdict the daemons published for it: on the intake "
        f"({refnames.VERDICTS}<task>/<id>) or in the spool's decided folders. Exit 0 "
        "ACCEPTED, 1 FENCED, 3 REVIEW, 2 rejected as malformed, 4 no verdict (yet, or "
        "within --wait). ACCEPTED means landed on the queue; with validation on, only "
        f"--until promoted answers 0 when the change is on the target ({doc('lifecycle.md')}).",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--intake", metavar="URL", help="the intake the submission was pushed to")
    where.add_argument("--spool", type=Path, metavar="DIR", help="the spool it was written to")
    parser.add_argument(
        "--submission", metavar="ID", help="the submission id (without it: the overview)"
    )
    parser.add_argument(
        "--watch",
        type=float,
        nargs="?",
        const=2.0,
        metavar="SECONDS",
        help="the overview: print it again every SECONDS (default 2) until interrupted",
    )
    parser.add_argument(
        "--task",
        metavar="TASK",
        help="the task it was submitted under (a submission is its task and its id: required "
        "with --intake, unless --contract names it)",
    )
    parser.add_argument(
        "--contract",
        metavar="FILE",
        help="the contract it was submitted with (gives --task), - for stdin",
    )
    parser.add_argument(
        "--candidate",
        metavar="REV",
        help="the candidate commit submitted (in --repo): a verdict on another is an error",
    )
    parser.add_argument(
        "--repo", default=".", metavar="PATH", help="a repository to fetch into (default: here)"
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait this long for it (saying on stderr what it waits for)",
    )
    parser.add_argument(
        "--until",
        choices=("decided", "promoted"),
        default="decided",
        help="decided (default): the verdict; promoted: also wait (within --wait) until the "
        "landing is on the target: exit 0 promoted, 1 ejected, reverted or no longer on the "
        "queue",
    )
    parser.add_argument(
        "--canonical",
        metavar="URL",
        help="with --intake: the canonical repository, whose queue and target tell where the "
        "landing is (default: the clone's origin when it holds the queue, else the intake)",
    )
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON")
    configured(parser, spool="optional")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.submission is None:
        from integrator.commands._overview import run_overview

        return run_overview(args)
    from integrator.commands._verdict import run_verdict

    return run_verdict(args)
