"""structlog configuration: JSON lines for machines, console rendering on a terminal.

Processors are pure (dict in, dict out); only the renderer at the end does IO. The
daemon logs one summary event per decision (see `daemon.py`), so a log shipper can rebuild
every decision from the JSON lines alone.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TextIO

from integrator.errors import UsageError
from integrator.escape import visible

if TYPE_CHECKING:  # structlog is imported when logging is configured, not to build --help
    from structlog.typing import EventDict, Processor

Format = Literal["auto", "json", "console"]


class LateStream:
    """`sys.stdout` or `sys.stderr` looked up at each write, not at configuration time.

    structlog is configured once per process, but the stream objects can be swapped later
    (pytest's capture, a command run in-process); writing to the current one never fails.
    """

    def __init__(self, name: Literal["stdout", "stderr"]) -> None:
        self.name = name

    def _target(self) -> TextIO:
        stream: TextIO = getattr(sys, self.name)
        return stream

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        self._target().flush()

    def isatty(self) -> bool:
        return self._target().isatty()


def append_to(path: Path) -> TextIO:
    """A log file opened for appending, one line at a time: created 0600 (a log names
    submissions, actors and paths), never through a symbolic link at its name."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as err:
        raise UsageError(f"cannot open the log file {path}: {err.strerror or err}") from err
    return os.fdopen(fd, "a", buffering=1, encoding="utf-8", errors="backslashreplace")


STDOUT = LateStream("stdout")
STDERR = LateStream("stderr")

LEVELS = ("debug", "info", "warning", "error")


def _visible_values(logger: object, method: str, event: EventDict) -> EventDict:
    return {k: visible(v) if isinstance(v, str) else v for k, v in event.items()}


def configure(
    *, fmt: Format = "auto", level: str = "info", stream: TextIO | LateStream | None = None
) -> None:
    """Route structlog to `stream` (stdout by default) as JSON lines or console text.

    `auto` picks console rendering when the stream is a terminal, JSON otherwise.
    """
    import structlog

    out = stream or STDOUT
    if level not in LEVELS:
        raise ValueError(f"log level {level!r} is not one of {', '.join(LEVELS)}")
    console = fmt == "console" or (fmt == "auto" and out.isatty())
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: list[Processor]
    if console:
        # Values come from submissions (reasons, names): a terminal must not obey them. A
        # traceback is plain text whatever is installed (rich's would show locals: a key).
        console_renderer = structlog.dev.ConsoleRenderer(
            colors=out.isatty(), exception_formatter=structlog.dev.plain_traceback
        )
        renderer = [_visible_values, console_renderer]
    else:
        renderer = [
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(ensure_ascii=False, default=str),
        ]
    structlog.configure(
        processors=[*shared, *renderer],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        # LateStream has the three methods PrintLogger uses; it is no typing.TextIO.
        logger_factory=structlog.PrintLoggerFactory(file=out),  # type: ignore[arg-type]
        # Not cached: SIGHUP may change the level, and tests reconfigure per test.
        cache_logger_on_first_use=False,
    )
