"""The drills' quick subset through `python -m drills`, and how a failing drill is reported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from drills import report
from drills.context import Context
from drills.registry import Drill, run_drill

ROOT = Path(__file__).resolve().parents[1]
# One drill per kind of fault (pause, kill, an unowned write, a flood, races) and together
# enough history for every gate to be measured, in well under a minute on two cores.
QUICK = ["paused-agent", "kill-after-commit", "lockfile-build-step", "stale-flood", "cas-race"]
GATES = {
    "gate:coverage",
    "gate:determinations",
    "gate:stale-accepted",
    "gate:cas-race",
    "gate:canonical-tree",
    "gate:fence-latency",
}


def _drills(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "drills", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_quick_subset_passes_with_every_gate_measured(tmp_path: Path) -> None:
    """The quick subset exits 0 and its JSON report has every drill and every gate passed."""
    out = tmp_path / "report.json"
    # A relative --out, as `make drills` uses (drills-out/ under the current folder).
    proc = _drills("--only", *QUICK, "--out", "runs", "--json", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(out.read_text())
    assert doc["passed"] is True
    rows = {r["name"]: r for r in doc["records"]}
    failed = {name: (r["expected"], r["actual"]) for name, r in rows.items() if not r["passed"]}
    assert failed == {}
    assert {n for n, r in rows.items() if r["kind"] == "drill"} == set(QUICK)
    assert {n for n, r in rows.items() if r["kind"] == "gate"} == GATES
    for name in QUICK:
        assert rows[name]["figure"], name
        assert rows[name]["evidence"], name
    assert "drill / gate" in proc.stdout  # the table is printed, not only written
    assert (tmp_path / "runs").is_dir()


def test_list_and_unknown_names(tmp_path: Path) -> None:
    """`--list` names every drill; an unknown `--only` name is a usage error (exit 2)."""
    listed = _drills("--list")
    assert listed.returncode == 0
    names = {line.split()[0] for line in listed.stdout.splitlines() if line.strip()}
    assert set(QUICK) <= names
    assert {
        "paused-integrator",
        "policy-upgrade",
        "rename-vs-edit",
        "shallow-base",
        "team",
    } <= names
    wrong = _drills("--only", "no-such-drill", "--out", str(tmp_path))
    assert wrong.returncode == 2
    assert "unknown drill" in wrong.stderr


def test_a_failing_drill_reports_expected_actual_and_evidence(tmp_path: Path) -> None:
    """A failed check becomes a FAIL row whose printout names expectation, outcome and files."""
    evidence = tmp_path / "queue.txt"
    evidence.write_text("abc staging\n")

    def broken(ctx: Context) -> str:
        ctx.equal("queue head after A", "abc", "def", [evidence])
        return "A moved the queue"

    record = run_drill(
        Drill("broken", "1", "a drill that fails", "never", broken), tmp_path, full=False
    )
    assert record.passed is False
    printed = report.failures([record])
    assert "FAILED broken" in printed
    assert "expected: queue head after A: abc" in printed
    assert "actual:   queue head after A: def" in printed
    assert f"evidence: {evidence}" in printed
    assert "FAIL" in report.table([record])


def test_a_drill_that_cannot_run_is_a_failure_with_its_reason(tmp_path: Path) -> None:
    """An exception inside a drill fails it with the error and a kept traceback."""

    def crashing(ctx: Context) -> str:
        raise RuntimeError("the daemon never started")

    record = run_drill(Drill("crash", "7", "crashes", "never", crashing), tmp_path, full=False)
    assert record.passed is False
    assert "the daemon never started" in record.actual
    assert any(path.endswith("error.txt") for path in record.evidence)
