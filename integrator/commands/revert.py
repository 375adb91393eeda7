"""`integrator revert` — undo a landing with an explicit revert commit, through the gate."""

from __future__ import annotations

import argparse
from datetime import timedelta
from pathlib import Path
from typing import Any

from integrator.commands._common import add_repo, duration, print_json, say
from integrator.docpath import doc


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "revert",
        help="revert a landed staging commit through the same gate (never a force-push)",
        description="Build an explicit revert commit of STAGING (its parent is STAGING, its "
        "tree STAGING's parent's), issue a claim for it whose contract names exactly the "
        "paths the landing changed and the resources they touch (task revert-<STAGING>, "
        "base STAGING), and send it through the gate and the integration transaction: "
        "directly, or with --spool through the daemon, which holds it for review when it "
        "does not land. A later landing that changed the same lines makes it MERGE_CONFLICT; "
        "one that touched the same semantic resource, RESOURCE_CONFLICT. Exit codes are the "
        f"verdict's (0 landed, 1 fenced, 3 review). See {doc('rollout.md')}.",
    )
    add_repo(parser)
    parser.add_argument("staging", metavar="STAGING_COMMIT", help="the landing to revert")
    parser.add_argument("--reason", help="why, for the revert commit's message")
    parser.add_argument("--actor", help="who (default: user@host)")
    parser.add_argument("--lease", type=duration, default=timedelta(minutes=30))
    parser.add_argument(
        "--force-shared", action="store_true", help="issue even if a live claim overlaps"
    )
    parser.add_argument("--spool", type=Path, metavar="DIR", help="hand it to the daemon")
    parser.add_argument(
        "--wait", type=float, metavar="SECONDS", help="with --spool: wait for the verdict"
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from integrator.review.actions import default_actor
    from integrator.rollout.revert import revert_landing

    done = revert_landing(
        args.repo,
        args.staging,
        actor=args.actor or default_actor(),
        reason=args.reason,
        lease=args.lease,
        force_shared=args.force_shared,
        spool=args.spool,
    )
    head = done.revert.head()
    if done.spool is not None and done.submission is not None:
        from integrator.commands.submit import wait_for

        sid = done.submission
        if not args.json or args.wait is None:
            _say(args, {**head, "submission": sid})
        if args.wait is None:
            return 0
        return wait_for(done.spool, sid, args.wait, as_json=args.json)
    verdict = done.verdict
    assert verdict is not None
    _say(args, {**head, "verdict": verdict.wire()})
    if not args.json:
        codes = ", ".join(dict.fromkeys(v.code.value for v in verdict.violations)) or "-"
        say(f"{verdict.decision.value} ({codes})")
        if verdict.staging_commit:
            say(f"landed as {verdict.staging_commit}")
        else:
            say("not landed; with --spool the daemon holds it for review (integrator review list)")
    return verdict.exit_code


def _say(args: argparse.Namespace, doc: dict[str, Any]) -> None:
    if args.json:
        print_json(doc)
        return
    say(
        f"revert {doc['revertCommit'][:12]} of {doc['reverts'][:12]} (task {doc['revertedTask']}) "
        f"as task {doc['taskId']} generation {doc['generation']}: {len(doc['paths'])} path(s), "
        f"resources {', '.join(doc['resources']) or '-'}"
    )
    if "submission" in doc:
        say(f"handed to the daemon as submission {doc['submission']}")
