"""`integrator validation request|report|show` — external CI's side of validation."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from integrator import jsontext, refnames
from integrator.commands._common import add_json, print_json, read_input, say
from integrator.daemon import logs
from integrator.errors import EXIT_FENCED, EXIT_OK, UsageError
from integrator.limits import ACTOR_CHARS, DETAILS_BYTES, RECORD_TEXT_CHARS

if TYPE_CHECKING:
    from integrator.documents.policy import Validation
    from integrator.records.canonical import Canonical


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "validation",
        help="what CI should validate, and its results (external validation)",
        description='With `[validation] mode = "external"` the promoter runs no command: CI '
        "asks what to test (request), tests the queue head's tree, and records the result "
        "(report) from any CI system. Results live in git "
        f"({refnames.VALIDATIONS}<target>/<head>); the promoter promotes a passing head "
        "and bisects a failing batch, asking for more heads. Docs: docs/validation.md.",
    )
    inner = parser.add_subparsers(dest="validation_command", metavar="ACTION", required=True)

    request = inner.add_parser(
        "request",
        help="print (and record) the queue heads CI should validate now",
        description="Each request names the head (a staging commit on the queue), its tree, "
        "the target it is validated against and the landings it covers; it is recorded, "
        "and lapses (the head fails) when no report comes within the policy's timeout.",
    )
    _common(request)
    request.set_defaults(func=run_request)

    report = inner.add_parser("report", help="record a CI result for a queue head")
    _common(report)
    report.add_argument("--head", required=True, metavar="OID", help="the head validated")
    report.add_argument("--status", required=True, choices=("pass", "fail"), help="the result")
    report.add_argument("--log", metavar="URL", help="where the CI log is")
    report.add_argument(
        "--details", metavar="FILE", help="a JSON document kept with the result (- for stdin)"
    )
    report.add_argument("--reporter", default="external", help="who reports (default external)")
    report.set_defaults(func=run_report)

    show = inner.add_parser("show", help="the results recorded for the unpromoted heads")
    _common(show)
    show.set_defaults(func=run_show)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repo", required=True, type=Path, metavar="PATH", help="canonical repo")
    add_json(parser)


def _open(args: argparse.Namespace) -> tuple[Canonical, Validation]:
    from integrator.promotion.external import open_validation

    logs.configure(stream=logs.STDERR)
    return open_validation(args.repo)


def run_request(args: argparse.Namespace) -> int:
    from integrator.promotion.external import requested, result_document

    canonical, config = _open(args)
    with canonical:
        wanted = requested(canonical, config)
    if args.json:
        print_json([result_document(r) for r in wanted])
        return EXIT_OK
    if not wanted:
        say("nothing to validate now")
    for r in wanted:
        tasks = ", ".join(c.task_id or c.staging[:12] for c in r.landings)
        expires = r.expires_at.isoformat() if r.expires_at else "-"
        say(f"{r.head}  tree {r.tree}  attempt {r.attempt}  until {expires}  covers {tasks}")
    return EXIT_OK


def _control(c: str) -> bool:
    """C0 and C1 control characters and DEL: never in a one-line record field."""
    return ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0


def run_report(args: argparse.Namespace) -> int:
    from integrator.promotion.external import record_report, result_document

    if args.log is not None and (
        len(args.log) > RECORD_TEXT_CHARS or any(_control(c) for c in args.log)
    ):
        raise UsageError(f"--log must be one line of at most {RECORD_TEXT_CHARS} characters")
    if len(args.reporter) > ACTOR_CHARS or any(_control(c) for c in args.reporter):
        raise UsageError(f"--reporter must be one line of at most {ACTOR_CHARS} characters")
    details = read_input(args.details, DETAILS_BYTES) if args.details else None
    if details is not None:
        try:
            jsontext.loads(details)
        except ValueError as err:
            raise UsageError(f"--details is not a JSON document: {err}") from err
    canonical, config = _open(args)
    with canonical:
        head, result, earlier = record_report(
            canonical, config, args.head, args.status, log_url=args.log, details=details,
            reporter=args.reporter,
        )  # fmt: skip
    conflict = earlier and result.status != args.status
    if args.json:
        print_json({**result_document(result), "alreadyDecided": earlier})
    elif conflict:
        say(f"{head} was already decided: {result.status} (by {result.runner}); not recorded")
    else:
        final = "final" if result.final else f"attempt {result.attempt}, asked again"
        say(f"{head} {result.status} ({final})")
    return EXIT_FENCED if conflict else EXIT_OK


def run_show(args: argparse.Namespace) -> int:
    from integrator.promotion.external import queue_validations

    canonical, _ = _open(args)
    with canonical:
        state, rows = queue_validations(canonical)
    if args.json:
        print_json({"target": state.promoted, "queue": state.queue, "heads": rows})
        return EXIT_OK
    say(f"target {state.promoted[:12]}, queue {state.queue[:12]}, {state.pending} unpromoted")
    for row in rows:
        records = row["records"]
        last = records[-1] if records else None
        status = f"{last['status']}{' (final)' if last.get('final') else ''}" if last else "-"
        scope = f" [{row['scope']}]" if "scope" in row else ""
        say(f"  {row['index']:>3} {row['head'][:12]} {row['taskId'] or '-':<20} {status}{scope}")
    return EXIT_OK
