"""Giving freed memory back to the system, for processes that run for hours.

A daemon allocates and frees large buffers (raw trees and commits, packs, bundle copies,
validation output) on several threads. glibc's allocator keeps what they free in its
arenas (one per thread that allocated), so resident memory climbs although little of it
is live: in a system soak, a daemon that had grown to 363 MiB gave 130 MiB back at one
`malloc_trim(0)`. `Trimmer.maybe` asks the C library to return its free pages, at most
once per interval, between drains; it costs a few milliseconds. Where the C library has no
`malloc_trim` (musl, macOS) it does nothing.

libgit2 keeps the small commits and trees it read in a cache of up to 256 MiB per process
by default, which a daemon reading its records for days fills: `bound_git_cache` lowers
that bound for the processes that run for hours (the one-shot commands keep the default).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import time
from collections.abc import Callable

TRIM_INTERVAL = 10.0  # seconds between trims at most (a trim walks every arena)
GIT_OBJECT_CACHE_BYTES = 32 * 1024 * 1024  # libgit2's object cache in a long-running process


def bound_git_cache(limit: int = GIT_OBJECT_CACHE_BYTES) -> None:
    """Bound libgit2's object cache (process-wide) for a process that runs for hours."""
    import pygit2

    pygit2.settings.cache_max_size(limit)


def _libc_trim() -> Callable[[], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: int(trim(0))


class Trimmer:
    """Returns free heap pages to the system, at most once per `interval` seconds."""

    def __init__(
        self,
        interval: float = TRIM_INTERVAL,
        *,
        trim: Callable[[], int] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.interval = interval
        self._trim = trim if trim is not None else _libc_trim()
        self._clock = clock
        self._last: float | None = None
        self.trims = 0  # trims made (each one call to the C library)

    @property
    def available(self) -> bool:
        return self._trim is not None

    def maybe(self) -> bool:
        """Trim if the interval has passed since the last trim (or none was made)."""
        if self._trim is None:
            return False
        now = self._clock()
        if self._last is not None and now - self._last < self.interval:
            return False
        self._last = now
        self._trim()
        self.trims += 1
        return True
