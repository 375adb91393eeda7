"""Progress on standard error while a command waits (`submit --wait`, `status --wait`).

Standard output carries the answer (a verdict, a `--json` document), so progress never goes
there. On a terminal one line is rewritten in place; otherwise (a log, a CI job) a plain line
is written when the state changes and every `EVERY` seconds while it does not. A wait that
cannot say where it is at each look (a call that waits by itself) is `ticking`: a thread says
it every `TICK` seconds.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

from integrator.escape import visible

EVERY = 10.0  # seconds between two plain lines that say the same thing
AFTER = 1.0  # nothing is said about a wait shorter than this
TICK = 0.5  # seconds between two looks of `ticking` at the state


class Progress:
    """Say what a wait is waiting for, at most once a second on a terminal."""

    def __init__(
        self,
        what: str,
        timeout: float,
        *,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what = what
        self.timeout = timeout
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.started = clock()
        self.tty = self.stream.isatty()
        self._said: str | None = None
        self._at = -EVERY
        self._drawn = False

    def update(self, state: str, detail: str = "") -> None:
        """The wait goes on, in `state` (where the thing waited for is now); `detail` is
        shown too, but a change of it alone is no new plain line (a count of looks)."""
        now = self.clock()
        waited = now - self.started
        if waited < AFTER:
            return
        shown = min(waited, self.timeout)  # a last look just past the end says the end
        line = visible(f"{self.what}: {state}{detail} ({shown:.0f} s of {self.timeout:g} s)")
        if self.tty:
            if now - self._at >= 1.0:
                self.stream.write("\r\x1b[K" + line)
                self.stream.flush()
                self._at, self._drawn = now, True
            return
        if state != self._said or now - self._at >= EVERY:
            self.stream.write(line + "\n")
            self.stream.flush()
            self._said, self._at = state, now

    def done(self) -> None:
        """The wait is over: a line drawn on a terminal is erased."""
        if self.tty and self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False

    @contextmanager
    def ticking(
        self, state: Callable[[], str], detail: Callable[[], str] = lambda: ""
    ) -> Iterator[None]:
        """While the body waits, `update(state(), detail())` every TICK s from a thread of
        its own (both must be cheap and safe to call there); `done` at the end."""
        if self.timeout < AFTER:  # nothing would be said
            yield
            return
        stop = threading.Event()

        def tick() -> None:
            while not stop.wait(TICK):
                self.update(state(), detail())

        thread = threading.Thread(target=tick, name="progress", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            self.done()
