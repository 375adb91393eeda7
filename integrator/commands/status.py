"""`integrator status` — the verdict of a submission, from the intake or the spool."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from integrator import refnames
from integrator.commands.submit import report_landing, wait_intake
from integrator.errors import InfrastructureError, UsageError
from integrator.fleet.submit import (
    landing,
    lifecycle_code,
    verdict_document,
    wait_filed,
    wait_settled,
)
from integrator.store.spool import Spool


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "status",
        help="print a submission's verdict (exit codes as gate); --wait for it",
        description="Read the verdict the daemons published for a submission: on the intake "
        f"({refnames.VERDICTS}<task>/<id>) or in the spool's decided folders. Exit 0 "
        "ACCEPTED, 1 FENCED, 3 REVIEW, 2 rejected as malformed, 4 no verdict (yet, or "
        "within --wait). ACCEPTED means landed on the queue; with validation on, only "
        "--until promoted answers 0 when the change is on the target (docs/lifecycle.md).",
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--intake", metavar="URL", help="the intake the submission was pushed to")
    where.add_argument("--spool", type=Path, metavar="DIR", help="the spool it was written to")
    parser.add_argument("--submission", required=True, metavar="ID", help="the submission id")
    parser.add_argument(
        "--repo", default=".", metavar="PATH", help="a repository to fetch into (default: here)"
    )
    parser.add_argument(
        "--wait", type=float, default=0.0, metavar="SECONDS", help="wait this long for it"
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
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.intake:
        repo = Path(args.repo).resolve()
        return wait_intake(
            args.intake, repo, args.submission, args.wait, as_json=args.json,
            until=args.until, canonical=args.canonical,
        )  # fmt: skip
    if args.canonical:
        raise UsageError("--canonical is for --intake: a spool's daemon reads its own repository")
    spool = Spool(args.spool).existing()
    started = time.monotonic()
    found = wait_filed(spool, args.submission, args.wait)
    where = landing(spool, args.submission)
    if args.until == "promoted" and found[0] == "accepted":
        if where is None:
            raise InfrastructureError(
                f"{args.submission} is ACCEPTED, but this spool's repository has no queue to "
                "tell where its landing is"
            )
        left = max(0.0, args.wait - (time.monotonic() - started))
        wait_settled(spool, args.submission, left)
        found = wait_filed(spool, args.submission, 0)  # an ejection may have refiled it
        where = landing(spool, args.submission)
    doc, code = verdict_document(args.submission, *found)
    code = lifecycle_code(code, where, args.until)
    rejected = found[0] == "rejected"
    return report_landing(args.submission, doc, code, where, rejected=rejected, as_json=args.json)
