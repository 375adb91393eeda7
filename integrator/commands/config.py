"""`integrator config show` — the configuration in effect and where each value came from."""

from __future__ import annotations

import argparse
from dataclasses import fields
from pathlib import Path
from typing import Any

from integrator.commands._common import add_json, print_json, say
from integrator.docpath import doc
from integrator.errors import EXIT_OK


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "config",
        help="show the effective configuration and where each value came from",
        description="The configuration file in effect (--config FILE, else $INTEGRATOR_CONFIG, "
        "else <git dir>/integrator/config.toml of --repo or of the repository here, else "
        "$XDG_CONFIG_HOME/integrator/config.toml), checked as `serve` checks it, and each "
        "value with its source: the command line, $INTEGRATOR_REPO / $INTEGRATOR_SPOOL, "
        f"the file, or the built-in default ({doc('configuration.md')}).",
    )
    inner = parser.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    show = inner.add_parser("show", help="print the configuration in effect and its sources")
    show.add_argument("--config", type=Path, metavar="FILE", help="this file, not the one found")
    show.add_argument("--repo", type=Path, metavar="PATH", help="find the file from this repo")
    add_json(show)
    show.set_defaults(func=run_show)


def effective(config_path: Path | None, repo: Path | None) -> dict[str, Any]:
    """The file in effect, how it was found, and every value with its source."""
    import os

    from integrator.configfile import ENV_OF, load
    from integrator.daemon.settings import Settings, settings_from

    named = repo or (Path(os.environ[ENV_OF["repo"]]) if os.environ.get(ENV_OF["repo"]) else None)
    config = load(config_path, named)
    source = str(config.path) if config.path is not None else None
    values: dict[str, dict[str, object]] = {}
    for key in ("repo", "spool"):
        found = config.default(key)
        values[f"defaults.{key}"] = (
            {"value": str(found.value), "source": found.source}
            if found is not None
            else {"value": None, "source": "not set"}
        )
    table = config.table("serve")
    settings = settings_from(config.path, table, Settings()) if config.path else Settings()
    for f in fields(Settings):
        key = f.name.replace("_", "-")
        values[f"serve.{key}"] = {
            "value": getattr(settings, f.name),
            "source": source if key in table else "default",
        }
    return {"file": source, "foundBy": config.found_by, "values": values}


def run_show(args: argparse.Namespace) -> int:
    doc = effective(args.config, args.repo)
    if args.json:
        print_json(doc)
        return EXIT_OK
    say(f"configuration file: {doc['file'] or '-'} ({doc['foundBy']})")
    width = max(len(k) for k in doc["values"])
    for key, entry in doc["values"].items():
        value = "-" if entry["value"] is None else entry["value"]
        say(f"  {key:<{width}}  {value!s:<24} {entry['source']}")
    return EXIT_OK
