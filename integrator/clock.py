"""Time: the injectable clock, and the durations people type (`30m`, `1h30m`, `7d`).

Decisions never read the time themselves: callers pass `now`, read from a `Clock`, so
tests and drills can freeze it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from integrator.limits import MAX_DURATION_DAYS

Clock = Callable[[], datetime]

_DURATION_PART = re.compile(r"(\d+)([smhdw])")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def utcnow() -> datetime:
    """The current time in UTC (the default `Clock`)."""
    return datetime.now(UTC)


def parse_duration(text: str) -> timedelta:
    """`30m`, `2h`, `1h30m`, `7d`, `45s`, `0s`; ValueError says what is expected.

    Units follow their numbers directly (`30 m` is refused): one spelling, so a lease
    typed in a script reads the same everywhere.
    """
    cleaned = text.strip().lower()
    parts = _DURATION_PART.findall(cleaned)
    if not cleaned or "".join(n + u for n, u in parts) != cleaned:
        raise ValueError(f"{text[:80]!r} is not a duration like 30m, 2h, 1h30m or 7d")
    seconds = sum(int(n) * _UNITS[u] for n, u in parts)
    if seconds > MAX_DURATION_DAYS * 86400:  # also keeps timedelta (and datetime) in range
        raise ValueError(f"{text[:80]!r} is longer than {MAX_DURATION_DAYS} days")
    return timedelta(seconds=seconds)


def parse_timestamp(text: str) -> datetime:
    """An RFC 3339 time (a trailing Z is accepted); ValueError unless it has a time zone."""
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as err:
        raise ValueError(f"{text!r} is not an RFC 3339 time") from err
    if value.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone (add Z or +00:00)")
    return value
