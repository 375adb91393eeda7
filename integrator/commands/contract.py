"""`integrator contract …` — the coordinator's operations on ownership contracts."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from integrator import refnames
from integrator.commands._common import (
    add_json,
    add_repo,
    duration,
    print_json,
    read_input,
    say,
    write_output,
    wrote,
)
from integrator.commands._contract_rollout import register_rollout
from integrator.errors import UsageError
from integrator.limits import DEFAULT_MAX_PATCH_BYTES

if TYPE_CHECKING:
    from integrator.documents.contract import OwnershipContract


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "contract",
        help="issue, renew, reclaim, expand, revoke, show and list ownership contracts",
        description="The coordinator's operations on ownership contracts and their claims "
        f"({refnames.CLAIMS}<task>). Every write is a compare-and-swap.",
    )
    inner = parser.add_subparsers(dest="contract_command", metavar="ACTION", required=True)
    _register_issue(inner)
    _register_changes(inner)
    _register_request(inner)
    _register_reading(inner)
    register_rollout(inner)


def _register_issue(inner: Any) -> None:
    issue = inner.add_parser(
        "issue",
        help="issue a contract (and register its claim when the repository is initialized)",
        description="Print (or write with -o) a new coding.workspace.ownership.v1 contract. In "
        "a repository prepared with `integrator init` the claim is registered too, and a "
        "contract whose paths or resources overlap another live claim is refused (see the "
        "README for the overlap rule) unless --force-shared.",
    )
    add_repo(issue)
    issue.add_argument("--task", required=True, help="task id (one git ref name component)")
    issue.add_argument("--attempt", help="attempt id (default: generated)")
    issue.add_argument("--base", help="base commit (default: the queue head, else HEAD)")
    issue.add_argument(
        "--path", action="append", required=True, metavar="GLOB", help="allowed path glob"
    )
    issue.add_argument("--deny", action="append", default=[], metavar="GLOB", help="denied glob")
    issue.add_argument(
        "--resource", action="append", default=[], metavar="KIND:NAME", help="semantic resource"
    )
    issue.add_argument("--lease", type=duration, default=timedelta(minutes=30), help="e.g. 30m")
    issue.add_argument("--max-patch-bytes", type=int, default=DEFAULT_MAX_PATCH_BYTES)
    issue.add_argument("--holder", default="agent", help="who holds the lease")
    issue.add_argument("--worktree", help="worktree id the contract is bound to")
    issue.add_argument("--force-shared", action="store_true", help="allow overlap with live claims")
    issue.add_argument("-o", "--output", metavar="FILE", help="write the contract here")
    issue.add_argument(
        "--key-out",
        metavar="FILE",
        help="write the attempt key issued with the contract here (mode 0600; default: "
        "FILE.key beside --output, refused inside a git work tree that does not ignore it)",
    )
    issue.set_defaults(func=run_issue)


def _register_request(inner: Any) -> None:
    request = inner.add_parser(
        "request-expansion",
        help="(agent) write an expansion request integrator can verify, from the workspace",
        description="Write an integrator.expansion.v1 request for the contract bound to the "
        "worktree (or --contract FILE): what to add, and the workspace's whole current "
        "state (tracked and untracked files) as a git tree id with its HEAD, so that "
        "`contract expand` can verify the workspace has not already written what it asks "
        "for. Ask before writing: a request whose workspace already changed an added path "
        "is routed to review, nothing granted. --send files it with the repository instead "
        "(pending: `contract list` shows it, the coordinator grants it with `contract "
        "expand --id ID`; exit 3) and prints the answer; only what the policy's [expansion] "
        "auto_grant covers is granted and bound at once (exit 0). Sent again after the "
        "grant, it binds the granted contract to the worktree.",
    )
    request.add_argument("--worktree", type=Path, default=Path(), metavar="PATH")
    request.add_argument("--contract", metavar="FILE", help="the contract (default: the bound one)")
    request.add_argument("--add-path", action="append", default=[], metavar="GLOB")
    request.add_argument("--add-resource", action="append", default=[], metavar="KIND:NAME")
    request.add_argument("-o", "--output", metavar="FILE", help="write the request here")
    request.add_argument(
        "--send",
        action="store_true",
        help="file the request for the coordinator (bound contract only) and print the answer "
        "as JSON",
    )
    request.set_defaults(func=run_request)


def run_request(args: argparse.Namespace) -> int:
    from integrator.fleet.expansion import request_expansion, send_expansion

    if args.send:
        if args.contract or args.output:
            raise UsageError("--send files the bound contract's request; drop --contract/-o")
        document, code = send_expansion(args.worktree, args.add_path, args.add_resource)
        print_json(document)
        return code
    contract = (lambda: read_input(args.contract)) if args.contract else None
    request = request_expansion(args.worktree, args.add_path, args.add_resource, contract=contract)
    write_output(request.to_json(), args.output)
    wrote(f"the expansion request of task {request.task_id}", args.output)
    return 0


def _register_changes(inner: Any) -> None:
    """renew, reclaim, expand, dismiss, revoke: every one a compare-and-swap."""
    renew = inner.add_parser("renew", help="extend a lease (same generation and contract)")
    add_repo(renew)
    renew.add_argument("--task", required=True)
    renew.add_argument(
        "--until", required=True, help="RFC 3339 time, or a duration from now (e.g. 30m)"
    )
    add_json(renew)
    renew.set_defaults(func=run_renew)

    reclaim = inner.add_parser(
        "reclaim", help="take over an expired lease: generation + 1, new attempt"
    )
    add_repo(reclaim)
    reclaim.add_argument("--task", required=True)
    reclaim.add_argument("--force", action="store_true", help="even if the lease is still valid")
    reclaim.add_argument("--holder", help="the new holder (default: the old one)")
    reclaim.add_argument("--lease", type=duration, default=timedelta(minutes=30))
    reclaim.add_argument("--base", help="base for the new attempt (default: the queue head)")
    reclaim.add_argument("-o", "--output", metavar="FILE", help="write the new contract here")
    reclaim.add_argument(
        "--key-out",
        metavar="FILE",
        help="write the attempt key issued with the contract here (mode 0600; default: "
        "FILE.key beside --output, refused inside a git work tree that does not ignore it)",
    )
    reclaim.set_defaults(func=run_reclaim)

    expand = inner.add_parser(
        "expand",
        help="grant an expansion request (CAS on generation and digest) or route it to review",
        description="Grant an integrator.expansion.v1 request: generation + 1 with the added "
        "paths and resources. When it cannot be granted (stale generation or digest, overlap "
        "with another live claim, claim not live) the claim is not changed, the request is "
        f"recorded as pending under {refnames.EXPANSIONS}<task>/<id> (see `contract "
        "list`), and the exit code is 3. Re-running a pending request that can now be "
        "granted closes it; --id grants a recorded one (an agent's filed request) by its id.",
    )
    add_repo(expand)
    which = expand.add_mutually_exclusive_group(required=True)
    which.add_argument("--request", metavar="FILE", help="expansion request JSON")
    which.add_argument("--id", metavar="ID", help="a pending request's id (`contract list`)")
    expand.add_argument("-o", "--output", metavar="FILE", help="write the new contract here")
    expand.add_argument(
        "--key-out",
        metavar="FILE",
        help="write the attempt key issued with the contract here (mode 0600; default: "
        "FILE.key beside --output, refused inside a git work tree that does not ignore it)",
    )
    expand.set_defaults(func=run_expand)

    dismiss = inner.add_parser(
        "dismiss", help="close a pending expansion request without granting it"
    )
    add_repo(dismiss)
    dismiss.add_argument("id", help="the request id (from `contract list`)")
    dismiss.add_argument("--reason", default="dismissed by the coordinator")
    add_json(dismiss)
    dismiss.set_defaults(func=run_dismiss)

    revoke = inner.add_parser("revoke", help="revoke a live claim")
    add_repo(revoke)
    revoke.add_argument("--task", required=True)
    revoke.add_argument("--reason", default="revoked by the coordinator")
    add_json(revoke)
    revoke.set_defaults(func=run_revoke)


def _register_reading(inner: Any) -> None:
    show = inner.add_parser(
        "show",
        help="show a claim, its contract and its history (also once archived)",
        description="The claim of a task, its contract, its history and its expansion "
        f"requests. A finished claim folded into {refnames.ARCHIVE}claims by "
        "`integrator refs archive` is read from there (`archived` says when).",
    )
    add_repo(show)
    show.add_argument("--task", required=True)
    add_json(show)
    show.set_defaults(func=run_show)

    listing = inner.add_parser(
        "list", help="list every claim and the expansion requests waiting for review"
    )
    add_repo(listing)
    listing.add_argument(
        "--archived",
        action="store_true",
        help=f"also the finished claims folded into {refnames.ARCHIVE}claims",
    )
    listing.add_argument(
        "--live",
        action="store_true",
        help="only the live claims (not consumed or revoked, lease not over)",
    )
    add_json(listing)
    listing.set_defaults(func=run_list)


def _key_destination(args: argparse.Namespace) -> Path | None:
    """Where the attempt key goes (--key-out, else FILE.key beside --output), checked before
    anything is issued: a key refused afterwards would leave a live claim nobody can use."""
    from integrator.fleet.keys import tracked_tree_problem

    out = args.key_out or (args.output + ".key" if args.output not in (None, "-") else None)
    if out is None:
        return None
    problem = tracked_tree_problem(Path(out))
    if problem:
        raise UsageError(problem)
    return Path(out)


def run_issue(args: argparse.Namespace) -> int:
    from integrator.records.claims import IssueRequest
    from integrator.records.contract_views import issue_contract

    args.key_destination = _key_destination(args)
    request = IssueRequest(
        task_id=args.task,
        paths=tuple(args.path),
        deny=tuple(args.deny),
        resources=tuple(args.resource),
        attempt_id=args.attempt,
        base=args.base,
        lease=args.lease,
        holder=args.holder,
        max_patch_bytes=args.max_patch_bytes,
        worktree_id=args.worktree,
    )
    contract, registered = issue_contract(args.repo, request, force_shared=args.force_shared)
    if not registered:
        say(
            "integrator: note: repository not initialized; the claim was not registered "
            "(run integrator init to enforce live claims)",
            err=True,
        )
    write_output(contract.to_json(), args.output)
    wrote(_described(contract), args.output)
    if registered:
        _hand_out_key(args, contract)
    return 0


def _described(contract: OwnershipContract) -> str:
    return (
        f"the contract of task {contract.task_id} (generation {contract.ownership_generation}, "
        f"attempt {contract.attempt_id}, lease until "
        f"{_lease_column(contract.lease.expires_at.isoformat())})"
    )


def _hand_out_key(args: argparse.Namespace, contract: OwnershipContract) -> None:
    """Write the attempt key issued with `contract` where the agent gets it: --key-out,
    else beside the contract file (`FILE.key`); said on stderr either way."""
    from integrator.fleet.keys import hand_out
    from integrator.records.contract_views import issued_key_of

    key = issued_key_of(args.repo, contract)
    if key is None:
        return
    out = args.key_destination
    if out is None:
        say(
            f"integrator: the attempt key is in the key store of {args.repo} (hand it to the "
            "agent with the contract: --key-out FILE writes a copy)",
            err=True,
        )
        return
    hand_out(out, key)
    say(f"integrator: attempt key written to {out} (mode 0600; the agent signs with it)", err=True)


def run_renew(args: argparse.Namespace) -> int:
    from integrator.records.contract_views import renew_contract, summary

    claim, until = renew_contract(args.repo, args.task, args.until)
    doc = summary(claim)
    if args.json:
        print_json(doc)
    else:
        say(f"renewed {args.task} generation {doc['generation']} until {until.isoformat()}")
    return 0


def run_reclaim(args: argparse.Namespace) -> int:
    from integrator.records.contract_views import reclaim_contract

    args.key_destination = _key_destination(args)
    contract = reclaim_contract(
        args.repo, args.task, force=args.force, holder=args.holder, lease=args.lease, base=args.base
    )
    write_output(contract.to_json(), args.output)
    wrote(_described(contract), args.output)
    _hand_out_key(args, contract)
    return 0


def run_expand(args: argparse.Namespace) -> int:
    from integrator.records.contract_views import expand_contract, expand_filed

    args.key_destination = _key_destination(args)
    if args.id is not None:
        contract = expand_filed(args.repo, args.id)
    else:
        contract = expand_contract(args.repo, read_input(args.request))
    write_output(contract.to_json(), args.output)
    wrote(_described(contract), args.output)
    _hand_out_key(args, contract)
    return 0


def run_dismiss(args: argparse.Namespace) -> int:
    from integrator.records.contract_views import dismiss_request

    entry = dismiss_request(args.repo, args.id, args.reason)
    if args.json:
        print_json(entry.summary())
    else:
        say(f"dismissed expansion request {args.id} of {entry.record.task_id}: {args.reason}")
    return 0


def run_revoke(args: argparse.Namespace) -> int:
    from integrator.records.contract_views import revoke_contract, summary

    claim = revoke_contract(args.repo, args.task, args.reason)
    if args.json:
        print_json(summary(claim))
    else:
        say(f"revoked {args.task} generation {claim.view.generation}: {args.reason}")
    return 0


def run_show(args: argparse.Namespace) -> int:
    from integrator.records.contract_views import show_contract

    shown = show_contract(args.repo, args.task)
    if args.json:
        print_json(shown.wire())
        return 0
    archived, claim = shown.archived, shown.claim
    for key, value in shown.summary.items():
        say(f"{key:>15}: {value}")
    if archived is not None:
        say(f"{'archived':>15}: in {archived['ref']} (the claim ref was folded into it)")
    say("\nhistory (newest first):")
    for commit, state, message in shown.events:
        say(f"  {commit[:12]}  {state.get('state', '?'):9} {message.splitlines()[0]}")
    if shown.requests or shown.folded:
        say("\nexpansion requests (oldest first):")
        for entry in shown.requests:
            say(f"  {entry.describe()}")
        for entry in shown.folded:
            say(f"  {entry.describe()} (archived)")
    say("\ncontract:")
    print(json.dumps(claim.contract.wire(), indent=2))
    return 0


def _live(row: dict[str, object], now: datetime) -> bool:
    return row["state"] == "live" and datetime.fromisoformat(str(row["leaseExpiresAt"])) > now


def _lease_column(value: object) -> str:
    """A lease end as the table shows it: to the second, in UTC, always 20 characters."""
    moment = datetime.fromisoformat(str(value)).astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def run_list(args: argparse.Namespace) -> int:
    from integrator.records.archive_index import archive_ref
    from integrator.records.contract_views import list_contracts

    listed = list_contracts(args.repo, archived=args.archived)
    rows, pending, folded = listed.rows, listed.pending, listed.folded
    if args.live:
        now = datetime.now(UTC)
        rows = [row for row in rows if _live(row, now)]
    if args.json:
        print_json(rows)
        return 0
    width = max([len("TASK"), *(len(str(row["taskId"])) for row in rows)])
    if not rows:
        say("no live claims" if args.live else "no claims")
    else:
        say(f"{'TASK':{width}} {'GEN':>4} {'STATE':9} {'LEASE UNTIL':20} PATHS")
    for row in rows:
        paths = ", ".join(str(p) for p in row["paths"])  # type: ignore[attr-defined]
        say(
            f"{row['taskId']!s:{width}} {row['generation']!s:>4} {row['state']!s:9} "
            f"{_lease_column(row['leaseExpiresAt'])} {paths}"
        )
    if pending:
        say(f"\n{len(pending)} expansion request(s) waiting for review:")
        for entry in pending:
            say(f"  {entry.describe()}")
        say("  (`contract expand --id ID` grants one, `contract dismiss ID` closes it)")
    if folded and not args.archived:
        say(
            f"\n{folded} finished claim record(s) archived in {archive_ref('claims')} "
            "(--archived lists them; `contract show --task T` shows one)"
        )
    return 0
