"""`integrator status` with no submission: the overview (integrator/daemon/overview.py),
once or every few seconds (`--watch`)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from integrator.commands._common import print_json, say
from integrator.daemon import logs
from integrator.errors import EXIT_OK, UsageError
from integrator.store.spool import Spool


def _where(args: argparse.Namespace) -> tuple[Path | None, Spool | None]:
    """The repository and the spool to read: --repo (default here; with --spool and no
    --repo, the repository the spool's daemon serves) and --spool."""
    if args.intake is not None:
        raise UsageError(
            "the overview reads a repository and a spool; --intake is for --submission ID "
            "(on the intake's host, run `integrator status --repo PATH` there)"
        )
    spool = Spool(args.spool).existing() if args.spool is not None else None
    repo: Path | None = Path(args.repo).absolute()
    if spool is not None and args.repo in (None, "."):
        repo = spool.repo_path() or repo
    if spool is None and not _looks_like_repository(repo):
        raise UsageError(
            f"{args.repo} is not a git repository: give --repo PATH (the canonical repository) "
            "and/or --spool DIR"
        )
    return repo, spool


def _looks_like_repository(path: Path | None) -> bool:
    from integrator.errors import ConfigurationError
    from integrator.plumbing.git import open_repo

    if path is None:
        return False
    try:
        open_repo(path)
    except ConfigurationError:
        return False
    return True


def run_overview(args: argparse.Namespace) -> int:
    from integrator.daemon.overview import document, gather, now, render

    logs.configure(stream=logs.STDERR)  # stdout carries the overview
    repo, spool = _where(args)
    clear = sys.stdout.isatty() and "NO_COLOR" not in os.environ and "TERM" in os.environ
    while True:
        view = gather(repo, spool)
        moment = now()
        if args.json:
            print_json(document(view, moment))
        else:
            if args.watch is not None and clear:
                sys.stdout.write("\x1b[H\x1b[2J")
            for line in render(view, moment):
                say(line)
        if args.watch is None:
            return EXIT_OK
        sys.stdout.flush()
        time.sleep(max(0.2, args.watch))
