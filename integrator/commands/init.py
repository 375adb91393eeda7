"""`integrator init` — prepare a canonical repository for integration."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from integrator import refnames
from integrator.commands._common import add_json, add_repo, print_json, say
from integrator.docpath import doc
from integrator.errors import ConfigurationError, UsageError


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "init",
        help="prepare a canonical repository (queue ref, policy ref, durable settings)",
        description=(
            "Prepare a canonical repository: create the queue ref "
            f"{refnames.QUEUE}<target> at the target's head, the policy ref "
            f"{refnames.POLICY} (default or --policy FILE), and durable git settings "
            "(core.fsync covering refs and objects). Running it again changes nothing. "
            "A repository whose work tree (or a linked worktree) has the target checked "
            "out is refused unless --update-checkout keeps that checkout in step: landings "
            "then wait while it has changes and update its index and files when it is clean "
            "(as git's receive.denyCurrentBranch=updateInstead). "
            "With --remote URL the canonical repository is on a git server: --repo names a "
            "local bare mirror (created when missing, only a cache), and the refs are "
            "created on the server in one atomic push."
        ),
    )
    add_repo(parser)
    parser.add_argument("--target", help="the canonical branch (default: HEAD's branch, or main)")
    parser.add_argument("--policy", type=Path, help="policy TOML for a new policy ref")
    parser.add_argument(
        "--update-checkout",
        action="store_true",
        help="keep work trees that have the target checked out in step with it (records "
        "integrator.updateCheckout=true): a move of the target waits while such a work tree "
        "has tracked or staged changes and updates its index and files when it is clean",
    )
    parser.add_argument(
        "--remote",
        metavar="URL",
        help="the canonical repository's git URL (any URL git can push to with --atomic)",
    )
    parser.add_argument(
        "--remote-key-file",
        type=Path,
        metavar="F",
        help="with --remote: sign every push to the server with this key (its integrator "
        "server-hook checks the signature; see integrator server-hook keygen)",
    )
    parser.add_argument(
        "--intake-key-file",
        type=Path,
        metavar="F",
        help="with --remote: the key that signs verdicts published on an intake that is "
        "another server (the canonical server's key serves an intake on the same URL)",
    )
    parser.add_argument(
        "--verdict-key",
        type=Path,
        metavar="F",
        help="sign every verdict this host's daemon publishes on an intake with the "
        "integrator.verdict-key.v1 key in F (made there, mode 0600, when absent); its "
        "public half is printed: give it to the coordinator (--trust-verdict-key)",
    )
    parser.add_argument(
        "--trust-verdict-key",
        action="append",
        default=[],
        metavar="KEY",
        help="trust verdicts signed by KEY (ed25519:<base64>, repeatable): contracts issued "
        "here carry the trusted keys to their agents, whose readers then believe no other "
        f'verdict ({doc("security.md")}, "Verdict keys")',
    )
    parser.add_argument(
        "--authority-key",
        type=Path,
        metavar="F",
        help="sign every claim, policy and control record written from here with the "
        "integrator.authority-key.v1 key in F (made there, mode 0600, when absent); its "
        "public half is printed: every mirror must trust it (--trust-authority-key)",
    )
    parser.add_argument(
        "--trust-authority-key",
        action="append",
        default=[],
        metavar="KEY",
        help="believe only claims, policies and controls signed by KEY (ed25519:<base64>, "
        "repeatable): a record no trusted key signed is never acted on "
        f'({doc("security.md")}, "Authority keys")',
    )
    add_json(parser)
    parser.set_defaults(func=run)


def _authority(args: argparse.Namespace) -> Callable[[Path], list[str]]:
    """What sets up authority keys in a repository's git folder, before records are written
    (the first policy is signed too)."""

    from integrator.records import verdict_keys

    def configure(git_dir: Path) -> list[str]:
        return verdict_keys.configure(
            git_dir, args.authority_key, args.trust_authority_key, verdict_keys.AUTHORITY
        )

    return configure


def run(args: argparse.Namespace) -> int:
    from integrator.plumbing.remote import INTAKE_KEY_FILE_CONFIG, KEY_FILE_CONFIG
    from integrator.records import verdict_keys
    from integrator.records.canonical import Canonical
    from integrator.records.prepare import prepare, prepare_remote

    policy_text = None
    if args.policy is not None:
        try:
            policy_text = args.policy.read_text("utf-8")
        except OSError as err:
            raise ConfigurationError(f"cannot read policy {args.policy}: {err.strerror}") from err
    keys = {KEY_FILE_CONFIG: args.remote_key_file, INTAKE_KEY_FILE_CONFIG: args.intake_key_file}
    for flag, key_file in (("--verdict-key", args.verdict_key),
                           ("--authority-key", args.authority_key)):  # fmt: skip
        if key_file is not None and not key_file.exists():
            from integrator.fleet.keys import tracked_tree_problem

            problem = tracked_tree_problem(key_file)
            if problem is not None:
                raise UsageError(f"{flag} {key_file}: {problem}")
    if args.remote and args.update_checkout:
        raise UsageError(
            "--update-checkout is for a canonical repository on this host, not a mirror: "
            "a work tree of the server's repository is kept in step by the server's git "
            "(receive.denyCurrentBranch=updateInstead)"
        )
    if args.remote:
        prepared = prepare_remote(
            args.repo,
            args.remote,
            target=args.target,
            policy_text=policy_text,
            key_files={k: v for k, v in keys.items() if v is not None},
            configure=_authority(args),
        )
    elif any(keys.values()):
        raise UsageError("--remote-key-file and --intake-key-file need --remote")
    else:
        from integrator.plumbing.git import open_repo

        keyed = _authority(args)(Path(open_repo(args.repo).path))  # before the first policy
        prepared = prepare(
            args.repo,
            target=args.target,
            policy_text=policy_text,
            update_checkout=args.update_checkout,
        )
        prepared = replace(prepared, actions=(*keyed, *prepared.actions))
    with Canonical(args.repo) as canonical:
        state = canonical.policy_state()
        keeps = canonical.keeps_checkout
        git_dir = Path(canonical.repo.path)
    signing = verdict_keys.configure(git_dir, args.verdict_key, args.trust_verdict_key)
    actions = list(prepared.actions) + signing or ["nothing to do: already initialized"]
    if args.json:
        print_json(
            {
                "repo": str(Path(args.repo).resolve()),
                "remote": args.remote,
                "target": prepared.target,
                "queueRef": prepared.queue_ref,
                "policyGeneration": state.generation,
                "policyDigest": state.digest,
                "updateCheckout": keeps,
                "actions": actions,
            }
        )
    else:
        for action in actions:
            say(action)
        say(f"policy generation {state.generation}, digest {state.digest}")
    return 0
