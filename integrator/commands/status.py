"""`integrator status` — the verdict of a submission, from the intake or the spool."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from integrator import refnames
from integrator.commands._common import configured, read_input, require_repository
from integrator.commands._progress import Progress
from integrator.commands.submit import report_landing, wait_intake, waiting_in
from integrator.docpath import doc
from integrator.documents.rules import rules_from_bytes
from integrator.errors import InfrastructureError, UsageError
from integrator.fleet.intake import check_filed
from integrator.fleet.submit import (
    landing,
    lifecycle_code,
    verdict_document,
    wait_filed,
    wait_settled,
)
from integrator.plumbing.git import rev_parse_commit
from integrator.store.spool import Spool


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
    if args.spool is None and args.intake is None:
        raise UsageError("status --submission ID needs --spool DIR or --intake URL")
    from integrator.daemon import logs

    logs.configure(stream=logs.STDERR)  # stdout carries the answer
    task_id = _task(args)
    repo = Path(args.repo).resolve()
    if args.intake:
        require_repository(repo, "status --intake fetches the verdict into a repository")
    candidate = rev_parse_commit(repo, args.candidate) if args.candidate else None
    if args.intake:
        if task_id is None:
            raise UsageError(
                "status --intake needs the submission's task: a submission is its task and "
                f"its id ({refnames.VERDICTS}<task>/<id>); give --task TASK or --contract "
                "FILE (the contract it was submitted with)"
            )
        return _wait_intake(args, repo, task_id, candidate)
    if args.canonical:
        raise UsageError("--canonical is for --intake: a spool's daemon reads its own repository")
    spool = Spool(args.spool).existing()
    started = time.monotonic()
    progress = Progress(f"integrator: {args.submission}", args.wait)
    try:
        found = wait_filed(
            spool, args.submission, args.wait,
            waiting=lambda: progress.update(waiting_in(spool, args.submission)),
        )  # fmt: skip
        if task_id is not None or candidate is not None:
            check_filed(*found, sid=args.submission, task_id=task_id, candidate=candidate)
        where = landing(spool, args.submission)
        if args.until == "promoted" and found[0] == "accepted":
            if where is None:
                raise InfrastructureError(
                    f"{args.submission} is ACCEPTED, but this spool's repository has no queue "
                    "to tell where its landing is"
                )
            from integrator.records.landings import describe

            left = max(0.0, args.wait - (time.monotonic() - started))
            wait_settled(spool, args.submission, left, waiting=lambda at: progress.update(
                f"ACCEPTED, waiting for its promotion ({describe(at)})"
            ))  # fmt: skip
            found = wait_filed(spool, args.submission, 0)  # an ejection may have refiled it
            where = landing(spool, args.submission)
    finally:
        progress.done()
    doc, code = verdict_document(args.submission, *found)
    code = lifecycle_code(code, where, args.until)
    rejected = found[0] == "rejected"
    return report_landing(args.submission, doc, code, where, rejected=rejected, as_json=args.json)


def _task(args: argparse.Namespace) -> str | None:
    """The task `--task` or the `--contract` names (both: they must agree)."""
    task_id: str | None = args.task
    if args.contract is not None:
        named = rules_from_bytes(read_input(args.contract)).task_id
        if task_id is not None and task_id != named:
            raise UsageError(f"--task {task_id!r} is not the contract's task {named!r}")
        task_id = named
    return task_id


def _wait_intake(args: argparse.Namespace, repo: Path, task_id: str, candidate: str | None) -> int:
    return wait_intake(
        args.intake, repo, task_id, args.submission, args.wait, candidate=candidate,
        as_json=args.json, until=args.until, canonical=args.canonical,
    )  # fmt: skip
