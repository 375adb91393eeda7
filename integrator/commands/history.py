"""`integrator history` — read decisions and review actions back from the registry mirror."""

from __future__ import annotations

import argparse
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

from integrator.commands._common import configured, one_line, print_json, say
from integrator.daemon import logs
from integrator.errors import EXIT_OK, InfrastructureError, UsageError
from integrator.store.meta import REGISTRY_FILE

if TYPE_CHECKING:
    from integrator.store.entries import MirrorRecord


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "history",
        help="decisions and review actions recorded in the registry mirror",
        description="Read the registry mirror (SQLite). With --spool, records still waiting "
        "in the spool's backlog are mirrored first, so the answer is complete when the "
        "registry is reachable. The mirror is a copy for people and dashboards; git holds "
        "the authority. Each accepted submission's row carries where its landing is now "
        "(queued, promoted, ejected, reverted: read from git, as `status` reads it).",
    )
    parser.add_argument(
        "--spool",
        type=Path,
        metavar="DIR",
        help="the daemon's spool (default: $INTEGRATOR_SPOOL, else [defaults] spool of the configuration file)",
    )
    configured(parser, spool="optional")
    parser.add_argument(
        "--mirror", type=Path, metavar="FILE", help=f"the registry (default DIR/{REGISTRY_FILE})"
    )
    parser.add_argument(
        "--repo",
        type=Path,
        metavar="PATH",
        help="the canonical repository (or mirror) whose queue tells where each accepted "
        "submission's landing is now (default: the one the spool's daemon serves)",
    )
    parser.add_argument("--task", metavar="T", help="only this task")
    parser.add_argument("--limit", type=int, metavar="N", help="only the newest N records")
    parser.add_argument("--json", action="store_true", help="print the records as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from integrator.store.mirror import for_spool
    from integrator.store.spool import Spool

    if args.spool is None and args.mirror is None:
        raise UsageError("pass --spool DIR (or --mirror FILE)")
    logs.configure(stream=logs.STDERR)
    if args.spool is not None:
        Spool(args.spool).existing()  # a mistyped spool is not an unavailable registry
    root = args.spool if args.spool is not None else args.mirror.parent
    if args.mirror is not None and not args.mirror.exists():
        raise UsageError(f"{args.mirror} does not exist")
    mirror = for_spool(root, args.mirror, timeout=2.0)
    try:
        if args.spool is not None:
            from integrator.review.reconcile import listing

            # Held copies another host decided are filed (and their rows recorded) first.
            listing(Spool(args.spool), args.repo, mirror)
            try:
                mirror.flush(retry=False)
            except InfrastructureError as err:
                say(f"integrator: warning: {err}", err=True)
            waiting = mirror.backlog.depth()
            if waiting:
                say(f"integrator: {waiting} records are not mirrored yet", err=True)
        try:
            records = mirror.registry.history(task=args.task, limit=args.limit)
        except sqlite3.Error as err:
            raise InfrastructureError(f"cannot read the registry: {err}") from err
    finally:
        mirror.close()
    repo = args.repo or Spool(root).repo_path()
    where = landings_of(repo, records) if repo is not None else {}
    if args.json:
        print_json([_wire(r, where.get(r.key)) for r in records])
        return EXIT_OK
    from integrator.records.landings import summary

    for r in records:
        what = r.action or r.kind
        outcome = r.decision or "-"
        codes = ",".join(dict.fromkeys(r.codes)) or "-"
        found = where.get(r.key)
        say(
            f"{r.at.isoformat(timespec='seconds')}  {r.submission}  {what:<8} {outcome:<8} "
            f"{r.task_id or '-':<16} gen {r.generation if r.generation is not None else '-':<3} "
            f"{codes}" + (f"  {one_line(r.reason)}" if r.reason else "")
            + (f"  [landing: {summary(found)}]" if found is not None else "")
        )  # fmt: skip
    return EXIT_OK


def _wire(record: MirrorRecord, where: dict[str, object] | None) -> dict[str, Any]:
    doc = record.wire()
    if where is not None:
        doc["landing"] = where
    return doc


def landings_of(repo: Path, records: list[MirrorRecord]) -> dict[str, dict[str, object]]:
    """Record key → where its landing is now, for each record of an ACCEPTED decision (or
    approval) that names a staging commit, and of a FENCED one that validation ejected (a
    host that decided it after the ejection: its landing, ejected): `records.landings.
    locate`, as `status` reads it. Nothing when the repository cannot be read (the history
    is still worth printing)."""
    from integrator.documents.verdict import Code
    from integrator.errors import IntegratorError
    from integrator.records.canonical import Canonical
    from integrator.records.landings import Finder

    ejected = Code.VALIDATION_FAILED.value

    landed = [
        r for r in records if r.staging_commit is not None
        and (r.decision == "ACCEPTED" or (r.decision == "FENCED" and ejected in r.codes))
    ]  # fmt: skip
    if not landed:
        return {}
    try:
        with Canonical(repo) as canonical:
            finder = Finder(canonical)
            found = {r.key: finder.wire(r.staging_commit) for r in landed}
    except IntegratorError as err:
        say(f"integrator: warning: cannot tell where landings are: {err}", err=True)
        return {}
    return {key: where for key, where in found.items() if where is not None}
