"""`integrator report observe` — what observe mode would have fenced, and what is ready."""

from __future__ import annotations

import argparse
from typing import Any

from integrator.commands._common import add_json, add_repo, print_json, say
from integrator.docpath import doc
from integrator.errors import EXIT_OK

CANDIDATES_SHOWN = 20  # per category and code in the text report (--json has them all)


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "report", help="reports read from the repository's records (observe mode)"
    )
    inner = parser.add_subparsers(dest="report_command", metavar="REPORT", required=True)
    observe = inner.add_parser(
        "observe",
        help="what would have been fenced, by category and code, and which category is ready",
        description="Read every recorded submission (landings on the queue, held and archived "
        "submissions) and list each ownership violation by category and code with its "
        "candidates: observed ones would have been fenced, enforced ones were. A category in "
        "observe mode is ready for enforce once no finding of it is marked a false positive "
        "(`integrator review mark-false-positive`); the ready ones are listed in rollout order: "
        "migrations, schemas, codegen, ci, source. Legacy submissions (no ownership "
        f"generation) are listed apart: they only ever reach review. See {doc('rollout.md')}.",
    )
    add_repo(observe)
    observe.add_argument(
        "--since", metavar="WHEN", help="only decisions since then (RFC 3339, or a duration: 7d)"
    )
    add_json(observe)
    observe.set_defaults(func=run_observe)


def run_observe(args: argparse.Namespace) -> int:
    from integrator.records.canonical import Canonical
    from integrator.rollout.observe import observe_report
    from integrator.rollout.records import since_option

    with Canonical(args.repo) as canonical:
        doc = observe_report(canonical, since_option(args.since, canonical.clock())).wire()
    if args.json:
        print_json(doc)
    else:
        render(doc)
    return EXIT_OK


def render(doc: dict[str, Any]) -> None:
    policy, seen = doc["policy"], doc["examined"]
    since = f" since {doc['since']}" if doc["since"] else ""
    say(
        f"observe report{since}: {seen['landings']} landings and {seen['held']} held "
        f"submissions under policy generation {policy['generation']}"
    )
    say("")
    say(f"{'CATEGORY':12} {'MODE':8} {'WOULD FENCE':>11} {'FENCED':>6} {'FALSE POS.':>10}  READY")
    for c in doc["categories"]:
        ready = "ready for enforce" if c["ready"] else ("-" if c["mode"] == "enforce" else "no")
        say(
            f"{c['category']:12} {c['mode']:8} {c['wouldBeFenced']:>11} {c['fenced']:>6} "
            f"{c['falsePositives']:>10}  {ready}"
        )
    for c in doc["categories"]:
        for code in c["codes"]:
            say(f"\n{c['category']} {code['code']} ({code['count']}):")
            for f in code["candidates"][:CANDIDATES_SHOWN]:
                where = f["path"] or f["resource"] or "-"
                what = "landed as" if f["kind"] == "landing" else f"{f['state']} as"
                mark = ""
                if f["falsePositive"]:
                    mark = f"  [false positive: {f['falsePositive']['reason']}]"
                say(
                    f"  {f['mode']:7} {where}  task {f['taskId'] or '-'}  candidate "
                    f"{f['candidate'][:12]} {what} {f['key'][:20]}{mark}"
                )
            if code["count"] > CANDIDATES_SHOWN:
                say(f"  … {code['count'] - CANDIDATES_SHOWN} more (--json lists them all)")
    say("")
    if doc["ready"]:
        say(f"ready for enforce, in order: {', '.join(doc['ready'])}")
        say(f"next: integrator policy enforce {doc['next']} --reason '…'")
    else:
        say("no category in observe mode is ready for enforce")
    legacy = doc["legacy"]
    say(f"\nlegacy submissions (no ownership generation; review only): {len(legacy)}")
    for item in legacy:
        who = item["submitter"] or {}
        say(
            f"  {item['submission']}  {item['state']:8} task {item['taskId'] or '-'}  candidate "
            f"{item['candidate'][:12]}  from {who.get('user', '?')}@{who.get('host', '?')}"
        )
    for item in doc["skipped"]:
        say(f"skipped {item['key']}: {item['why']}")
