"""`integrator shadow` — decide every recorded submission again and compare with what happened."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from integrator.commands._common import add_json, add_repo, print_json, read_input, say
from integrator.docpath import doc
from integrator.errors import EXIT_FENCED, EXIT_OK


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "shadow",
        help="decide recorded submissions again (another policy or version) and compare",
        description="Decide every recorded submission a second time — the landings on the "
        "queue and the held submissions — under --policy FILE, or by another integrator run "
        "as --command (it reads one integrator.shadow-request.v1 on standard input and prints "
        "its verdict; `integrator shadow --decide -` is this version's), on the inputs each "
        "had: its contract, candidate, the queue head it was merged onto, the live claim as it "
        "stood. No ref moves; merges happen in memory and in a scratch repository. Compares "
        "the winner (landed or not), the landed tree, every resource determination and every "
        "code, and prints each mismatch with both sides. Exit 0 when all match, 1 on any "
        f"mismatch. See {doc('rollout.md')}.",
    )
    add_repo(parser)
    parser.add_argument("--policy", type=Path, metavar="FILE", help="the policy to decide under")
    parser.add_argument(
        "--command",
        metavar="CMD",
        help="another integrator, e.g. '/opt/new/bin/integrator shadow --decide -'",
    )
    parser.add_argument(
        "--since", metavar="WHEN", help="only decisions since then (RFC 3339, or a duration: 7d)"
    )
    parser.add_argument(
        "--decide",
        metavar="FILE",
        help="answer one shadow request (FILE or - for standard input): print the verdict",
    )
    add_json(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.decide is not None:
        return _answer(args.decide)
    from integrator.rollout.shadow import shadow_repository

    report = shadow_repository(
        args.repo, policy_file=args.policy, command=args.command, since=args.since
    )
    if args.json:
        print_json(report.wire())
    else:
        _print(report)
    return EXIT_FENCED if report.mismatches else EXIT_OK


def _print(report: Any) -> None:
    doc = report.wire()
    say(
        f"compared {doc['compared']} recorded submissions ({doc['landings']} landings, "
        f"{doc['held']} held): {len(doc['mismatches'])} mismatch(es)"
    )
    for m in doc["mismatches"]:
        say(
            f"\n✗ {m['kind']} {m['key']}  task {m['taskId'] or '-'}  candidate {m['candidate'][:12]}"
        )
        say(f"  differs in: {', '.join(m['differ'])}")
        for label in ("recorded", "shadow"):
            side = m[label]
            codes = ", ".join(
                f"{c['code']}{'' if c['mode'] == 'enforce' else ' (observe)'} {c['subject']}"
                for c in side["codes"]
            )
            say(
                f"  {label:8}: {side['decision']:8} landed={side['landed']} "
                f"tree={(side['tree'] or '-')[:12]} codes=[{codes or '-'}] "
                f"resources={side['resources'] or '{}'}"
            )
    for s in doc["skipped"]:
        say(f"skipped {s['key']}: {s['why']}")


def _answer(source: str) -> int:
    """The other end of --command: one request in, its verdict out (exit code of it)."""
    from integrator.rollout.shadow import answer_request

    verdict = answer_request(read_input(source))
    print_json(verdict.wire())
    return verdict.exit_code
