"""`integrator status` with no submission: the overview of a repository and its spool, in
real processes."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from integrator.daemon.overview import ClaimRow, Overview, document
from integrator.daemon.overview_text import left, render
from tests.gitutil import run_integrator


def test_the_overview_shows_queue_spool_held_claims_and_decisions(
    served: dict[str, Path],
) -> None:
    """`status --spool DIR` finds the spool's repository and shows the target and queue,
    the spool's counts, the fenced candidate with its code, the claim still live, and both
    decisions."""
    done = run_integrator("status", "--spool", str(served["spool"]))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert f"repository {served['canon']}" in out
    assert "refs/heads/main: landing" in out
    assert "accepted 1  fenced 1" in out
    assert "held for review (1):" in out and "PATH_NOT_OWNED" in out
    # t1's claim was consumed by its landing; t2's is still live
    assert "live claims (1):" in out
    claim_line = next(line for line in out.splitlines() if line.startswith("  t2 "))
    assert "bob" in claim_line and "left" in claim_line and "doc/**" in claim_line
    assert "ACCEPTED t1" in out.replace("  ", " ") and "FENCED" in out


def test_the_overview_as_json_is_one_document(served: dict[str, Path]) -> None:
    """`status --json` with no submission prints one JSON document and nothing else on
    stdout: claims with the lease seconds left, spool counts, held, decisions."""
    done = run_integrator("status", "--spool", str(served["spool"]), "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["repo"] == str(served["canon"])
    assert [c["taskId"] for c in doc["claims"]] == ["t2"]
    assert 0 < doc["claims"][0]["leaseSecondsLeft"] <= 3600
    assert doc["counts"]["accepted"] == 1 and doc["counts"]["fenced"] == 1
    assert [h["codes"] for h in doc["held"]] == [["PATH_NOT_OWNED"]]
    assert [d["decision"] for d in doc["decisions"]] == ["ACCEPTED", "FENCED"]
    assert doc["problems"] == []


def test_the_overview_of_the_repository_alone(served: dict[str, Path]) -> None:
    """`status` run inside the canonical repository (no flags) shows its queue and claims."""
    done = run_integrator("status", cwd=served["canon"])
    assert done.returncode == 0, done.stderr
    assert "refs/heads/main" in done.stdout and "live claims (1):" in done.stdout


def test_the_overview_outside_a_repository_is_a_usage_error(tmp_path: Path) -> None:
    """`status` in a folder that is no repository, with no --spool, exits 2 with one line."""
    done = run_integrator("status", cwd=tmp_path)
    assert done.returncode == 2
    assert "is not a git repository" in done.stderr and "Traceback" not in done.stderr


def test_render_says_who_paused_and_folds_multi_line_text() -> None:
    """A pause names who paused and when; a reason of several lines stays on one line."""
    at = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
    view = Overview(
        repo="/r", target="refs/heads/main", target_head="a" * 40, queue_head="b" * 40,
        paused=True, paused_by="ops@host", paused_at=at, pause_reason="release\nfreeze",
        validation="command",
        unpromoted=[{"staging": "c" * 40, "taskId": "t9", "summary": "x"}],
        claims=[ClaimRow("t9", "alice", 2, at + timedelta(minutes=90), ("src/**",))],
    )  # fmt: skip
    lines = render(document(view, at), at)
    assert "  paused by ops@host at 2026-06-01T12:00:00+00:00: release freeze" in lines
    assert "  1 landing(s) wait for the promoter (command validation):" in lines
    assert any("t9" in line and "90m left" in line for line in lines)
    assert document(view, at)["pause"]["by"] == "ops@host"


def test_lease_left_reads_in_the_largest_unit() -> None:
    """Seconds under two minutes, minutes under two hours, then hours, then days."""
    now = datetime(2026, 6, 1, tzinfo=UTC)
    assert left(now - timedelta(seconds=1), now) == "expired"
    assert left(now + timedelta(seconds=59), now) == "59s"
    assert left(now + timedelta(minutes=30), now) == "30m"
    assert left(now + timedelta(hours=5, minutes=7), now) == "5h07m"
    assert left(now + timedelta(days=3), now) == "3d"


def test_watch_prints_the_overview_again_until_stopped(served: dict[str, Path]) -> None:
    """`status --watch 0.2` (not a terminal: no screen clearing) prints the overview again
    and again until it is stopped."""
    import subprocess
    import sys
    import time

    proc = subprocess.Popen(
        [sys.executable, "-m", "integrator", "status", "--spool", str(served["spool"]),
         "--watch", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        time.sleep(6)
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    text = out.decode()
    assert text.count(f"repository {served['canon']}") >= 2
    assert "\x1b" not in text
