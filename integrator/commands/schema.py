"""`integrator schema export DIR` — write the JSON Schemas of every exchanged document."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from integrator.commands._common import say
from integrator.documents import schemas


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "schema",
        help="export the JSON Schemas of contracts, verdicts, policies and other documents",
        description="Export JSON Schemas generated from integrator's models.",
    )
    inner = parser.add_subparsers(dest="schema_command", metavar="ACTION", required=True)
    export = inner.add_parser("export", help="write <name>.schema.json files into DIR")
    export.add_argument("dir", type=Path, help="folder to write into (created if missing)")
    export.set_defaults(func=run_export)
    show = inner.add_parser("show", help="print one schema")
    show.add_argument("name", choices=sorted(schemas.MODELS))
    show.set_defaults(func=run_show)


def run_export(args: argparse.Namespace) -> int:
    for path in schemas.export(args.dir):
        say(path)
    return 0


def run_show(args: argparse.Namespace) -> int:
    print(schemas.render(args.name), end="")
    return 0
