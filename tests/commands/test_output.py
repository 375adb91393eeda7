"""`-o FILE` outputs: complete files by rename, devices and pipes written in place."""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest

from integrator.commands._common import write_output
from integrator.errors import UsageError
from tests.gitutil import commit_files, make_repo, run_integrator


def test_regular_file_is_replaced_whole_and_no_temporary_is_left(tmp_path: Path) -> None:
    """An existing file is replaced by one rename; nothing else appears in the folder."""
    target = tmp_path / "contract.json"
    target.write_text("old\n")
    write_output('{"new": true}', str(target))
    assert target.read_text() == '{"new": true}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["contract.json"]


def test_a_pipe_stays_a_pipe(tmp_path: Path) -> None:
    """Writing to a FIFO (like /dev/null or /dev/stdout) writes into it, never over it."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_output("through the pipe", str(fifo))
    reader.join(timeout=10)
    assert got == [b"through the pipe\n"]
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_unwritable_destination_is_a_usage_error(tmp_path: Path) -> None:
    """A folder that does not exist is reported by name (exit 2), not as a crash."""
    with pytest.raises(UsageError, match="no-such-folder"):
        write_output("x", str(tmp_path / "no-such-folder" / "c.json"))
    assert list(tmp_path.iterdir()) == []


def test_contract_issue_writes_the_contract_file(tmp_path: Path) -> None:
    """`contract issue -o FILE` leaves exactly the printed contract in FILE."""
    repo = make_repo(tmp_path / "repo")
    commit_files(repo, {"src/a.py": "a\n"}, "base")
    out = tmp_path / "c.json"
    done = run_integrator(
        "contract", "issue", "--repo", str(repo), "--task", "t1", "--path", "src/**",
        "-o", str(out), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    assert doc["taskId"] == "t1" and doc["paths"] == ["src/**"]
