"""`integrator submit` — hand a candidate commit to the daemon through its spool."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from integrator import refnames
from integrator.commands._common import print_json, read_input, say
from integrator.documents.rules import rules_from_bytes
from integrator.errors import UsageError
from integrator.fleet.submit import (
    document_of,
    publish,
    to_intake,
    verdict_document,
    wait_filed,
    wait_published,
)
from integrator.store.spool import Spool


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "submit",
        help="submit a candidate commit to the daemon's spool",
        description="Write one submission (contract, candidate commit, submitter, time) into "
        "the spool, Maildir-style (tmp/, fsync, rename into new/). Agents whose clone shares "
        "the canonical object store (worktrees) send the commit id; agents on other clones "
        "add --bundle to ship the commits as a git bundle. Agents on other machines use "
        "--intake URL instead: one push carries the candidate and the submission to "
        f"{refnames.SUBMIT}<task>/<id>, and `integrator status` reads the verdict. "
        "Prints the submission id.",
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--spool", type=Path, metavar="DIR", help="the daemon's spool folder")
    where.add_argument(
        "--intake",
        metavar="URL",
        help=f"a git repository the daemons serve (push to {refnames.SUBMIT}...)",
    )
    parser.add_argument(
        "--contract", required=True, metavar="FILE", help="contract JSON, - for stdin"
    )
    parser.add_argument("--candidate", required=True, metavar="REV", help="the candidate commit")
    parser.add_argument(
        "--repo", default=".", metavar="PATH", help="where REV lives (default: current folder)"
    )
    parser.add_argument(
        "--bundle", action="store_true", help="ship the commits as a bundle (another clone)"
    )
    parser.add_argument(
        "--wait",
        type=float,
        nargs="?",
        const=300.0,
        metavar="SECONDS",
        help="wait for the verdict (default 300 s) and exit with its code",
    )
    parser.add_argument(
        "--urgent",
        action="store_true",
        help="the priority lane: the daemon lands it before the rest of its drain",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.intake:
        return _to_intake(args)
    spool = Spool(args.spool)
    doc = publish(
        spool, read_input(args.contract), args.candidate, Path(args.repo), args.bundle,
        urgent=args.urgent,
    )  # fmt: skip
    sid = str(doc["submission"])
    if args.wait is None:
        if args.json:
            print_json(doc)
        else:
            say(sid)
        return 0
    return wait_for(spool, sid, args.wait, as_json=args.json)


def _to_intake(args: argparse.Namespace) -> int:
    if args.bundle:
        raise UsageError("--bundle is for a spool; a push to the intake carries the objects")
    data = read_input(args.contract)
    pushed = to_intake(args.intake, data, args.candidate, Path(args.repo), urgent=bool(args.urgent))
    sid = pushed.submission
    if args.wait is None:
        if args.json:
            print_json({"submission": sid, "candidate": pushed.candidate, "intake": args.intake})
        else:
            say(sid)
        return 0
    task_id = rules_from_bytes(data).task_id  # what to_intake pushed under (it parsed it too)
    return wait_intake(
        args.intake, pushed.repo, task_id, sid, args.wait, candidate=pushed.candidate,
        as_json=args.json,
    )  # fmt: skip


def wait_intake(
    url: str,
    repo: Path,
    task_id: str,
    sid: str,
    timeout: float,
    *,
    candidate: str | None = None,
    as_json: bool,
) -> int:
    """Wait for the intake to publish a verdict for submission `sid` of task `task_id` (on
    `candidate`, when known); print it, return its code."""
    found = wait_published(url, repo, task_id, sid, timeout, candidate=candidate)
    doc, code = document_of(sid, found.rejected, found.document)
    return report_document(sid, doc, code, rejected=found.rejected, as_json=as_json)


def wait_for(spool: Spool, sid: str, timeout: float, *, as_json: bool) -> int:
    """Wait for the daemon to file `sid`; print its verdict and return its exit code."""
    folder, path = wait_filed(spool, sid, timeout)
    doc, code = verdict_document(sid, folder, path)
    return report_document(sid, doc, code, rejected=folder == "rejected", as_json=as_json)


def report_document(
    sid: str, doc: dict[str, Any], code: int, *, rejected: bool, as_json: bool
) -> int:
    """Print a filed or published verdict (or rejection); the exit code it stands for."""
    if as_json:
        print_json(doc)
    elif rejected:
        say(f"{sid} REJECTED: {doc.get('reason')}")
    else:
        verdict = doc["verdict"]
        violations = verdict.get("violations", [])
        codes = ", ".join(dict.fromkeys(v["code"] for v in violations))
        say(f"{sid} {verdict['decision']}" + (f" ({codes})" if codes else ""))
        for v in violations:
            subject = v.get("path") or v.get("resource") or "-"
            say(f"  {v['code']} {subject}: {v['detail']}")
    return code
