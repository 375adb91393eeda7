"""`integrator status --submission ID`: the verdict of a submission, from the intake or the
spool, waiting for it (or for its promotion) within --wait."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from integrator import refnames
from integrator.commands._common import read_input, require_repository
from integrator.commands._progress import Progress
from integrator.commands.submit import report_landing, wait_intake, waiting_in
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


def run_verdict(args: argparse.Namespace) -> int:
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
