"""`integrator queue pause|resume|status` — stop and restart landings, and see the queue."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from integrator import refnames
from integrator.commands._common import add_json, print_json, say
from integrator.daemon import logs
from integrator.errors import EXIT_OK, UsageError


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "queue",
        help="pause or resume landings on the target, and show the queue's state",
        description=f"A pause is recorded in git ({refnames.QUEUE_CONTROL}<target>, one "
        "commit per change, so its log is the history) and read by every daemon before it "
        "claims a batch (in remote mode after fetching) and by the engine before it lands: "
        "submissions wait in the spool, nothing is lost or decided until `resume`. "
        "Promotion goes on while paused.",
    )
    inner = parser.add_subparsers(dest="queue_command", metavar="ACTION", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--repo", required=True, type=Path, metavar="PATH", help="canonical repo")
        add_json(p)

    pause = inner.add_parser("pause", help="stop landings (submissions keep waiting)")
    common(pause)
    pause.add_argument("--reason", required=True, help="why, for the record and the daemons' log")
    pause.add_argument("--actor", default=None, help="who pauses (default: user@host)")
    pause.set_defaults(func=run_pause)

    resume = inner.add_parser("resume", help="land again")
    common(resume)
    resume.add_argument("--reason", default=None, help="why, for the record")
    resume.add_argument("--actor", default=None, help="who resumes (default: user@host)")
    resume.set_defaults(func=run_resume)

    status = inner.add_parser(
        "status", help="paused or not, the queue and target heads, what is not promoted yet"
    )
    common(status)
    status.set_defaults(func=run_status)


def _set(args: argparse.Namespace, *, paused: bool) -> int:
    from datetime import UTC, datetime

    from integrator.records.canonical import Canonical
    from integrator.records.queue_control import set_control
    from integrator.review.actions import default_actor

    logs.configure(stream=logs.STDERR)
    if paused and not args.reason.strip():
        raise UsageError("a pause needs a reason")
    with Canonical(args.repo) as canonical:
        control = set_control(
            canonical, paused=paused, reason=args.reason, actor=args.actor or default_actor(),
            now=datetime.now(UTC),
        )  # fmt: skip
    if args.json:
        print_json(control.wire())
    else:
        say(f"{control.target} {'paused' if paused else 'resumed'}: {control.reason or '-'}")
    return EXIT_OK


def run_pause(args: argparse.Namespace) -> int:
    return _set(args, paused=True)


def run_resume(args: argparse.Namespace) -> int:
    return _set(args, paused=False)


def run_status(args: argparse.Namespace) -> int:
    from integrator.promotion.state import queue_status

    logs.configure(stream=logs.STDERR)
    status = queue_status(args.repo)
    control, validation, state, problem = (
        status.control,
        status.validation,
        status.state,
        status.problem,
    )
    document = status.document
    if args.json:
        print_json(document)
        return EXIT_OK
    word = "PAUSED" if document["paused"] else "running"
    say(
        f"{document['target']}: {word}"
        + (f" ({control.reason})" if control and control.paused else "")
    )
    say(f"  target {str(document['targetHead'])[:12]}  queue {str(document['queueHead'])[:12]}")
    if validation is None:
        say("  no [validation]: the target follows the queue")
    elif state is not None:
        say(f"  {state.pending} landings wait for promotion ({validation.mode} validation)")
        for c in state.landings:
            say(f"    {c.staging[:12]}  {c.task_id or '-'}  {c.summary or ''}")
    if problem:
        say(f"  problem: {problem}")
    return EXIT_OK
