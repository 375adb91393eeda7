"""The registry mirror: durable backlog, idempotent SQLite writes, bounded retries, catch-up."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from integrator.cli import main
from integrator.documents.verdict import Code, Decision, Verdict, Violation
from integrator.errors import InfrastructureError
from integrator.store.backlog import Backlog
from integrator.store.entries import MirrorRecord, decision_record, review_record
from integrator.store.mirror import Mirror, MirrorWorker, RetryPolicy, for_spool
from integrator.store.registry import SqliteRegistry

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
FAST = RetryPolicy(attempts=3, max_seconds=1.0, initial=0.01, max_wait=0.02)


def create_verdict(**overrides: object) -> Verdict:
    fields: dict[str, object] = {
        "decision": Decision.ACCEPTED,
        "task_id": "t1",
        "attempt_id": "a1",
        "generation": 3,
        "candidate": "c" * 40,
        "staging_commit": "s" * 40,
    }
    fields.update(overrides)
    return Verdict.model_validate(fields)


def records(n: int, task: str = "t1", start: int = 0) -> list[MirrorRecord]:
    return [
        decision_record(
            f"sid{i:03d}", create_verdict(task_id=task), T0 + timedelta(seconds=i), 0.004
        )
        for i in range(start, start + n)
    ]


@pytest.fixture
def mirror(tmp_path: Path) -> Iterator[Mirror]:
    spool = tmp_path / "spool"
    (spool / "mirror-backlog").mkdir(parents=True)
    m = for_spool(spool, timeout=0.05)
    m.retry = FAST
    yield m
    m.close()


@pytest.fixture
def locked(mirror: Mirror) -> Iterator[sqlite3.Connection]:
    """Another writer holds the registry: every write of ours finds it locked."""
    registry = mirror.registry
    assert isinstance(registry, SqliteRegistry)
    registry.write([])  # create the file and its tables
    conn = sqlite3.connect(registry.path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    yield conn
    conn.close()


def test_backlog_counts_records_from_file_names(tmp_path: Path) -> None:
    """Backlog depth is read from file names, and files read back the records written."""
    backlog = Backlog(tmp_path)
    backlog.append(records(3))
    backlog.append(records(2, start=3))
    assert backlog.depth() == 5
    assert [r for p in backlog.files() for r in backlog.read(p)] == records(5)
    assert backlog.lag_seconds() >= 0


def test_flush_mirrors_and_empties_the_backlog(mirror: Mirror) -> None:
    """A flush writes every waiting record in one go and deletes the backlog files."""
    mirror.record(records(4))
    assert mirror.flush() == 4
    assert mirror.backlog.depth() == 0
    assert mirror.registry.history() == records(4)


def test_writes_are_idempotent(mirror: Mirror) -> None:
    """A record mirrored twice (crash between commit and delete) is one row, the latest."""
    first = records(1)[0]
    again = first.model_copy(update={"recovered": True})
    mirror.registry.write([first])
    mirror.registry.write([again])
    assert mirror.registry.history() == [again]


def test_history_filters_by_task_and_limits(mirror: Mirror) -> None:
    """History selects one task's records and keeps the newest N, oldest first."""
    mirror.record(records(3, task="a") + records(3, task="b", start=3))
    mirror.flush()
    assert [r.submission for r in mirror.registry.history(task="b")] == [
        "sid003",
        "sid004",
        "sid005",
    ]
    assert [r.submission for r in mirror.registry.history(limit=2)] == ["sid004", "sid005"]


def test_unavailable_registry_keeps_the_backlog(mirror: Mirror, locked: sqlite3.Connection) -> None:
    """A locked registry fails after bounded, logged retries; nothing leaves the backlog."""
    mirror.record(records(2))
    with capture_logs() as logs, pytest.raises(InfrastructureError, match="unavailable"):
        mirror.flush()
    retries = [e for e in logs if e["event"] == "mirror.retry"]
    assert len(retries) == FAST.attempts - 1
    assert all(e["log_level"] == "warning" and "locked" in e["error"] for e in retries)
    assert mirror.backlog.depth() == 2
    assert not mirror.healthy and mirror.last_error


def test_registry_back_catches_up(mirror: Mirror, locked: sqlite3.Connection) -> None:
    """When the registry returns, one flush mirrors everything that waited, nothing lost."""
    mirror.record(records(2))
    with pytest.raises(InfrastructureError):
        mirror.flush(retry=False)
    mirror.record(records(3, start=2))
    locked.execute("COMMIT")
    assert mirror.flush() == 5
    assert mirror.healthy
    assert [r.submission for r in mirror.registry.history()] == [f"sid{i:03d}" for i in range(5)]


def test_worker_catches_up_in_the_background(mirror: Mirror, locked: sqlite3.Connection) -> None:
    """The background worker retries on its timer and drains the backlog once it can."""
    mirror.record(records(3))
    worker = MirrorWorker(mirror, interval=0.05, max_backoff=0.1)
    worker.start()
    try:
        time.sleep(0.2)
        assert mirror.backlog.depth() == 3
        locked.execute("COMMIT")
        deadline = time.monotonic() + 5
        while mirror.backlog.depth() and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        worker.stop()
    assert len(mirror.registry.history()) == 3


def test_unreadable_backlog_file_is_set_aside(mirror: Mirror) -> None:
    """A damaged backlog file is renamed *.bad and the rest is still mirrored."""
    mirror.record(records(1))
    (mirror.backlog.folder / "00000000000000000001-dead-n1.jsonl").write_text('{"key": 1}\n')
    assert mirror.flush() == 1
    assert [p.name for p in mirror.backlog.folder.iterdir()] == [
        "00000000000000000001-dead-n1.jsonl.bad"
    ]


def test_record_kinds_carry_what_history_shows() -> None:
    """Rejections and review actions are records too, with their reason and actor."""
    rejected = decision_record("s1", None, T0, 0.001, reason="no submission.json")
    assert (rejected.decision, rejected.reason) == ("REJECTED", "no submission.json")
    fenced = create_verdict(
        decision=Decision.FENCED,
        violations=[Violation(code=Code.PATH_NOT_OWNED, path="x", detail="d")],
    )
    action = review_record("s2", "approve", "rm@host", T0, fenced, "expanded")
    assert (action.kind, action.action, action.actor, action.codes) == (
        "review",
        "approve",
        "rm@host",
        ["PATH_NOT_OWNED"],
    )


def test_review_record_names_the_held_task_when_there_is_no_verdict() -> None:
    """A reject (no new verdict) takes task, attempt, generation and candidate from the held one."""

    def record(action: str, verdict: Verdict | None) -> MirrorRecord:
        return review_record(
            "s3", action, "rm@host", T0, verdict, None,
            task_id="t1", attempt_id="a1", generation=3, candidate="c" * 40,
        )  # fmt: skip

    reject = record("reject", None)
    assert (reject.task_id, reject.attempt_id, reject.generation, reject.candidate) == (
        "t1",
        "a1",
        3,
        "c" * 40,
    )
    assert (reject.decision, reject.codes) == (None, [])
    approve = record("approve", create_verdict(attempt_id="a2", generation=4))
    assert (approve.attempt_id, approve.generation, approve.decision) == ("a2", 4, "ACCEPTED")


def test_history_command_reads_the_mirror(
    mirror: Mirror, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`integrator history --spool DIR --json` mirrors the backlog first, then prints it."""
    mirror.record(records(2, task="a") + records(1, task="b", start=2))
    code = main(["history", "--spool", str(tmp_path / "spool"), "--task", "a", "--json"])
    assert code == 0
    printed = json.loads(capsys.readouterr().out)
    assert [r["submission"] for r in printed] == ["sid000", "sid001"]
    assert mirror.backlog.depth() == 0


def test_a_registry_file_deleted_under_the_connection_is_created_again(tmp_path: Path) -> None:
    """Writes after the registry file was removed go to a new file, not into the
    unlinked one (where they would be lost while the backlog is cleared)."""
    path = tmp_path / "registry.sqlite3"
    registry = SqliteRegistry(path)
    first, second = records(2)
    registry.write([first])
    for leftover in tmp_path.glob("registry.sqlite3*"):
        leftover.unlink()
    registry.write([second])
    fresh = SqliteRegistry(path)
    assert [r.key for r in fresh.history()] == [second.key]
    registry.close()
    fresh.close()
