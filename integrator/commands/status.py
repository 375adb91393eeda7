"""`integrator status` — the verdict of a submission, from the intake or the spool."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from integrator import refnames
from integrator.commands._common import print_json, say
from integrator.commands.submit import wait_for, wait_intake
from integrator.fleet.submit import landing, verdict_document, wait_filed
from integrator.store.spool import Spool


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "status",
        help="print a submission's verdict (exit codes as gate); --wait for it",
        description="Read the verdict the daemons published for a submission: on the intake "
        f"({refnames.VERDICTS}<task>/<id>) or in the spool's decided folders. Exit 0 "
        "ACCEPTED, 1 FENCED, 3 REVIEW, 2 rejected as malformed, 4 no verdict (yet, or "
        "within --wait).",
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
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.intake:
        repo = Path(args.repo).resolve()
        return wait_intake(args.intake, repo, args.submission, args.wait, as_json=args.json)
    spool = Spool(args.spool).existing()
    if not args.json:
        code = wait_for(spool, args.submission, args.wait, as_json=False)
        where = landing(spool, args.submission)
        if where is not None:
            from integrator.records.landings import describe

            say(f"  {describe(where)}")
        return code
    found = wait_filed(spool, args.submission, args.wait)
    doc, code = verdict_document(args.submission, *found)
    where = landing(spool, args.submission)
    if where is not None:
        doc["landing"] = where
    print_json(doc)
    return code
