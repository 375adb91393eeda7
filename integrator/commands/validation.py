"""`integrator validation request|report|show` — external CI's side of validation."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from integrator import jsontext, refnames
from integrator.commands._common import add_json, print_json, read_input, say
from integrator.daemon import logs
from integrator.errors import EXIT_FENCED, EXIT_OK, ConfigurationError, UsageError
from integrator.limits import ACTOR_CHARS, DETAILS_BYTES, RECORD_TEXT_CHARS

if TYPE_CHECKING:
    from integrator.documents.policy import Validation
    from integrator.documents.promotion import ValidationResult
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
    from integrator.records.canonical import Canonical

    logs.configure(stream=logs.STDERR)
    canonical = Canonical(args.repo)
    canonical.refresh()
    config = canonical.policy_state().policy.validation
    if config is None:
        canonical.close()
        raise ConfigurationError("the policy has no [validation] section (docs/validation.md)")
    return canonical, config


def _document(result: ValidationResult) -> dict[str, Any]:
    doc = result.wire()
    doc["stagingCommit"] = result.head
    return doc


def run_request(args: argparse.Namespace) -> int:
    from integrator.promotion.bisect import next_step
    from integrator.promotion.state import read_state
    from integrator.promotion.validate import request_heads
    from integrator.records import validations

    canonical, config = _open(args)
    with canonical:
        if config.mode != "external":
            raise ConfigurationError(
                'validation mode is "command": the promoter runs the command itself'
            )
        state = read_state(canonical)
        step = next_step(
            state.pending, state.final(), max_batch=config.max_batch,
            concurrency=config.concurrency,
        )  # fmt: skip
        request_heads(canonical, state, step.validate, config)
        state = read_state(canonical)
        wanted = [
            tip[1]
            for landing in state.landings
            for tip in [validations.latest(canonical, state.target, landing.staging)]
            if tip is not None and tip[1].status == "requested"
        ]
    if args.json:
        print_json([_document(r) for r in wanted])
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
    from integrator.promotion.state import read_state
    from integrator.promotion.validate import report

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
        if config.mode != "external":
            # The promoter's own command decides these heads; a report would be a result
            # the command never produced (over a run in progress, even).
            raise ConfigurationError(
                'validation mode is "command": results come from the promoter\'s command, '
                "not from reports"
            )
        state = read_state(canonical)
        head = _full(canonical, args.head)
        result, earlier = report(
            canonical, state, head, args.status, config, log_url=args.log, details=details,
            reporter=args.reporter,
        )  # fmt: skip
    conflict = earlier and result.status != args.status
    if args.json:
        print_json({**_document(result), "alreadyDecided": earlier})
    elif conflict:
        say(f"{head} was already decided: {result.status} (by {result.runner}); not recorded")
    else:
        final = "final" if result.final else f"attempt {result.attempt}, asked again"
        say(f"{head} {result.status} ({final})")
    return EXIT_FENCED if conflict else EXIT_OK


def _full(canonical: Canonical, rev: str) -> str:
    from integrator.plumbing import git

    try:
        return str(git.resolve_commit(canonical.repo, rev).id)
    except ConfigurationError as err:
        raise UsageError(f"--head {rev}: {err}") from err


def run_show(args: argparse.Namespace) -> int:
    from integrator.promotion.state import read_state
    from integrator.records import validations

    canonical, _ = _open(args)
    with canonical:
        state = read_state(canonical)
        rows: list[dict[str, Any]] = []
        for i, landing in enumerate(state.landings, 1):
            tip = validations.latest(canonical, state.target, landing.staging)
            history = validations.chain(canonical, tip[0]) if tip else []
            rows.append(
                {
                    "index": i,
                    "head": landing.staging,
                    "taskId": landing.task_id,
                    "records": [_document(r) for _, r in history],
                }
            )
    if args.json:
        print_json({"target": state.promoted, "queue": state.queue, "heads": rows})
        return EXIT_OK
    say(f"target {state.promoted[:12]}, queue {state.queue[:12]}, {state.pending} unpromoted")
    for row in rows:
        records = row["records"]
        last = records[-1] if records else None
        status = f"{last['status']}{' (final)' if last.get('final') else ''}" if last else "-"
        say(f"  {row['index']:>3} {row['head'][:12]} {row['taskId'] or '-':<20} {status}")
    return EXIT_OK
