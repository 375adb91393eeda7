"""`integrator policy init|show|set` — the integration policy."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

from integrator import refnames
from integrator.commands._common import add_json, add_repo, print_json, say
from integrator.docpath import doc
from integrator.documents.categories import Category
from integrator.errors import ConfigurationError


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "policy", help="print the default policy, show or set the repository's policy"
    )
    inner = parser.add_subparsers(dest="policy_command", metavar="ACTION", required=True)
    init = inner.add_parser("init", help="print the default policy (TOML, documented)")
    init.set_defaults(func=run_init)
    show = inner.add_parser("show", help="print the repository's policy, generation and digest")
    add_repo(show)
    add_json(show)
    show.set_defaults(func=run_show)
    setp = inner.add_parser(
        "set",
        help="replace the policy: generation + 1, every unconsumed contract revoked",
        description=f"Move {refnames.POLICY} to FILE, bump the policy generation and, in "
        "the same ref transaction, revoke every live claim (reissue them under the new digest).",
    )
    add_repo(setp)
    setp.add_argument("file", type=Path, help="policy TOML")
    add_json(setp)
    setp.set_defaults(func=run_set)
    for mode, what in (
        ("observe", "record what it would fence and let it through (after a false block)"),
        ("enforce", "fence it (once observe mode reported no false positives)"),
    ):
        change = inner.add_parser(
            mode,
            help=f"switch one category to {mode}: {what}",
            description=f"Switch CATEGORY to {mode} in the live policy's [enforcement] table "
            "(the policy text is edited in place, comments kept) as a policy change: generation "
            "+ 1 and every unconsumed contract revoked in the same ref transaction, like `policy "
            "set`; the category, the mode, who and why are in the policy commit's message. "
            "Nothing changes when the category is in that mode already. Reissue the revoked "
            "contracts with `integrator contract reissue`. See " + doc("rollout.md") + ".",
        )
        add_repo(change)
        change.add_argument("category", choices=[c.value for c in Category], help="the category")
        change.add_argument("--reason", required=True, help="why, for the record")
        change.add_argument("--actor", help="who (default: user@host)")
        add_json(change)
        change.set_defaults(func=run_mode, mode=mode)


def run_init(args: argparse.Namespace) -> int:
    from integrator.documents.policy import default_policy_text

    print(default_policy_text(), end="")
    return 0


def run_show(args: argparse.Namespace) -> int:
    from integrator.records.canonical import Canonical

    with Canonical(args.repo) as canonical:
        if not canonical.initialized:
            raise ConfigurationError(f"{args.repo} has no policy ref; run integrator init")
        state = canonical.policy_state()
    if args.json:
        print_json({"generation": state.generation, "digest": state.digest, "text": state.text})
    else:
        say(f"# generation {state.generation}, digest {state.digest}")
        print(state.text, end="")
    return 0


def run_set(args: argparse.Namespace) -> int:
    from integrator.documents.policy import load_policy_file
    from integrator.records.canonical import Canonical
    from integrator.records.policy_ref import set_policy

    load_policy_file(args.file)
    with Canonical(args.repo) as canonical:
        if not canonical.initialized:
            raise ConfigurationError(f"{args.repo} has no policy ref; run integrator init first")
        state, revoked = set_policy(canonical, args.file.read_text("utf-8"))
    if args.json:
        print_json({"generation": state.generation, "digest": state.digest, "revoked": revoked})
    else:
        say(f"policy generation {state.generation} ({state.digest})")
        say(f"revoked {len(revoked)} live claim(s): {', '.join(revoked) or '-'}")
    return 0


def run_mode(args: argparse.Namespace) -> int:
    from integrator.records.canonical import Canonical
    from integrator.review.actions import default_actor
    from integrator.rollout.enforcement import change_mode

    with Canonical(args.repo) as canonical:
        done = change_mode(
            canonical,
            Category(args.category),
            args.mode,
            args.reason,
            args.actor or default_actor(),
        )
    state = done.state
    if args.json:
        print_json(
            {
                "category": done.category.value,
                "mode": done.mode,
                "changed": done.changed,
                "generation": state.generation,
                "digest": state.digest,
                "revoked": list(done.revoked),
            }
        )
    elif not done.changed:
        say(f"{done.category.value} is already {done.mode}; nothing changed")
    else:
        say(
            f"{done.category.value} → {done.mode}: policy generation {state.generation} ({state.digest})"
        )
        say(f"revoked {len(done.revoked)} live claim(s): {', '.join(done.revoked) or '-'}")
        if done.revoked:
            say(
                "reissue them: integrator contract reissue "
                f"--repo {shlex.quote(str(args.repo))} --task {shlex.quote(done.revoked[0])} "
                "(one task at a time; --all for every one)"
            )
    return 0
