"""`integrator sync` — fetch a contract's base (the queue head) into the agent's clone."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from integrator import jsontext, refnames
from integrator.commands._common import print_json, read_input, say
from integrator.documents.bounds import CEILING_LIMITS
from integrator.errors import EXIT_OK, EXIT_USAGE, ContractError
from integrator.fleet.sync import fetch_line, sync_base


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "sync",
        help="fetch the queue so a contract's base is in this clone",
        description="With validation on, contracts are based on the queue head "
        f"({refnames.QUEUE}<target>), which is not on the target branch yet and not in a plain "
        "clone. sync fetches the queue refs from the remote into the clone, then says whether "
        "the contract's base commit is there (exit 0) or still missing (exit 2: the contract "
        "names a base the remote does not serve).",
    )
    parser.add_argument(
        "--contract", required=True, metavar="FILE", help="contract JSON, - for stdin"
    )
    parser.add_argument(
        "--repo", default=".", metavar="PATH", help="the agent's clone (default: .)"
    )
    parser.add_argument(
        "--remote",
        default="origin",
        metavar="NAME|URL",
        help="where to fetch from (default: origin)",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        document = jsontext.loads(read_input(args.contract, CEILING_LIMITS.contract_bytes))
    except ValueError as err:
        raise ContractError(f"contract is invalid: {err}", [str(err)]) from err
    base = document.get("baseCommit") if isinstance(document, dict) else None
    if not isinstance(base, str) or len(base) not in (40, 64):
        raise ContractError("contract is invalid: baseCommit: not a commit id", ["baseCommit"])
    synced = sync_base(Path(args.repo), base, args.remote)
    if args.json:
        print_json(synced.document())
    elif synced.reachable:
        say(f"base {base} is in {args.repo}")
    else:
        say(
            f"base {base} is still missing after {fetch_line(args.remote)}: the remote does not "
            "serve it (ask the coordinator which server the contract was issued on)",
            err=True,
        )
    return EXIT_OK if synced.reachable else EXIT_USAGE
