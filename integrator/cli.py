"""The `integrator` command line: one dispatch, each command a typed function returning an exit code.

Subcommands live in `integrator/commands/<name>.py`; each module exposes
`register(subparsers)` which adds its parser and sets `func` to a handler
`(args: argparse.Namespace) -> int`. One handler here maps domain errors to exit codes.

Only the module of the command being run is imported (agents call `integrator submit`
and `integrator guard` in tight loops, so start-up time matters); `integrator --help`
and `--version` import none: the command list is the table `COMMANDS`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from integrator.commands._table import COMMANDS
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

`integrator status` shows what the queue, the spool and the claims are doing;
`integrator config show` where --repo and --spool come from when they are left out
(INTEGRATOR_REPO, INTEGRATOR_SPOOL, a configuration file); `integrator completion bash`.

Exit codes: 0 accepted/ok, 1 fenced, 3 needs review, 2 usage or configuration error,
4 infrastructure error (retryable).
"""


def _top_parser() -> tuple[argparse.ArgumentParser, Any]:
    parser = argparse.ArgumentParser(
        prog="integrator",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"integrator {__version__}")
    return parser, parser.add_subparsers(dest="command", metavar="COMMAND")


class _Only:
    """The subparsers object handed to a module's `register`, adding only `command`: a module
    that registers two commands (gate, integrate) then lists only the one being run."""

    def __init__(self, sub: Any, command: str) -> None:
        self._sub = sub
        self._spare = argparse.ArgumentParser(prog="integrator").add_subparsers()
        self._command = command

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        into = self._sub if name == self._command else self._spare
        parser: argparse.ArgumentParser = into.add_parser(name, **kwargs)
        return parser


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser. With a known `command`, only that command's module is imported and
    registered; otherwise every command is listed from `COMMANDS`, none imported."""
    parser, sub = _top_parser()
    if command in COMMANDS:
        module = importlib.import_module(f"integrator.commands.{COMMANDS[command][0]}")
        module.register(_Only(sub, command))
        return parser
    for name, (_module, helptext) in COMMANDS.items():
        sub.add_parser(name, help=helptext, add_help=False)
    return parser


def suggest(command: str) -> str:
    """ "unknown command", with the nearest names when there are some."""
    import difflib

    close = difflib.get_close_matches(command, COMMANDS, n=3, cutoff=0.6)
    if not close and len(command) >= 2:
        close = [name for name in COMMANDS if name.startswith(command)][:3]
    hint = f" (did you mean {' or '.join(close)}?)" if close else ""
    return f"integrator: error: unknown command {visible(command)!r}{hint}; see integrator --help"


def _absolute_paths(args: argparse.Namespace) -> None:
    """Every path argument made absolute once, at start-up: the work below runs git in other
    folders (the canonical repository, an agent's clone), where a relative path would name
    another file."""
    for name, value in vars(args).items():
        if isinstance(value, Path):
            setattr(args, name, value.absolute())
        elif isinstance(value, list) and value and all(isinstance(v, Path) for v in value):
            setattr(args, name, [v.absolute() for v in value])


def _print_version(args: argparse.Namespace) -> int:
    print(f"integrator {__version__}")
    return 0


def _parse(arguments: list[str]) -> argparse.Namespace | None:
    """The parsed arguments; None when there is no command to run (said on stderr)."""
    command = arguments[0] if arguments and not arguments[0].startswith("-") else None
    if arguments == ["--version"]:  # no parser needed: a version check costs a bare start-up
        return argparse.Namespace(func=_print_version)
    if arguments == ["guard"]:
        # The hook's own form, run before every write an agent makes: no parser to build.
        from integrator.commands.guard import run_hook

        return argparse.Namespace(allow_outside=[], func=run_hook)
    if command is not None and command not in COMMANDS:
        print(suggest(command), file=sys.stderr)
        return None
    parser = build_parser(command)
    args = parser.parse_args(arguments)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return None
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(list(sys.argv[1:] if argv is None else argv))
    if args is None:
        return 2
    try:
        wanted = getattr(args, "configured_defaults", None)
        if wanted:
            from integrator.configfile import apply_defaults

            apply_defaults(args, wanted)
        _absolute_paths(args)
        if "structlog" in sys.modules:
            # Logs go to standard error unless the command sets them up itself (serve,
            # promote): standard output carries answers — documents, and MCP's protocol.
            from integrator.daemon import logs

            logs.configure(stream=logs.STDERR)
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
