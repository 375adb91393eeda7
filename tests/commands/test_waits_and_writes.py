"""What a newcomer meets on the first day: progress while `submit --wait` waits (stderr
only), commands that say what they wrote, one-line history rows, a quiet `promote --once`,
`contract list` columns, and mistakes refused with exit 2. Real processes throughout."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

from integrator.commands._progress import Progress
from tests.gitutil import GIT_ENV, git, run_integrator


def _issue(served: dict[str, Path], task: str, path: str) -> Path:
    out = served["root"] / f"{task}.json"
    base = git("rev-parse", "HEAD", cwd=served["canon"]).strip()
    done = run_integrator(
        "contract", "issue", "--repo", str(served["canon"]), "--task", task, "--path", path,
        "--holder", "carol", "--base", base, "-o", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out


def _commit(served: dict[str, Path], name: str) -> None:
    agent = served["agent"]
    git("fetch", "-q", "origin", cwd=agent)
    git("reset", "-q", "--hard", "origin/main", cwd=agent)
    (agent / name).parent.mkdir(parents=True, exist_ok=True)
    (agent / name).write_text(name)
    git("add", name, cwd=agent)
    git("commit", "-q", "-m", name, cwd=agent)


def test_submit_wait_says_the_id_at_once_and_progress_on_stderr(
    served: dict[str, Path],
) -> None:
    """With no daemon, `submit --wait 2.5 --json` prints the id and where the submission
    waits on stderr while it waits, then times out (exit 4) with nothing on stdout."""
    contract = _issue(served, "w1", "src/**")
    _commit(served, "src/w1")
    done = run_integrator(
        "submit", "--spool", str(served["spool"]), "--contract", str(contract),
        "--candidate", "HEAD", "--repo", str(served["agent"]), "--bundle", "--wait", "2.5",
        "--json",
    )  # fmt: skip
    assert done.returncode == 4
    assert done.stdout == ""
    sid = re.search(r"submitted (\S+); waiting up to 2.5 s", done.stderr)
    assert sid is not None, done.stderr
    assert f"integrator: {sid.group(1)}: next in new/ (" in done.stderr
    assert "no verdict for" in done.stderr


def test_submit_wait_with_a_daemon_prints_one_document(served: dict[str, Path]) -> None:
    """With a daemon running, `submit --wait --json` prints exactly one JSON document on
    stdout (the progress stayed on stderr) and exits with the verdict's code."""
    contract = _issue(served, "w2", "src/**")
    _commit(served, "src/w2")
    daemon = subprocess.Popen(
        [sys.executable, "-m", "integrator", "serve", "--repo", str(served["canon"]),
         "--spool", str(served["spool"]), "--poll", "0.2", "--log-format", "json"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**GIT_ENV, **_env()},
    )  # fmt: skip
    try:
        done = run_integrator(
            "submit", "--spool", str(served["spool"]), "--contract", str(contract),
            "--candidate", "HEAD", "--repo", str(served["agent"]), "--bundle", "--wait", "60",
            "--json",
        )  # fmt: skip
    finally:
        daemon.terminate()
        daemon.wait(30)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["verdict"]["decision"] == "ACCEPTED"
    assert f"submitted {doc['submission']}" in done.stderr


def _env() -> dict[str, str]:
    import os

    return dict(os.environ)


def test_progress_rewrites_one_line_on_a_terminal_and_writes_lines_otherwise() -> None:
    """On a terminal the line is redrawn in place and erased at the end; elsewhere a line
    is written when the state changes (or every 10 s), nothing in the first second."""
    now = [0.0]

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    plain = io.StringIO()
    progress = Progress("x", 30, stream=plain, clock=lambda: now[0])
    for t, state in ((0.5, "a"), (1.5, "a"), (2.5, "a"), (3.5, "b"), (14.0, "b")):
        now[0] = t
        progress.update(state)
    assert plain.getvalue().splitlines() == [
        "x: a (2 s of 30 s)", "x: b (4 s of 30 s)", "x: b (14 s of 30 s)"
    ]  # fmt: skip
    tty = Tty()
    progress = Progress("x", 30, stream=tty, clock=lambda: now[0])
    now[0] = 16.0
    progress.update("c\x1b[2J")
    progress.done()
    assert tty.getvalue() == "\r\x1b[Kx: c\\x1b[2J (2 s of 30 s)\r\x1b[K"


def test_contract_issue_says_what_it_wrote(served: dict[str, Path]) -> None:
    """`contract issue -o FILE` names the file, the task, generation and lease on stderr."""
    base = git("rev-parse", "HEAD", cwd=served["canon"]).strip()
    out = served["root"] / "said.json"
    done = run_integrator(
        "contract", "issue", "--repo", str(served["canon"]), "--task", "said", "--path",
        "x/**", "--base", base, "-o", str(out),
    )  # fmt: skip
    assert done.returncode == 0
    assert re.search(
        rf"wrote the contract of task said \(generation 1, attempt said-\w+, lease until "
        rf"\d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\dZ\) to {re.escape(str(out))}",
        done.stderr,
    ), done.stderr
    assert json.loads(out.read_text())["taskId"] == "said"


def test_contract_list_aligns_its_lease_column_and_lists_only_live(
    served: dict[str, Path],
) -> None:
    """`contract list` prints leases to the second in one column; `--live` drops the
    consumed claim of t1."""
    done = run_integrator("contract", "list", "--repo", str(served["canon"]))
    rows = done.stdout.splitlines()
    assert rows[0].split() == ["TASK", "GEN", "STATE", "LEASE", "UNTIL", "PATHS"]
    starts = {row.index("20") for row in rows[1:] if row.strip()}
    assert len(starts) == 1 and all("." not in row.split()[3] for row in rows[1:])
    live = run_integrator("contract", "list", "--repo", str(served["canon"]), "--live")
    assert [r.split()[0] for r in live.stdout.splitlines()[1:]] == ["t2"]
    listed = run_integrator("contract", "list", "--repo", str(served["canon"]), "--live", "--json")
    doc = json.loads(listed.stdout)
    assert [row["taskId"] for row in doc] == ["t2"]


def test_history_keeps_a_multi_line_reason_on_its_row(served: dict[str, Path]) -> None:
    """Regression: a review reason of several lines broke the `history` table; it is now
    one row with the breaks written as \\n."""
    held = run_integrator("review", "list", "--spool", str(served["spool"]), "--json")
    sid = json.loads(held.stdout)[0]["submission"]
    reject = run_integrator(
        "review", "reject", sid, "--spool", str(served["spool"]), "--reason",
        "not now\nsee the ticket",
    )  # fmt: skip
    assert reject.returncode == 0, reject.stderr
    done = run_integrator("history", "--spool", str(served["spool"]))
    assert done.returncode == 0, done.stderr
    rows = [row for row in done.stdout.splitlines() if "reject" in row]
    assert len(rows) == 1 and "not now\\nsee the ticket" in rows[0]
    assert all(row[:4].isdigit() for row in done.stdout.splitlines())


def test_promote_once_prints_its_summary_without_a_log_line(served: dict[str, Path]) -> None:
    """`promote --once` with no --log-format says only its summary (stderr empty)."""
    done = run_integrator("promote", "--repo", str(served["canon"]), "--once")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.startswith("refs/heads/main at ")


def test_status_intake_outside_a_repository_is_a_usage_error(
    served: dict[str, Path], tmp_path: Path
) -> None:
    """Regression: `status --intake` in a folder that is no repository failed with a raw
    git error and exit 4; now exit 2 saying what it needs."""
    outside = tmp_path / "outside"
    outside.mkdir()
    done = run_integrator(
        "status", "--intake", str(served["canon"]), "--submission",
        "20260601T120000000000Z-0a1b2c3d", "--task", "t1", cwd=outside,
    )  # fmt: skip
    assert done.returncode == 2
    assert "is not a git repository" in done.stderr and "Traceback" not in done.stderr


def test_submit_in_a_claimed_worktree_uses_the_bound_contract(tmp_path: Path) -> None:
    """In the worktree `task claim` made, `submit` with no --contract submits under the
    contract bound there (signed with the bound key, so no warning); elsewhere it is exit 2
    asking for --contract."""
    shop = tmp_path / "shop"
    git("init", "-q", "-b", "main", str(shop), cwd=tmp_path)
    (shop / "src" / "pay").mkdir(parents=True)
    (shop / "src" / "pay" / "a.py").write_text("a\n")
    git("add", "-A", cwd=shop)
    git("commit", "-qm", "base", cwd=shop)
    assert run_integrator("init", "--repo", str(shop), "--update-checkout").returncode == 0
    (shop / "PAY-1.md").write_text(
        "---\nid: PAY-1\nowns: [src/pay/**]\nrequires_filesystem: true\n---\n# Pay\n"
    )
    assert run_integrator("task", "init", cwd=shop).returncode == 0
    with (shop / ".agents" / "workspaces.toml").open("a") as toml:
        toml.write('\n[agents.alice]\nworkspace = "alice"\n')
    assert run_integrator("task", "add", "PAY-1.md", cwd=shop).returncode == 0
    claimed = run_integrator("task", "claim", "--agent", "alice", cwd=shop)
    assert claimed.returncode == 0, claimed.stderr
    tree = shop / ".trees" / "alice"
    (tree / "src" / "pay" / "b.py").write_text("b\n")
    git("add", "-A", cwd=tree)
    git("commit", "-qm", "b", cwd=tree)
    spool = tmp_path / "spool"
    done = run_integrator("submit", "--spool", str(spool), "--create", "--candidate", "HEAD",
                          cwd=tree)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "submitting under the bound contract" in done.stderr
    assert "warning" not in done.stderr
    assert (spool / "new" / done.stdout.strip()).is_dir()
    elsewhere = run_integrator("submit", "--spool", str(spool), "--candidate", "HEAD", cwd=shop)
    assert elsewhere.returncode == 2 and "pass --contract FILE" in elsewhere.stderr
