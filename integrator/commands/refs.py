"""`integrator refs archive|count|show` — keep the number of refs bounded."""

from __future__ import annotations

import argparse
from collections import Counter
from datetime import timedelta
from typing import Any

from integrator import refnames
from integrator.commands._common import add_json, add_repo, duration, print_json, say
from integrator.docpath import doc
from integrator.errors import EXIT_OK, UsageError

HISTORY_LIMIT = 1000


KINDS = tuple(refnames.ARCHIVE_PREFIXES)  # the record kinds `refs archive` folds


def kinds(text: str) -> tuple[str, ...]:
    """The argparse type of `--kinds`: a comma-separated list of record kinds."""
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in KINDS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"{', '.join(unknown) or 'nothing'}: name kinds among {','.join(KINDS)}"
        )
    return names


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "refs",
        help="count integrator's refs and fold finished records into archive refs",
        description="Every claim, review record chain, expansion request and verdict is a ref; "
        "hosts slow down past a few thousand refs. `refs archive` folds the finished ones into "
        f"one ref per kind, {refnames.ARCHIVE}<kind>, whose commits keep every archived "
        "chain reachable and index it; `contract show`, `contract list --archived`, review "
        f"history and `refs show` still read them. See {doc('refs.md')}.",
    )
    inner = parser.add_subparsers(dest="refs_command", metavar="ACTION", required=True)

    archive = inner.add_parser(
        "archive",
        help=f"fold finished records older than an age into {refnames.ARCHIVE}<kind>",
        description="Finished records: claims consumed or revoked (not while a held candidate "
        "or an expansion request of the task waits), review chains under "
        f"{refnames.ARCHIVED}, expansion requests granted or dismissed, verdicts (on an "
        "intake repository). Live claims, held candidates and pending requests are never "
        "archived. Each batch (at most 500 ref updates: the archive ref and the deletions, "
        "each expecting the value it was read at) is one ref transaction, so a crash leaves "
        "either the refs or the archive. Running it again archives nothing new.",
    )
    add_repo(archive)
    archive.add_argument(
        "--older-than",
        type=duration,
        default=timedelta(days=30),
        metavar="AGE",
        help="only records whose newest commit is at least this old (default 30d; 0s: all)",
    )
    archive.add_argument(
        "--kinds",
        type=kinds,
        default=KINDS,
        metavar="LIST",
        help=f"comma-separated kinds (default {','.join(KINDS)})",
    )
    archive.add_argument(
        "--dry-run", action="store_true", help="say what would be archived, change nothing"
    )
    add_json(archive)
    archive.set_defaults(func=run_archive)

    count = inner.add_parser(
        "count", help="how many refs the repository holds, by kind, and how many are archived"
    )
    add_repo(count)
    add_json(count)
    count.set_defaults(func=run_count)

    show = inner.add_parser(
        "show",
        help="one record, live or archived, and its history",
        description="Find a record by kind and name (claims: the task id; archived: the "
        "submission id; expansions and verdicts: TASK/ID) among the refs, else in the "
        "archive's index, and print its chain, newest first.",
    )
    add_repo(show)
    show.add_argument("kind", choices=KINDS, help="the record's kind")
    show.add_argument("name", help="the record's name")
    show.add_argument("--limit", type=int, default=50, help="at most this many commits (50)")
    add_json(show)
    show.set_defaults(func=run_show)


def run_archive(args: argparse.Namespace) -> int:
    from integrator.records.archive_index import archive_ref
    from integrator.records.canonical import Canonical
    from integrator.records.census import archive_kinds

    with Canonical(args.repo) as canonical:
        done = archive_kinds(canonical, args.kinds, args.older_than, dry_run=args.dry_run)
    reports, before, after, seconds = done.reports, done.before, done.after, done.seconds
    if args.json:
        print_json(done.wire())
        return EXIT_OK
    verb = "would archive" if args.dry_run else "archived"
    for report in reports:
        batches = f"{report.transactions} transaction(s), {report.commits} archive commit(s)"
        line = f"{report.kind}: {verb} {len(report.archived)}"
        if report.archived:
            line += f" in {batches} into {archive_ref(report.kind)}"
        say(line)
        why = Counter(reason.split(" (", 1)[0] for _, reason in report.kept)
        for reason, n in sorted(why.items()):
            say(f"  kept {n}: {reason}")
    say(f"refs: {before} before, {after} after ({seconds:.2f}s)")
    return EXIT_OK


def run_count(args: argparse.Namespace) -> int:
    from integrator.records.canonical import Canonical
    from integrator.records.census import count_document

    with Canonical(args.repo) as canonical:
        doc = count_document(canonical)
    if args.json:
        print_json(doc)
        return EXIT_OK
    say(f"{doc['total']} refs, {doc['integrator']} under {refnames.NAMESPACE}")
    for folder, n in doc["byFolder"].items():
        say(f"  {folder:<16} {n:>8}")
    say("records (refs, archived):")
    for kind, row in doc["records"].items():
        say(f"  {kind:<16} {row['refs']:>8} {row['archived']:>8}")
    if doc["advice"]:
        say(f"integrator: note: {doc['advice']}", err=True)
    return EXIT_OK


def run_show(args: argparse.Namespace) -> int:
    from integrator.records.canonical import Canonical
    from integrator.records.census import show_document

    if args.limit < 1 or args.limit > HISTORY_LIMIT:
        raise UsageError(f"--limit must be between 1 and {HISTORY_LIMIT}")
    with Canonical(args.repo) as canonical:
        doc = show_document(canonical, args.kind, args.name, args.limit)
    chain = doc["history"]
    if args.json:
        print_json(doc)
        return EXIT_OK
    for key, value in doc.items():
        if key != "history":
            say(f"{key:>12}: {value}")
    say("\nhistory (newest first):")
    for item in chain:
        say(f"  {item['commit'][:12]}  {item['subject']}")
    return EXIT_OK
