"""The `integrator` command line: one dispatch, each command a typed function returning an exit code.

Subcommands live in `integrator/commands/<name>.py`; each module exposes
`register(subparsers)` which adds its parser and sets `func` to a handler
`(args: argparse.Namespace) -> int`. One handler here maps domain errors to exit codes.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

import structlog

from integrator import __version__, commands
from integrator.errors import EXIT_INFRA, IntegratorError

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="integrator",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"integrator {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"integrator.commands.{info.name}")
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2
    try:
        code: int = args.func(args)
    except IntegratorError as err:
        print(f"integrator: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as err:  # the last resort: say what broke, never a silent exit 0
        structlog.get_logger("integrator").exception("unexpected error")
        print(f"integrator: unexpected error: {type(err).__name__}: {err}", file=sys.stderr)
        return EXIT_INFRA
    return code


if __name__ == "__main__":
    raise SystemExit(main())
