"""`integrator promote` — validate queue heads and move the target to those that pass."""

from __future__ import annotations

import argparse
import signal
import threading
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from integrator import refnames
from integrator.commands._common import add_json, configured, print_json, say
from integrator.daemon import logs
from integrator.docpath import doc
from integrator.errors import EXIT_OK, ConfigurationError, IntegratorError

if TYPE_CHECKING:
    from integrator.records.canonical import Canonical
    from integrator.store.mirror import Mirror
    from integrator.store.spool import Spool


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "promote",
        help="validate queue heads and promote the target to those that pass",
        description="With a [validation] section in the policy, landings move only the queue "
        f"({refnames.QUEUE}<target>); the promoter validates the newest queue head "
        "covering at most max_batch unpromoted landings (a command in a clean checkout, or a "
        "result CI reports: integrator validation), moves refs/heads/<target> to it by "
        "compare-and-swap when it passes, and on failure bisects the batch, ejects the first "
        "failing landing (FENCED VALIDATION_FAILED, held for review) and rebuilds the queue "
        "without it. `integrator serve` runs the same promoter in a thread; run this one on "
        "another host (any number of promoters coordinate through git's compare-and-swap). "
        "With --spool, ejected landings that spool decided are held there and records are "
        "mirrored into its registry (a daemon on the spool does that too). Docs: "
        f"{doc('validation.md')}.",
    )
    parser.add_argument(
        "--repo",
        type=Path,
        metavar="PATH",
        help="canonical repo (default: $INTEGRATOR_REPO, else [defaults] repo of the configuration file)",
    )
    configured(parser, repo="required")
    parser.add_argument("--once", action="store_true", help="do what there is to do, then exit")
    parser.add_argument(
        "--poll", type=float, default=2.0, metavar="SECONDS", help="between rounds (default 2)"
    )
    parser.add_argument(
        "--spool", type=Path, metavar="DIR", help="hold ejected landings in this daemon's spool"
    )
    parser.add_argument(
        "--log-format",
        choices=("auto", "json", "console"),
        default="auto",
        help="default auto; with --once and no --log-format, only warnings and errors are "
        "logged (on stderr) before the summary",
    )
    add_json(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from integrator.records.canonical import Canonical
    from integrator.store.mirror import for_spool
    from integrator.store.spool import Spool

    if args.poll <= 0:
        raise ConfigurationError("--poll must be positive")
    # --once ends with a summary of its own: its log says only what went wrong, unless a
    # log format was asked for (a script reading the events).
    quiet = args.once and args.log_format == "auto"
    logs.configure(fmt=args.log_format, level="warning" if quiet else "info", stream=logs.STDERR)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    spool = Spool(args.spool).existing() if args.spool else None
    mirror = for_spool(spool.root) if spool is not None else None
    try:
        with Canonical(args.repo) as canonical:
            canonical.refresh()
            if not canonical.initialized:
                raise ConfigurationError(f"{args.repo} is not prepared; run integrator init")
            summary = _serve(canonical, spool, mirror, args, stop)
    finally:
        if mirror is not None:
            mirror.close()
    if args.json:
        print_json(summary)
        return EXIT_OK
    say(
        f"{summary['target']} at {str(summary['promoted'])[:12]}; queue at "
        f"{str(summary['queue'])[:12]}, {summary['unpromoted']} landings not promoted; "
        f"{summary['validationRuns']} validation runs"
    )
    for r in summary["rounds"]:
        if r["action"] in ("promote", "eject"):
            details = {k: v for k, v in r.items() if k != "action"}
            say(f"  {r['action']}: " + ", ".join(f"{k}={_short(v)}" for k, v in details.items()))
    return EXIT_OK


def _serve(
    canonical: Canonical, spool: Spool | None, mirror: Mirror | None,
    args: argparse.Namespace, stop: threading.Event,
) -> dict[str, Any]:  # fmt: skip
    """Rounds (and reflecting them) until idle with --once, else until a signal."""
    from datetime import UTC, datetime

    import structlog

    from integrator.daemon.memory import Trimmer, bound_git_cache
    from integrator.promotion.promoter import Promoter
    from integrator.promotion.reflect import reflect
    from integrator.promotion.state import read_state

    log = structlog.get_logger("integrator.promote")
    promoter, trimmer = Promoter(canonical), Trimmer()
    bound_git_cache()
    while True:
        try:
            progressed = promoter.run(once=True, poll=args.poll, stop=stop)
            if spool is not None or progressed:
                reflect(canonical, spool, mirror, datetime.now(UTC))
        except IntegratorError as err:
            if args.once:
                raise
            log.error("promote.round_failed", error=str(err))
        trimmer.maybe()  # hours of rounds: freed memory back to the system
        if args.once or stop.wait(args.poll):
            break
    state = read_state(canonical)
    return {
        "target": canonical.target_ref,
        "promoted": state.promoted,
        "queue": state.queue,
        "unpromoted": state.pending,
        "validationRuns": promoter.runs,
        "rounds": [{"action": r.action, **r.detail} for r in promoter.rounds if r.progress],
    }


def _short(value: object) -> str:
    if isinstance(value, list):
        names = [str(v.get("taskId", v)) if isinstance(v, dict) else str(v) for v in value]
        return "[" + ", ".join(names) + "]"
    return str(value)[:12] if isinstance(value, str) else str(value)
