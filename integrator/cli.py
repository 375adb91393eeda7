"""The `integrator` command line: one dispatch, each command a typed function returning an exit code.

Subcommands live in `integrator/commands/<name>.py`; each module exposes
`register(subparsers)` which adds its parser and sets `func` to a handler
`(args: argparse.Namespace) -> int`. One handler here maps domain errors to exit codes.

Only the module of the command being run is imported (agents call `integrator submit`
and `integrator guard` in tight loops, so start-up time matters); `integrator --help`
imports them all.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

from integrator import commands
from integrator.errors import EXIT_INFRA, IntegratorError
from integrator.escape import visible
from integrator.version import __version__

DESCRIPTION = """\
A fencing integration gate for repositories that many coding agents write at once.

Coordinators issue ownership contracts (integrator contract), agents submit candidates
(integrator submit), a daemon proves and lands them (integrator serve), CI runs the same
checks once (integrator gate), release managers review what was fenced (integrator review).
Upstream, planners cut work into tasks with disjoint write sets (integrator plan), agents
claim them atomically (integrator task), a write guard stops a write outside the contract
before it happens (integrator guard), and shared-checkout fleets commit only owned paths
(integrator commit).

Exit codes: 0 accepted/ok, 1 fenced, 3 needs review, 2 usage or configuration error,
4 infrastructure error (retryable).
"""


# Commands whose module is not named after them.
_MODULE_OF = {"integrate": "gate", "server-hook": "server_hook"}


def _modules() -> list[str]:
    import pkgutil

    return sorted(
        info.name
        for info in pkgutil.iter_modules(commands.__path__)
        if not info.name.startswith("_")
    )


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser; with `command`, only that command's module is imported and registered."""
    parser = argparse.ArgumentParser(
        prog="integrator",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"integrator {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    names = _modules()
    wanted = _MODULE_OF.get(command or "", command)
    for name in [wanted] if wanted in names else names:
        module = importlib.import_module(f"integrator.commands.{name}")
        module.register(sub)
    return parser


def _absolute_paths(args: argparse.Namespace) -> None:
    """Every path argument made absolute once, at start-up: the work below runs git in other
    folders (the canonical repository, an agent's clone), where a relative path would name
    another file."""
    for name, value in vars(args).items():
        if isinstance(value, Path):
            setattr(args, name, value.absolute())
        elif isinstance(value, list) and value and all(isinstance(v, Path) for v in value):
            setattr(args, name, [v.absolute() for v in value])


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    command = arguments[0] if arguments and not arguments[0].startswith("-") else None
    if arguments == ["guard"]:
        # The hook's own form, run before every write an agent makes: no parser to build.
        from integrator.commands.guard import run_hook

        args = argparse.Namespace(allow_outside=[], func=run_hook)
    else:
        parser = build_parser(command)
        args = parser.parse_args(arguments)
        if getattr(args, "func", None) is None:
            parser.print_help()
            return 2
    try:
        _absolute_paths(args)
        code: int = args.func(args)
    except IntegratorError as err:
        print(f"integrator: error: {visible(str(err))}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as err:  # the last resort: say what broke, never a silent exit 0
        import structlog

        # On standard error, whatever the logging setup: standard output may be carrying
        # a document (gate --format sarif …) that a traceback would corrupt.
        log = structlog.wrap_logger(structlog.PrintLogger(file=sys.stderr))
        log.exception("unexpected error")
        print(
            f"integrator: unexpected error: {type(err).__name__}: {visible(str(err))}",
            file=sys.stderr,
        )
        return EXIT_INFRA
    return code


if __name__ == "__main__":
    raise SystemExit(main())
