"""`integrator serve` — run the integration daemon on a spool."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Any

import structlog

from integrator import refnames
from integrator.daemon import logs
from integrator.daemon.health import Check, HealthServer, Metrics, repository_check
from integrator.daemon.intake import Intake
from integrator.daemon.loop import Daemon
from integrator.daemon.notify import Notifier
from integrator.daemon.probe import CachedProbe
from integrator.daemon.settings import Settings, load_settings
from integrator.errors import ConfigurationError
from integrator.landing.engine import Integrator
from integrator.landing.workers import EvaluationPool, default_workers
from integrator.plumbing import git
from integrator.plumbing.packs import Repacker
from integrator.records.canonical import Canonical
from integrator.store.mirror import Mirror, for_spool
from integrator.store.spool import Spool


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "serve",
        help="run the integration daemon on a spool",
        description="Claim submissions from the spool in id order, integrate each, write its "
        "verdict beside it and file it under accepted/, fenced/, review/ or rejected/. "
        "SIGTERM finishes the submissions in hand and exits 0; SIGHUP reloads --config and "
        "the policy. Logs are JSON lines on stdout (console text on a terminal).",
    )
    parser.add_argument("--repo", required=True, type=Path, metavar="PATH", help="canonical repo")
    parser.add_argument("--spool", required=True, type=Path, metavar="DIR", help="the spool")
    parser.add_argument("--once", action="store_true", help="drain the spool, then exit")
    parser.add_argument(
        "--poll", type=float, metavar="SECONDS", help="rescan interval (default 2; also on NFS)"
    )
    parser.add_argument(
        "--no-watch",
        action="store_true",
        help="no inotify, rescan only (for NFS and other file systems without events)",
    )
    parser.add_argument("--http", metavar="HOST:PORT", help="serve /livez, /readyz, /metrics")
    parser.add_argument(
        "--mirror", type=Path, metavar="FILE", help="SQLite registry (default DIR/registry.sqlite3)"
    )
    parser.add_argument("--config", type=Path, metavar="FILE", help="TOML with a [serve] table")
    parser.add_argument(
        "--evaluation-workers",
        type=int,
        metavar="N",
        help="worker processes evaluating candidates of batches of 8 or more, started on the "
        "first such batch (default 0: the daemon evaluates; -1: one fewer than the cores, "
        "at most 4)",
    )
    parser.add_argument(
        "--intake",
        metavar="URL",
        help="also decide submissions pushed to this git repository "
        f"({refnames.SUBMIT}*), publishing verdicts there (polled every --poll, default 1 s)",
    )
    parser.add_argument(
        "--no-promote",
        action="store_true",
        help="run no promoter here (with a [validation] policy another host runs "
        "`integrator promote`); ejections are still held in this spool",
    )
    parser.add_argument(
        "--shadow-policy",
        type=Path,
        metavar="FILE",
        help="also decide every batch again under FILE and log each mismatch "
        "(shadow.mismatch events; see integrator shadow)",
    )
    parser.add_argument(
        "--log-format", choices=("auto", "json", "console"), default="auto", help="default auto"
    )
    parser.set_defaults(func=run)


def settings_from(args: argparse.Namespace) -> Settings:
    """Defaults, then the config file, then what the command line says."""
    settings = load_settings(args.config, Settings())
    if args.poll is not None:
        if args.poll <= 0:
            raise ConfigurationError("--poll must be positive")
        settings = replace(settings, poll=args.poll)
    elif getattr(args, "intake", None) and args.config is None:
        settings = replace(settings, poll=1.0)
    if args.no_watch:
        settings = replace(settings, watch=False)
    workers = getattr(args, "evaluation_workers", None)
    if workers is not None:
        if not -1 <= workers <= 64:
            raise ConfigurationError("--evaluation-workers must be -1 (auto) to 64")
        settings = replace(settings, evaluation_workers=workers)
    return settings


def run(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    logs.configure(fmt=args.log_format, level=settings.log_level)
    log = structlog.get_logger("integrator.serve")
    spool = Spool(args.spool).ensure()
    canonical = Canonical(args.repo)
    canonical.refresh()
    if not canonical.initialized:
        raise ConfigurationError(
            f"{args.repo} is not prepared; run `integrator init --repo {args.repo}`"
        )
    mirror = for_spool(spool.root, args.mirror, timeout=settings.mirror_timeout)
    metrics = Metrics()
    metrics.bind(
        queue_depth=spool.depth,
        mirror_backlog=mirror.backlog.depth,
        mirror_lag=mirror.backlog.lag_seconds,
        mirror_up=lambda: 1.0 if mirror.healthy else 0.0,
    )

    def reload() -> Settings:
        fresh = settings_from(args)
        logs.configure(fmt=args.log_format, level=fresh.log_level)
        return fresh

    shadow = None
    if args.shadow_policy is not None:
        from integrator.documents.policy import PolicyState, read_policy_file
        from integrator.rollout.shadow import DaemonShadow

        read, text = read_policy_file(args.shadow_policy)
        state = PolicyState(read, 0, text)
        shadow = DaemonShadow(canonical, state)
    repacker = Repacker(background=True)  # one child at a time, for both of them
    workers = settings.evaluation_workers
    pool = EvaluationPool(canonical.path, default_workers() if workers < 0 else workers)
    daemon = Daemon(
        spool=spool,
        canonical=canonical,
        engine=Integrator(canonical, repacker=repacker, pool=pool),
        repacker=repacker,
        mirror=mirror,
        settings=settings,
        metrics=metrics,
        notifier=Notifier(),
        reload=reload,
        intake=Intake(canonical, spool, args.intake) if args.intake else None,
        promote=not args.no_promote,
        shadow=shadow,
    )
    daemon.install_signal_handlers()
    server: HealthServer | None = None
    if args.http:
        probe = CachedProbe(daemon.probe)
        server = HealthServer(
            args.http, lambda: readiness(canonical, spool, mirror, daemon, probe), metrics
        )
        server.start()
        host, port = server.address
        log.info("http.listening", host=host, port=port)
    try:
        return daemon.run(once=args.once)
    finally:
        pool.close()
        if server is not None:
            server.stop()
        if shadow is not None:
            shadow.close()
        mirror.close()
        canonical.close()


def readiness(
    canonical: Canonical, spool: Spool, mirror: Mirror, daemon: Daemon, probe: CachedProbe
) -> dict[str, Check]:
    """What /readyz reports: each dependency (the git server and the intake asked, at most
    every few seconds), and whether integration is making progress."""
    problem = spool.check()
    error = mirror.last_error
    checks = {
        "repository": repository_check(git.common_dir(canonical.repo)),
        "spool": Check(problem is None, problem or str(spool.root)),
        "mirror": Check(
            mirror.healthy,
            f"{mirror.backlog.depth()} records waiting" + (f"; {error}" if error else ""),
        ),
        "integration": Check(daemon.last_error is None, daemon.last_error or "ok"),
    }
    trouble = probe()
    if daemon.probe.remote_url is not None:
        down = trouble is not None and trouble.kind == "git-server"
        checks["remote"] = Check(not down, str(trouble) if down else daemon.probe.remote_url)
    if daemon.probe.intake_url is not None:
        shared = daemon.probe.intake_url == daemon.probe.remote_url
        down = trouble is not None and (
            trouble.kind == "intake" or (shared and trouble.kind == "git-server")
        )
        intake = daemon.intake.trouble if daemon.intake is not None else None
        checks["intake"] = Check(
            not down and intake is None,
            str(trouble) if down else (intake or daemon.probe.intake_url),
        )
    if trouble is not None and trouble.kind == "disk":
        checks["repository"] = Check(False, trouble.detail)
    return checks
