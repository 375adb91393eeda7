"""`integrator status` — the verdict of a submission, from the intake or the spool."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from integrator import refnames
from integrator.commands._common import print_json, say
from integrator.commands.submit import filed, verdict_document, wait_for, wait_intake
from integrator.errors import InfrastructureError
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
        where = _landing(spool, args.submission)
        if where is not None:
            from integrator.records.landings import describe

            say(f"  {describe(where)}")
        return code
    deadline = time.monotonic() + args.wait
    while (found := filed(spool, args.submission)) is None:
        if time.monotonic() >= deadline:
            raise InfrastructureError(
                f"no verdict for {args.submission} within {args.wait:g} s; it is still queued "
                "(is the daemon running?)"
            )
        time.sleep(0.1)
    doc, code = verdict_document(args.submission, *found)
    where = _landing(spool, args.submission)
    if where is not None:
        doc["landing"] = where
    print_json(doc)
    return code


def _landing(spool: Spool, sid: str) -> dict[str, object] | None:
    """Where an accepted submission's landing is now: on the queue (maybe rebuilt after an
    ejection, under another staging commit), promoted to the target, or ejected."""
    found = filed(spool, sid)
    repo = spool.repo_path()
    if found is None or found[0] != "accepted" or repo is None:
        return None
    doc, _ = verdict_document(sid, *found)
    staging = doc["verdict"].get("stagingCommit")
    if not isinstance(staging, str):
        return None
    from integrator.records.landings import whereabouts

    return whereabouts(repo, staging)
