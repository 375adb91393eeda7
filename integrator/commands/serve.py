"""`integrator serve` — run the integration daemon on a spool."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from integrator import refnames
from integrator.commands._common import configured
from integrator.docpath import doc


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "serve",
        help="run the integration daemon on a spool",
        description="Claim submissions from the spool in id order, integrate each, write its "
        "verdict beside it and file it under accepted/, fenced/, review/ or rejected/. "
        "SIGTERM finishes the submissions in hand and exits 0; SIGHUP reloads --config and "
        "the policy. Logs are JSON lines on stdout (console text on a terminal).",
    )
    parser.add_argument(
        "--repo",
        type=Path,
        metavar="PATH",
        help="canonical repo (default: $INTEGRATOR_REPO, else [defaults] repo of the configuration file)",
    )
    parser.add_argument(
        "--spool",
        type=Path,
        metavar="DIR",
        help="the spool (default: $INTEGRATOR_SPOOL, else [defaults] spool of the configuration file)",
    )
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
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="the configuration file ([serve] and [defaults] tables; default: "
        "$INTEGRATOR_CONFIG, else <git dir>/integrator/config.toml, else "
        f"$XDG_CONFIG_HOME/integrator/config.toml; {doc('configuration.md')})",
    )
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
    configured(parser, repo="required", spool="required")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from integrator.configfile import load
    from integrator.daemon.service import ServeOptions, serve

    # The file in effect, read (and checked) now: a misspelled table stops the daemon before
    # it starts, naming it. SIGHUP reads the same file again.
    config = args.config_in_effect if "config_in_effect" in args else load(args.config, args.repo)
    return serve(
        ServeOptions(
            repo=args.repo,
            spool=args.spool,
            once=args.once,
            poll=args.poll,
            no_watch=args.no_watch,
            http=args.http,
            mirror=args.mirror,
            config=config.path,
            evaluation_workers=args.evaluation_workers,
            intake=args.intake,
            no_promote=args.no_promote,
            shadow_policy=args.shadow_policy,
            log_format=args.log_format,
        )
    )
