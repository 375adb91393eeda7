"""The registry the mirror writes to: a protocol, and the default SQLite file."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Sequence
from datetime import UTC
from pathlib import Path
from typing import Protocol

from integrator.store.entries import MirrorRecord, record_line


class Registry(Protocol):
    """Where mirrored records go; it never takes part in authorization."""

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
        int(r.recovered), r.action, r.actor, r.reason, record_line(r).decode().rstrip(),
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
