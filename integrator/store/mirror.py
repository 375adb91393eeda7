"""The registry mirror: results copied out of git into an external store (SQLite by default).

The mirror never takes part in authorization; git holds the truth. Records first go to a
durable backlog in the spool (`mirror-backlog/`, one file per batch, written tmp + fsync +
rename), and a file is deleted only after its records are committed in the registry. When
the registry is down, integration goes on and the backlog grows; it drains on return.
Writes are idempotent (one row per key), so a crash between commit and delete is harmless.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
    wait_random_exponential,
)

from integrator.errors import InfrastructureError
from integrator.store.backlog import Backlog
from integrator.store.entries import MirrorRecord
from integrator.store.meta import REGISTRY_FILE
from integrator.store.registry import Registry, SqliteRegistry

log = structlog.get_logger("integrator.mirror")


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded, jittered retries for one flush (always with a stop: a registry that stays down must not hold a flush forever)."""

    attempts: int = 4
    max_seconds: float = 3.0
    initial: float = 0.05
    max_wait: float = 1.0


def _log_retry(state: RetryCallState) -> None:
    error = state.outcome.exception() if state.outcome else None
    log.warning(
        "mirror.retry",
        attempt=state.attempt_number,
        sleep_s=round(state.next_action.sleep, 3) if state.next_action else None,
        error=str(error),
    )


class Mirror:
    """Backlog plus registry: `record` is durable at once, `flush` copies it out."""

    def __init__(
        self, backlog: Backlog, registry: Registry, *, retry: RetryPolicy | None = None
    ) -> None:
        self.backlog = backlog
        self.registry = registry
        self.retry = retry or RetryPolicy()
        self.healthy = True
        self.last_error: str | None = None
        self._flush_lock = threading.Lock()

    def record(self, records: Sequence[MirrorRecord], *, sync: bool = True) -> None:
        self.backlog.append(records, sync=sync)

    def flush(self, *, retry: bool = True) -> int:
        """Mirror every backlog file; returns how many records went out.

        Raises InfrastructureError when the registry stays unavailable; the backlog is
        left as it was, so nothing is lost.
        """
        policy = self.retry
        retrying = Retrying(
            stop=stop_after_attempt(policy.attempts if retry else 1)
            | stop_after_delay(policy.max_seconds),
            wait=wait_random_exponential(multiplier=policy.initial, max=policy.max_wait),
            retry=retry_if_exception_type(sqlite3.OperationalError),
            before_sleep=_log_retry,
            reraise=True,
        )
        with self._flush_lock:
            try:
                count = retrying(self._flush_once)
            except sqlite3.Error as err:
                self.healthy = False
                self.last_error = f"{type(err).__name__}: {err}"
                raise InfrastructureError(f"the registry mirror is unavailable: {err}") from err
        self.healthy = True
        self.last_error = None
        return count

    def _flush_once(self) -> int:
        files = self.backlog.files()
        if not files:
            self.registry.write([])  # an empty transaction: proves the registry is writable
            return 0
        records = []
        for path in files:
            try:
                records.extend(self.backlog.read(path))
            except FileNotFoundError:
                continue  # another flusher (history, review) mirrored it meanwhile
            except OSError as err:
                raise InfrastructureError(f"cannot read the mirror backlog: {err}") from err
        if records:
            self.registry.write(records)
        for path in files:
            path.unlink(missing_ok=True)  # a concurrent flusher may have taken it already
        return len(records)

    def close(self) -> None:
        self.registry.close()


class MirrorWorker:
    """A background thread that flushes on `wake()` and on a timer, so a slow or absent
    registry never holds up integration."""

    def __init__(self, mirror: Mirror, interval: float, *, max_backoff: float = 30.0) -> None:
        self.mirror = mirror
        self.interval = interval
        self.max_backoff = max_backoff
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="mirror", daemon=True)
        self._not_before = 0.0
        self._backoff = interval

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def _run(self) -> None:
        self._attempt()  # catch up on what an earlier run left in the backlog
        while not self._stop.is_set():
            self._wake.wait(self.interval)
            self._wake.clear()
            if self._stop.is_set() or time.monotonic() < self._not_before:
                continue
            self._attempt()

    def _attempt(self) -> None:
        try:
            count = self.mirror.flush()
        except Exception as err:  # a dead thread would stop mirroring without a word
            if not isinstance(err, InfrastructureError):
                log.exception("mirror.flush_crashed")
            self._not_before = time.monotonic() + self._backoff
            log.warning("mirror.unavailable", error=str(err), retry_in_s=round(self._backoff, 2))
            self._backoff = min(self._backoff * 2, self.max_backoff)
            return
        self._backoff = self.interval
        self._not_before = 0.0
        if count:
            log.info("mirror.flushed", records=count)

    def stop(self, *, final_flush: bool = True) -> None:
        """Stop the thread; one last flush (without retries) takes what it can."""
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=10)
        if final_flush:
            try:
                self.mirror.flush(retry=False)
            except InfrastructureError as err:
                log.warning(
                    "mirror.left_backlog", records=self.mirror.backlog.depth(), error=str(err)
                )


def for_spool(spool_root: Path, registry: Path | None = None, *, timeout: float = 0.5) -> Mirror:
    """The mirror of a spool: its backlog folder and (by default) `registry.sqlite3` beside it."""
    path = registry if registry is not None else spool_root / REGISTRY_FILE
    return Mirror(Backlog(spool_root / "mirror-backlog"), SqliteRegistry(path, timeout=timeout))
