"""`integrator queue pause|resume|status` — stop and restart landings, and see the queue."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from integrator import refnames
from integrator.commands._common import add_json, print_json, say
from integrator.daemon import logs
from integrator.errors import EXIT_OK, ConfigurationError, UsageError
from integrator.escape import visible

if TYPE_CHECKING:
    from integrator.documents.policy import Validation
    from integrator.promotion.state import QueueState


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

    stats = inner.add_parser(
        "stats",
        help="throughput, validations and CI-seconds per landing, time to promotion, flaky "
        "runs and cache hits per scope (from the records in git)",
    )
    common(stats)
    stats.set_defaults(func=run_stats)


def _set(args: argparse.Namespace, *, paused: bool) -> int:
    from datetime import UTC, datetime

    from integrator.records.canonical import Canonical
    from integrator.records.queue_control import set_control
    from integrator.review.actions import default_actor

    logs.configure(stream=logs.STDERR)
    if paused and not args.reason.strip():
        raise UsageError("a pause needs a reason")
    with Canonical(args.repo) as canonical:
        if not paused:
            from integrator.records.queue_control import paused as paused_now

            canonical.refresh()
            if paused_now(canonical) is None:  # nothing to resume: nothing is recorded
                if args.json:
                    print_json({"target": canonical.target, "paused": False, "changed": False})
                else:
                    say(f"landings on {canonical.target} are not paused; nothing to resume")
                return EXIT_OK
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
    if validation is not None and state is not None:
        document["scopes"] = _scopes(args.repo, validation, state)
    if args.json:
        print_json(document)
        return EXIT_OK
    word = "PAUSED" if document["paused"] else "running"
    who = (
        f" by {visible(control.actor)} since {control.at.isoformat(timespec='seconds')}: "
        f"{visible(control.reason or 'no reason given')}"
        if control and control.paused
        else ""
    )
    say(f"{document['target']}: {word}{who}")
    say(f"  target {str(document['targetHead'])[:12]}  queue {str(document['queueHead'])[:12]}")
    if validation is None:
        say("  no [validation]: the target follows the queue")
    elif state is not None:
        say(f"  {state.pending} landings wait for promotion ({validation.mode} validation)")
        for c in state.landings:
            say(f"    {c.staging[:12]}  {c.task_id or '-'}  {c.summary or ''}")
        for name, scope in document.get("scopes", {}).items():
            say(
                f"  scope {name}: {len(scope['waiting'])} waiting, {len(scope['running'])} "
                f"running, window {scope['window']}, failure rate {scope['failureRate']:.0%}, "
                f"flaky {scope['flaky']} ({scope['flakeRate']:.0%}), cache hits "
                f"{scope['cacheHits']}"
            )
            if scope.get("lingerUntil"):
                say(f"    lingering for a fuller batch until {scope['lingerUntil']}")
            for run in scope["running"]:
                flag = "  STALLED" if run["stalled"] else ""
                say(f"    running {run['head'][:12]} for {run['ageSeconds']:.0f} s{flag}")
            for row in scope["waiting"][:20]:
                eta = "?" if row["etaSeconds"] is None else f"~{row['etaSeconds']:.0f} s"
                say(f"    #{row['position']} {visible(row['task'] or '-')} {eta}")
    if problem:
        say(f"  problem: {problem}")
    return EXIT_OK


def _scopes(repo: Path, validation: Validation, state: QueueState) -> dict[str, Any]:
    from datetime import UTC, datetime

    from integrator.promotion.stats import scope_status
    from integrator.records.canonical import Canonical

    with Canonical(repo) as canonical:
        return scope_status(canonical, validation, state, datetime.now(UTC))


def run_stats(args: argparse.Namespace) -> int:
    from integrator.promotion.state import read_state
    from integrator.promotion.stats import figures
    from integrator.records.canonical import Canonical

    logs.configure(stream=logs.STDERR)
    with Canonical(args.repo) as canonical:
        canonical.refresh()
        validation = canonical.policy_state().policy.validation
        if validation is None:
            raise UsageError("the policy has no [validation]: nothing is validated or promoted")
        try:
            state: QueueState | None = read_state(canonical)
        except ConfigurationError:
            state = None
        document = figures(canonical, validation, state)
    if args.json:
        print_json(document)
        return EXIT_OK
    latency = document["landingToPromotionSeconds"]
    say(
        f"{document['target']}: {document['promoted']} promoted, {document['ejections']} "
        f"ejected ({document['innocentEjections']} innocent), {document['runs']} runs, "
        f"{document['ciSeconds']:.1f} CI-seconds"
    )
    say(
        f"  per landing: {document['runsPerLanding']} runs, {document['ciSecondsPerLanding']} "
        f"CI-seconds; landing to promotion p50 {latency['p50']} s, p95 {latency['p95']} s; "
        f"{document['landingsPerHour']} landings/hour"
    )
    for name, scope in document["scopes"].items():
        say(
            f"  scope {name}: {scope['runs']} runs ({scope['failedRuns']} failed, "
            f"{scope['flaky']} flaky), {scope['cacheHits']} cache hits, window {scope['window']}"
        )
    return EXIT_OK
