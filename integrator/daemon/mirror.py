"""The registry mirror: results copied out of git into an external store (SQLite by default).

The mirror never takes part in authorization; git holds the truth. Records first go to a
durable backlog in the spool (`mirror-backlog/`, one file per batch, written tmp + fsync +
rename), and a file is deleted only after its records are committed in the registry. When
the registry is down, integration goes on and the backlog grows; it drains on return.
Writes are idempotent (one row per key), so a crash between commit and delete is harmless.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, Protocol

import structlog
from pydantic import Field, ValidationError
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
    wait_random_exponential,
)

from integrator.daemon.spool import fsync_dir, write_file
from integrator.documents.contract import Model
from integrator.documents.verdict import Verdict
from integrator.errors import InfrastructureError

log = structlog.get_logger("integrator.mirror")

RecordKind = Literal["decision", "review"]


class MirrorRecord(Model):
    """One row of the registry: a decision on a submission, or a review action."""

    key: str
    kind: RecordKind
    submission: str
    at: datetime
    decision: str | None = None
    codes: list[str] = Field(default_factory=list)
    task_id: str | None = None
    attempt_id: str | None = None
    generation: int | None = None
    candidate: str | None = None
    staging_commit: str | None = None
    latency_ms: float | None = None
    recovered: bool = False
    action: str | None = None
    actor: str | None = None
    reason: str | None = None


def codes_of(verdict: Verdict) -> list[str]:
    """The distinct violation codes of a verdict, in first-seen order."""
    return list(dict.fromkeys(v.code.value for v in verdict.violations))


def decision_record(
    sid: str, verdict: Verdict | None, at: datetime, latency: float, reason: str | None = None
) -> MirrorRecord:
    """The record of a daemon decision; `verdict` None means the submission was rejected."""
    if verdict is None:
        return MirrorRecord(
            key=f"decision:{sid}",
            kind="decision",
            submission=sid,
            at=at,
            decision="REJECTED",
            latency_ms=round(latency * 1000, 3),
            reason=reason,
        )
    return MirrorRecord(
        key=f"decision:{sid}",
        kind="decision",
        submission=sid,
        at=at,
        decision=verdict.decision.value,
        codes=codes_of(verdict),
        task_id=verdict.task_id,
        attempt_id=verdict.attempt_id,
        generation=verdict.generation,
        candidate=verdict.candidate,
        staging_commit=verdict.staging_commit,
        latency_ms=round(latency * 1000, 3),
        recovered=bool(verdict.recovered),
    )


def review_record(
    sid: str,
    action: str,
    actor: str,
    at: datetime,
    verdict: Verdict | None,
    reason: str | None,
    *,
    task_id: str | None = None,
    attempt_id: str | None = None,
    generation: int | None = None,
    candidate: str | None = None,
) -> MirrorRecord:
    """The record of a review action on held submission `sid`.

    `verdict` is the action's new verdict (an approval's), None for a reject. The keyword
    arguments name the held candidate's task, attempt, generation and candidate; they fill
    what the verdict does not say, so `history --task` finds every action, rejects included.
    """
    if verdict is not None:
        task_id = verdict.task_id or task_id
        attempt_id = verdict.attempt_id or attempt_id
        generation = verdict.generation if verdict.generation is not None else generation
        candidate = verdict.candidate or candidate
    return MirrorRecord(
        key=f"review:{sid}:{at:%Y%m%dT%H%M%S%f}:{action}",
        kind="review",
        submission=sid,
        at=at,
        decision=verdict.decision.value if verdict else None,
        codes=codes_of(verdict) if verdict else [],
        task_id=task_id,
        attempt_id=attempt_id,
        generation=generation,
        candidate=candidate,
        staging_commit=verdict.staging_commit if verdict else None,
        action=action,
        actor=actor,
        reason=reason,
    )


def _line(record: MirrorRecord) -> bytes:
    return record.model_dump_json(by_alias=True, exclude_none=True).encode() + b"\n"


class Backlog:
    """Records not yet mirrored, as files `<time>-<random>-n<count>.jsonl` in one folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def append(self, records: Sequence[MirrorRecord], *, sync: bool = True) -> Path | None:
        """Durably add `records` as one file (before the spool moves that they describe)."""
        if not records:
            return None
        name = f"{time.time_ns():020d}-{secrets.token_hex(4)}-n{len(records)}.jsonl"
        data = b"".join(_line(r) for r in records)
        tmp = self.folder / f".{name}.tmp"
        try:
            write_file(tmp, data, sync=sync)
            path = self.folder / name
            tmp.rename(path)
            if sync:
                fsync_dir(self.folder)
        except OSError as err:
            raise InfrastructureError(f"cannot write the mirror backlog: {err}") from err
        return path

    def files(self) -> list[Path]:
        try:
            with os.scandir(self.folder) as it:
                names = sorted(e.name for e in it if e.name.endswith(".jsonl"))
        except FileNotFoundError:
            return []
        return [self.folder / n for n in names if not n.startswith(".")]

    def depth(self) -> int:
        """Records waiting (read from the file names, so a scrape costs one listing)."""
        total = 0
        for path in self.files():
            _, _, count = path.stem.rpartition("-n")
            total += int(count) if count.isdigit() else 1
        return total

    def lag_seconds(self, now: float | None = None) -> float:
        """Age of the oldest record waiting, 0 when the mirror is caught up."""
        files = self.files()
        if not files:
            return 0.0
        stamp = files[0].name.split("-", 1)[0]
        born = int(stamp) / 1e9 if stamp.isdigit() else files[0].stat().st_mtime
        return max(0.0, (now if now is not None else time.time()) - born)

    def read(self, path: Path) -> list[MirrorRecord]:
        try:
            lines = path.read_bytes().splitlines()
            return [MirrorRecord.model_validate_json(line) for line in lines if line.strip()]
        except ValidationError:
            # Only complete files are renamed in, so this is damage from outside: keep the
            # file for a person and go on with the rest.
            path.rename(path.with_name(path.name + ".bad"))
            log.error("mirror.backlog_unreadable", file=path.name)
            return []


class Registry(Protocol):
    def write(self, records: Sequence[MirrorRecord]) -> None: ...
    def history(
        self, *, task: str | None = None, limit: int | None = None
    ) -> list[MirrorRecord]: ...
    def close(self) -> None: ...


_SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    key TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    submission TEXT NOT NULL,
    at TEXT NOT NULL,
    decision TEXT,
    codes TEXT NOT NULL,
    task TEXT,
    attempt TEXT,
    generation INTEGER,
    candidate TEXT,
    staging TEXT,
    latency_ms REAL,
    recovered INTEGER NOT NULL,
    action TEXT,
    actor TEXT,
    reason TEXT,
    document TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS records_task ON records (task, at);
CREATE INDEX IF NOT EXISTS records_submission ON records (submission, at);
"""


def _row(r: MirrorRecord) -> tuple[object, ...]:
    at = r.at.astimezone(UTC).isoformat(timespec="microseconds")  # sorts as text
    return (
        r.key, r.kind, r.submission, at, r.decision, ",".join(r.codes), r.task_id,
        r.attempt_id, r.generation, r.candidate, r.staging_commit, r.latency_ms,
        int(r.recovered), r.action, r.actor, r.reason, _line(r).decode().rstrip(),
    )  # fmt: skip


class SqliteRegistry:
    """The default registry: one SQLite file in WAL mode, every batch one transaction."""

    def __init__(self, path: Path, *, timeout: float = 0.5) -> None:
        self.path = path
        self.timeout = timeout
        self._conn: sqlite3.Connection | None = None
        self._identity: tuple[int, int] | None = None
        self._lock = threading.Lock()

    def _file_identity(self) -> tuple[int, int] | None:
        try:
            info = os.stat(self.path)
        except OSError:
            return None
        return info.st_dev, info.st_ino

    def _connect(self) -> sqlite3.Connection:
        # A registry file deleted or replaced under an open connection would swallow
        # every later write (into the unlinked file): reconnect to what is there now.
        if self._conn is not None and self._file_identity() != self._identity:
            self._drop()
        if self._conn is None:
            conn = sqlite3.connect(
                self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False
            )
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=FULL")
                conn.executescript(_SCHEMA)
            except sqlite3.Error:
                conn.close()
                raise
            self._conn = conn
            self._identity = self._file_identity()
        return self._conn

    def write(self, records: Sequence[MirrorRecord]) -> None:
        rows = [_row(r) for r in records]
        with self._lock:
            try:
                conn = self._connect()
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.executemany(
                        "INSERT OR REPLACE INTO records VALUES "
                        "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        rows,
                    )
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error:
                self._drop()
                raise

    def history(self, *, task: str | None = None, limit: int | None = None) -> list[MirrorRecord]:
        where = " WHERE task = ?" if task is not None else ""
        params: list[object] = [task] if task is not None else []
        if limit is None:
            query = f"SELECT document FROM records{where} ORDER BY at, key"
        else:  # the newest `limit`, still printed oldest first
            query = (
                f"SELECT document FROM (SELECT document, at, key FROM records{where} "
                "ORDER BY at DESC, key DESC LIMIT ?) ORDER BY at, key"
            )
            params.append(limit)
        with self._lock:
            try:
                rows = self._connect().execute(query, params).fetchall()
            except sqlite3.Error:
                self._drop()
                raise
        return [MirrorRecord.model_validate_json(doc) for (doc,) in rows]

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close(self) -> None:
        with self._lock:
            self._drop()


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded, jittered retries for one flush (a stop is mandatory, see INTERFACES.md)."""

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
        self.last_ok: float | None = None
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
        self.last_ok = time.time()
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


REGISTRY_FILE = "registry.sqlite3"


def for_spool(spool_root: Path, registry: Path | None = None, *, timeout: float = 0.5) -> Mirror:
    """The mirror of a spool: its backlog folder and (by default) `registry.sqlite3` beside it."""
    path = registry if registry is not None else spool_root / REGISTRY_FILE
    return Mirror(Backlog(spool_root / "mirror-backlog"), SqliteRegistry(path, timeout=timeout))
