"""`integrator contract pause|resume|reissue` — the coordinator's steps during and after an
incident (docs/rollout.md), registered beside the other `contract` actions."""

from __future__ import annotations

import argparse
from datetime import timedelta
from pathlib import Path
from typing import Any

from integrator import refnames
from integrator.commands._common import add_json, add_repo, duration, print_json, say, write_output


def register_rollout(inner: Any) -> None:
    """pause, resume, reissue: the coordinator's steps during and after an incident."""
    for verb, what in (
        ("pause", "stop new contracts from being issued (existing ones keep working)"),
        ("resume", "issue new contracts again"),
    ):
        p = inner.add_parser(
            verb,
            help=what,
            description=f"Pause or resume new claims: a commit on {refnames.PAUSE} (its "
            f"history is `git log {refnames.PAUSE}`), moved by compare-and-swap with the "
            "claims index. While paused, issue, reclaim, expand and reissue refuse, naming the "
            "reason; renewals, revocations and landings of existing contracts go on.",
        )
        add_repo(p)
        p.add_argument("--reason", required=verb == "pause", help="why, for the record")
        p.add_argument("--actor", help="who (default: user@host)")
        add_json(p)
        p.set_defaults(func=run_pause, state="paused" if verb == "pause" else "resumed")

    reissue = inner.add_parser(
        "reissue",
        help="reissue contracts a policy change revoked, one at a time",
        description="Reissue claims revoked by a policy change (policy set, observe, enforce) "
        "under the policy now in force: generation + 1, a new attempt, the same paths, "
        "resources and holder, on the queue head. One task per run by default "
        "(--one-at-a-time): the order of --task, else task id order; --all reissues every one "
        "in turn. A task whose paths or resources now overlap a live claim is refused and stays "
        "revoked. Agents of the old contracts stay fenced (STALE_GENERATION).",
    )
    add_repo(reissue)
    how = reissue.add_mutually_exclusive_group()
    how.add_argument(
        "--one-at-a-time", action="store_true", help="reissue the next task only (the default)"
    )
    how.add_argument("--all", action="store_true", help="reissue every waiting task")
    reissue.add_argument("--task", action="append", default=[], metavar="T", help="only T (repeat)")
    reissue.add_argument("--lease", type=duration, default=timedelta(minutes=30))
    reissue.add_argument(
        "--out-dir", type=Path, metavar="DIR", help="write each new contract to DIR/<task>.json"
    )
    add_json(reissue)
    reissue.set_defaults(func=run_reissue)


def run_pause(args: argparse.Namespace) -> int:
    from integrator.records.canonical import Canonical
    from integrator.records.pause import set_pause
    from integrator.review.actions import default_actor

    reason = args.reason or "resumed by the coordinator"
    with Canonical(args.repo) as canonical:
        state = set_pause(canonical, args.state, reason, args.actor or default_actor())
    if args.json:
        print_json(state.wire())
    else:
        say(state.describe())
    return 0


def run_reissue(args: argparse.Namespace) -> int:
    from integrator.records.canonical import Canonical
    from integrator.rollout.reissue import reissue

    with Canonical(args.repo) as canonical:
        outcomes, waiting = reissue(canonical, tasks=args.task, every=args.all, lease=args.lease)
    rows: list[dict[str, object]] = []
    for outcome in outcomes:
        row = outcome.row()
        if outcome.contract is not None and args.out_dir is not None:
            contract = outcome.contract
            args.out_dir.mkdir(parents=True, exist_ok=True)
            path = args.out_dir / f"{contract.task_id}.json"
            write_output(contract.to_json(), str(path))
            row["file"] = str(path)
        rows.append(row)
    if args.json:
        print_json({"outcomes": rows, "waiting": waiting})
    else:
        for row in rows:
            if "refused" in row:
                say(f"refused {row['taskId']}: {row['refused']}")
            else:
                where = (
                    f" → {row['file']}"
                    if "file" in row
                    else f" (its contract: `integrator contract show --task {row['taskId']}`; "
                    "--out-dir DIR writes it)"
                )
                say(
                    f"reissued {row['taskId']} generation {row['generation']} ({row['attemptId']}){where}"
                )
        if not rows:
            say("nothing to reissue: no claim is waiting after a policy change")
        say(f"{len(waiting)} still waiting: {', '.join(waiting) or '-'}")
    refused_only = bool(rows) and all("refused" in row for row in rows)
    return 1 if refused_only else 0
