"""Argument types and output helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import json
import re
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from integrator.errors import UsageError
from integrator.files import atomic_write

_DURATION_RE = re.compile(r"(\d+)\s*([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def duration(text: str) -> timedelta:
    """Parse `30m`, `2h`, `1h30m`, `7d`, `45s` into a timedelta."""
    cleaned = text.strip().lower()
    total = 0
    pos = 0
    for match in _DURATION_RE.finditer(cleaned):
        if match.start() != pos:
            break
        total += int(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos != len(cleaned) or not cleaned:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 30m, 2h, 1h30m or 7d")
    return timedelta(seconds=total)


def timestamp(text: str) -> datetime:
    """Parse an RFC 3339 time (a trailing Z is accepted); it must carry a time zone."""
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"{text!r} is not an RFC 3339 time") from err
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} has no time zone (add Z or +00:00)")
    return value


def read_input(path: str) -> bytes:
    """Read a file, or standard input for `-`."""
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(path).read_bytes()
    except OSError as err:
        raise UsageError(f"cannot read {path}: {err.strerror}") from err


def add_repo(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--repo",
        default=".",
        metavar="PATH",
        help="the canonical repository, bare or not (default: the current folder)",
    )


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def print_json(document: Any) -> None:
    print(json.dumps(document, indent=2, ensure_ascii=False, default=str))


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
        atomic_write(path, data, sync=False)  # a complete file or none
    except OSError as err:
        raise UsageError(f"cannot write {output}: {err.strerror or err}") from err
