"""What `integrator review web` logs: every request, every action and refusal, to
`--log-file` when given (created 0600, never through a link at its name), and never the
token, a cookie or a query. The server is the real process on 127.0.0.1, stopped by its
PID; the desk is test_web_browser's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.gitutil import GIT_ENV
from tests.web.test_web_browser import TOKEN, Desk, build_desk, fetch


@pytest.fixture(scope="module")
def desk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Desk]:
    with pytest.MonkeyPatch.context() as env:
        for key, value in GIT_ENV.items():
            env.setenv(key, value)
        yield build_desk(tmp_path_factory.mktemp("weblog"))


def _serve(desk: Desk, *extra: str, token: Path | None = None) -> tuple[subprocess.Popen[str], str]:
    args = [sys.executable, "-m", "integrator", "review", "web", "--spool", str(desk.spool.root),
            "--repo", str(desk.repo), "--http", "127.0.0.1:0", "--actor", "rm-alice", *extra]  # fmt: skip
    if token is not None:
        args += ["--token-file", str(token)]
    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **GIT_ENV},
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("review pages on http://127.0.0.1:"):
        proc.kill()
        raise AssertionError(f"server did not start: {line!r} {proc.communicate()[1]}")
    return proc, line.split()[3]


def _stop(proc: subprocess.Popen[str]) -> str:
    os.kill(proc.pid, signal.SIGTERM)
    _, errors = proc.communicate(timeout=30)
    assert proc.returncode == 0, errors
    return errors


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


def test_requests_actions_and_refusals_go_to_the_log_file(desk: Desk, tmp_path: Path) -> None:
    """JSON lines in --log-file (0600): each request with its status, the refused bearer
    token, the rejection done with the right one; the token and the query never appear."""
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    log = tmp_path / "web.log"
    proc, url = _serve(desk, "--log-file", str(log), "--log-format", "json", token=token)
    sid = desk.sids["agent-g"]
    try:
        assert fetch(url)[0] == 200
        assert fetch(f"{url}queue?secret=q-value")[0] == 200
        assert fetch(f"{url}held/20200101T000000000000Z-00000000")[0] == 404
        reject = f"{url}held/{sid}/reject"
        wrong = fetch(reject, data={"reason": "links out"},
                      headers={"Authorization": "Bearer not-the-token-at-all"})  # fmt: skip
        assert wrong[0] == 403
        done = fetch(reject, data={"reason": "links out of the repository"},
                     headers={"Authorization": f"Bearer {TOKEN}"})  # fmt: skip
        assert done[0] == 200, done[2]
    finally:
        errors = _stop(proc)
    assert "web.request" not in errors  # the log went to the file, not to standard error
    assert log.stat().st_mode & 0o777 == 0o600
    text = log.read_text("utf-8")
    assert TOKEN not in text and "not-the-token-at-all" not in text and "q-value" not in text
    events = _events(log)
    requests = [
        (e["method"], e["path"], e["status"]) for e in events if e["event"] == "web.request"
    ]
    assert requests[:5] == [
        ("GET", "/", 200), ("GET", "/queue", 200),
        ("GET", "/held/20200101T000000000000Z-00000000", 404),
        ("POST", f"/held/{sid}/reject", 403), ("POST", f"/held/{sid}/reject", 200),
    ]  # fmt: skip
    assert all(e["client"] == "127.0.0.1" and e["ms"] >= 0 for e in events if "ms" in e)
    refused = [e for e in events if e["event"] == "web.refused"]
    assert [(e["path"], e["status"]) for e in refused] == [
        ("/held/20200101T000000000000Z-00000000", 404), (f"/held/{sid}/reject", 403),
    ]  # fmt: skip
    (action,) = [e for e in events if e["event"] == "web.action"]
    assert (action["action"], action["submission"], action["actor"], action["decision"]) == (
        "reject", sid, "rm-alice", "ARCHIVED",
    )  # fmt: skip


def test_a_hostile_path_is_escaped_and_cut_in_the_console_log(desk: Desk, tmp_path: Path) -> None:
    """A path the client chose, with terminal escapes and 5,000 characters, reaches a
    console-format log escaped and cut to its first 256 characters."""
    log = tmp_path / "web.log"
    proc, url = _serve(desk, "--log-file", str(log), "--log-format", "console")
    try:
        assert fetch(f"{url}held/%1b%5b2J%1b]0;owned%07")[0] == 404
        assert fetch(f"{url}{'a' * 5000}")[0] == 404
    finally:
        _stop(proc)
    text = log.read_text("utf-8")
    assert "\x1b" not in text and "\x07" not in text
    assert "\\x1b[2J" in text
    assert "/" + "a" * 255 + "…" in text and "a" * 256 not in text


def test_a_log_file_name_held_by_a_link_is_refused(desk: Desk, tmp_path: Path) -> None:
    """--log-file never writes through a symbolic link: a usage error (exit 2), and the
    link's target is left as it was."""
    target = tmp_path / "elsewhere"
    target.write_text("untouched\n")
    (tmp_path / "web.log").symlink_to(target)
    done = subprocess.run(
        [sys.executable, "-m", "integrator", "review", "web", "--spool", str(desk.spool.root),
         "--http", "127.0.0.1:0", "--log-file", str(tmp_path / "web.log")],
        capture_output=True, text=True, timeout=60, check=False, env={**os.environ, **GIT_ENV},
    )  # fmt: skip
    assert done.returncode == 2 and "cannot open the log file" in done.stderr, done.stderr
    assert target.read_text() == "untouched\n"
