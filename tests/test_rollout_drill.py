"""The rollout drill through `python -m drills`, as `make drills` and `make drills-quick` run it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_rollout_drill_runs_from_observe_to_revert(tmp_path: Path) -> None:
    """`--only rollout` exits 0 with every check of the drill passed, evidence kept, and its
    observe-mode world kept out of the enforcement-stage gates (they read n/a)."""
    out = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "drills", "--only", "rollout", "--out", str(tmp_path / "runs"),
         "--json", str(out)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
        timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(out.read_text())
    rows = {r["name"]: r for r in doc["records"]}
    drill = rows["rollout"]
    assert drill["passed"] is True and drill["evidence"]
    labels = [c["label"] for c in drill["checks"]]
    assert "a paused issue is refused naming the reason" in labels
    assert "main holds what it held before the bad landing" in labels
    assert all(c["ok"] for c in drill["checks"])
    assert {r["passed"] for n, r in rows.items() if n.startswith("gate:")} == {None}
    listed = subprocess.run(
        [sys.executable, "-m", "drills", "--list"], cwd=ROOT, capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False,
    )  # fmt: skip
    assert any(line.split()[:2] == ["rollout", "8"] for line in listed.stdout.splitlines())
