"""`integrator status` with no submission: the overview (integrator/daemon/overview.py),
once or every few seconds (`--watch`).

With a spool, the daemon serving it is asked first (integrator/daemon/answer.py): it has
the models and the repository open, so the answer costs milliseconds where reading them
here costs half a second of imports. When no daemon answers, the command reads for itself.
Both give the same document, and the text is drawn from it (overview_text.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from integrator.commands._common import print_json, say
from integrator.daemon.overview_text import now, render
from integrator.errors import EXIT_OK, UsageError


def _asked(args: argparse.Namespace) -> dict[str, Any] | None:
    """The overview from the daemon serving --spool, for the repository the command would
    read (--repo, or the spool's own); None when there is no spool or no daemon answers."""
    if args.spool is None:
        return None
    from integrator.daemon.answer import ask
    from integrator.store.meta import read_repo

    root = Path(args.spool).absolute()
    if not root.is_dir():
        return None  # reading for itself says what is wrong with it
    repo = (read_repo(root) if args.repo in (None, ".") else None) or Path(args.repo).absolute()
    return ask(root, repo)


def _read(args: argparse.Namespace) -> dict[str, Any]:
    """The overview read here: the repository, the spool, the registry mirror."""
    from integrator.daemon import logs
    from integrator.daemon.overview import document, gather
    from integrator.store.spool import Spool

    logs.configure(stream=logs.STDERR)  # stdout carries the overview
    spool = Spool(args.spool).existing() if args.spool is not None else None
    repo: Path | None = Path(args.repo).absolute()
    if spool is not None and args.repo in (None, "."):
        repo = spool.repo_path() or repo
    if spool is None and not _looks_like_repository(repo):
        raise UsageError(
            f"{args.repo} is not a git repository: give --repo PATH (the canonical repository) "
            "and/or --spool DIR"
        )
    return document(gather(repo, spool), now())


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
    if args.intake is not None:
        raise UsageError(
            "the overview reads a repository and a spool; --intake is for --submission ID "
            "(on the intake's host, run `integrator status --repo PATH` there)"
        )
    clear = sys.stdout.isatty() and "NO_COLOR" not in os.environ and "TERM" in os.environ
    while True:
        doc = _asked(args) or _read(args)
        if args.json:
            print_json(doc)
        else:
            if args.watch is not None and clear:
                sys.stdout.write("\x1b[H\x1b[2J")
            for line in render(doc, now()):
                say(line)
        if args.watch is None:
            return EXIT_OK
        sys.stdout.flush()
        time.sleep(max(0.2, args.watch))
