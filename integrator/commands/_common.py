"""Argument types and output helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from integrator.clock import parse_duration, parse_timestamp
from integrator.errors import UsageError
from integrator.escape import visible, write_text
from integrator.limits import INPUT_BYTES


def duration(text: str) -> timedelta:
    """The argparse type of a duration (see `integrator.clock.parse_duration`)."""
    try:
        return parse_duration(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def timestamp(text: str) -> datetime:
    """The argparse type of an RFC 3339 time with a time zone."""
    try:
        return parse_timestamp(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def read_input(path: str, limit: int = INPUT_BYTES) -> bytes:
    """Read a file, or standard input for `-`: at most `limit` bytes, refused past it before
    the rest is read (a path may name a device, stdin may never end)."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read(limit + 1)
        else:
            with open(path, "rb") as handle:
                data = handle.read(limit + 1)
    except OSError as err:
        raise UsageError(f"cannot read {path}: {err.strerror or err}") from err
    if len(data) > limit:
        raise UsageError(f"{path} is more than the limit of {limit:,} bytes")
    return data


def configured(parser: argparse.ArgumentParser, **wanted: str) -> None:
    """Mark `--repo` / `--spool` of `parser` as given by the environment or the
    configuration file when the command line leaves them out (integrator/configfile.py):
    `required`, `here` (else the current folder) or `optional`."""
    before = parser.get_default("configured_defaults") or {}
    parser.set_defaults(configured_defaults={**before, **wanted})


def add_repo(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--repo",
        metavar="PATH",
        help="the canonical repository, bare or not (default: $INTEGRATOR_REPO, else "
        "[defaults] repo of the configuration file, else the current folder)",
    )
    configured(parser, repo="here")


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def print_json(document: Any) -> None:
    """A document on stdout as JSON (ASCII escapes only when it holds undecodable bytes)."""
    text = json.dumps(document, indent=2, ensure_ascii=False, default=str)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(document, indent=2, ensure_ascii=True, default=str)
    write_text(text + "\n")


def say(text: object = "", *, end: str = "\n", err: bool = False) -> None:
    """A line for a person on stdout (or stderr): every control and format character in it
    spelled out, since names, reasons and patch text come from agents (a terminal escape
    could erase the line above)."""
    line = visible(str(text), keep_newlines=True, keep_tabs=True) + end
    write_text(line, sys.stderr if err else sys.stdout)


def write_output(text: str, output: str | None) -> None:
    if output is None or output == "-":
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return
    data = (text if text.endswith("\n") else text + "\n").encode("utf-8")
    path = Path(output)
    try:
        if path.exists() and not path.is_file():
            # A device or a pipe (/dev/null, /dev/stdout, a FIFO): write into it. Renaming
            # a temporary file over it would replace the device itself.
            with open(path, "wb") as handle:
                handle.write(data)
            return
        from integrator.files import atomic_write  # not on the guard's path

        atomic_write(path, data, sync=False)  # a complete file or none
    except OSError as err:
        raise UsageError(f"cannot write {output}: {err.strerror or err}") from err


def wrote(what: str, output: str | None) -> None:
    """Say on stderr what a command wrote into the file `output` (nothing when it went to
    stdout: the document itself is the answer there)."""
    if output is not None and output != "-":
        say(f"integrator: wrote {what} to {output}", err=True)


def one_line(text: str) -> str:
    """`text` for one cell of a table: its line breaks written as `\\n`, so a reason of
    several lines (an agent's or a validation's) cannot break the rows below it."""
    return text.replace("\r\n", "\n").replace("\n", "\\n")


def require_repository(path: Path, why: str) -> None:
    """UsageError unless `path` is (inside) a git repository; `why` says what needs one."""
    from integrator.errors import ConfigurationError
    from integrator.plumbing.git import open_repo

    try:
        open_repo(path)
    except ConfigurationError:
        raise UsageError(
            f"{why}: {path} is not a git repository (run it in a clone, or give --repo PATH)"
        ) from None
