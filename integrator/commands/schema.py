"""`integrator schema export DIR` — write the JSON Schemas of every exchanged document."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from integrator.commands._common import say
from integrator.documents import schemas
from integrator.errors import UsageError


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
    show = inner.add_parser(
        "show",
        help="print one schema",
        description="Print one JSON Schema: "
        + ", ".join(sorted(schemas.MODELS))
        + " (any unambiguous part of a name will do: contract, verdict, task).",
    )
    show.add_argument("name", metavar="NAME", help="the schema (or a part of its name)")
    show.set_defaults(func=run_show)


def run_export(args: argparse.Namespace) -> int:
    for path in schemas.export(args.dir):
        say(path)
    return 0


def schema_named(name: str) -> str:
    """The schema `name` stands for: itself, or the one name it is a part of."""
    known = sorted(schemas.MODELS)
    if name in known:
        return name
    matches = [k for k in known if name.lower() in k]
    if len(matches) == 1:
        return matches[0]
    said = f"{', '.join(matches)} all contain it" if matches else f"known: {', '.join(known)}"
    raise UsageError(f"no one schema is named {name!r}: {said}")


def run_show(args: argparse.Namespace) -> int:
    print(schemas.render(schema_named(args.name)), end="")
    return 0
