"""Waiting for work: until a file lands in the spool's `new/`, a signal sets the wake
event, or the rescan interval passes (inotify through watchfiles, a plain wait without it)."""

from __future__ import annotations

import threading
from collections.abc import Generator
from pathlib import Path

import watchfiles


class Wakeup:
    """One watcher of `folder`, made on first use and remade when the interval changes."""

    def __init__(self, folder: Path, wake: threading.Event) -> None:
        self.folder = folder
        self.wake = wake
        self._watcher: Generator[set[tuple[watchfiles.Change, str]], None, None] | None = None

    def wait(self, timeout: float, *, watch: bool) -> None:
        """Until a file lands in the folder, the wake event is set, or `timeout` passes."""
        if self.wake.is_set() or not watch:
            self.wake.wait(timeout)
            self.wake.clear()
            return
        if self._watcher is None:
            self._watcher = watchfiles.watch(
                self.folder, watch_filter=None, debounce=100, step=10,
                stop_event=self.wake, rust_timeout=max(1, int(timeout * 1000)),
                yield_on_timeout=True, raise_interrupt=False, recursive=False,
            )  # fmt: skip
        try:
            next(self._watcher)
        except StopIteration:  # the wake event was set: a signal
            self._watcher = None
            self.wake.clear()

    def close(self) -> None:
        if self._watcher is not None:
            self._watcher.close()
            self._watcher = None
