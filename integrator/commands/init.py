"""`integrator init` — prepare a canonical repository for integration."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from integrator import git
from integrator.commands._common import add_json, add_repo, print_json
from integrator.errors import ConfigurationError
from integrator.policy import default_policy_text, load_policy_file, parse_policy
from integrator.policy_ref import write_policy_commit
from integrator.repository import Canonical


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "init",
        help="prepare a canonical repository (queue ref, policy ref, durable settings)",
        description=(
            "Prepare a canonical repository, bare or not: create the queue ref "
            "refs/integrator/queue/<target> at the target's head, the policy ref "
            "refs/integrator/policy (default or --policy FILE), and durable git settings "
            "(core.fsync covering refs and objects). Running it again changes nothing."
        ),
    )
    add_repo(parser)
    parser.add_argument("--target", help="the canonical branch (default: HEAD's branch, or main)")
    parser.add_argument("--policy", type=Path, help="policy TOML for a new policy ref")
    add_json(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    canonical = Canonical(args.repo)
    repo = canonical.repo
    target = args.target or canonical.target
    target_ref = f"refs/heads/{target}"
    head = canonical.ref(target_ref)
    if head is None:
        raise ConfigurationError(
            f"{target_ref} does not exist in {args.repo}; commit something to {target} first "
            "or pass --target"
        )
    git.set_config(repo, git.DURABLE_CONFIG)
    repo.config["integrator.target"] = target
    actions: list[str] = []
    if not list(repo.config.get_multivar("integrator.repoId")):
        identity = git.repo_identity(repo, target_ref)
        repo.config["integrator.repoId"] = identity
        actions.append(f"recorded repository identity {identity}")
    ops = []
    queue_ref = f"{git.QUEUE_PREFIX}{target}"
    if canonical.ref(queue_ref) is None:
        ops.append(git.update(queue_ref, head, None))
        actions.append(f"created {queue_ref} at {head[:12]}")
    if canonical.ref(git.POLICY_REF) is None:
        if args.policy is not None:
            load_policy_file(args.policy)
            text = args.policy.read_text("utf-8")
        else:
            text = default_policy_text()
        parse_policy(text)
        commit = write_policy_commit(canonical, text, 1, None, "init")
        ops.append(git.update(git.POLICY_REF, commit, None))
        actions.append(f"created {git.POLICY_REF} (generation 1)")
    elif args.policy is not None:
        current = canonical.policy_state()
        if load_policy_file(args.policy) != current.policy:
            raise ConfigurationError(
                "a policy is already set; use `integrator policy set FILE` to change it "
                "(that revokes unconsumed contracts)"
            )
    if ops:
        canonical.updater.apply(ops)
    canonical.close()
    state = Canonical(args.repo).policy_state()
    actions = actions or ["nothing to do: already initialized"]
    result = {
        "repo": str(Path(args.repo).resolve()),
        "target": target,
        "queueRef": queue_ref,
        "policyGeneration": state.generation,
        "policyDigest": state.digest,
        "actions": actions,
    }
    if args.json:
        print_json(result)
    else:
        for action in actions:
            print(action)
        print(f"policy digest {state.digest}")
    return 0
