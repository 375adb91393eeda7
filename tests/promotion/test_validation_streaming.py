"""A validation command's output reaches the promoter's log while it runs, line by line and
escaped, with a heartbeat every few seconds; what is streamed is bounded (a line, the lines
and the bytes of one run); what the run records is what it was before (the output's tail,
the exit code, the timeout). Real commands throughout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from integrator import limits
from integrator.promotion.runner import RunOutcome, RunRequest, run
from tests.daemon_world import wait_until
from tests.gitutil import GIT_ENV, commit_files, git, make_repo
from tests.promotion_world import PromotionWorld


def _request(tmp_path: Path) -> tuple[Path, RunRequest]:
    repo = make_repo(tmp_path / "canon")
    commit_files(repo, {"ok.txt": "x\n"}, "base", ref="refs/heads/main")
    head = git("rev-parse", "main", cwd=repo)
    tree = git("rev-parse", "main^{tree}", cwd=repo)
    return repo / ".git", RunRequest(
        target="main", head=head, tree=tree, base=head, landings=(), attempt=1
    )


def _events(logs: list[MutableMapping[str, Any]], name: str) -> list[MutableMapping[str, Any]]:
    return [e for e in list(logs) if e["event"] == name]


def _lines(logs: list[MutableMapping[str, Any]]) -> list[str]:
    return [e["line"] for e in _events(logs, "validation.output")]


def test_lines_are_logged_while_the_command_runs_and_a_heartbeat_says_it_runs(
    tmp_path: Path,
) -> None:
    """The command prints a line, then waits for a file the test makes only after it saw
    that line and a heartbeat in the log: both came while the command ran. Its last lines
    (one with an escape sequence, one with no end) are logged when it ends, escaped, and
    the outcome records exactly what it wrote."""
    repo, request = _request(tmp_path)
    go = tmp_path / "go"
    script = tmp_path / "slow.sh"
    script.write_text(
        "echo 'slow: started'\n"
        f"i=0; while [ ! -e '{go}' ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done\n"
        "printf 'paint \\033[2J\\n'\n"
        "printf 'no end'\n"
    )
    outcome: list[RunOutcome] = []
    with capture_logs() as logs:
        worker = threading.Thread(
            target=lambda: outcome.append(
                run(repo, ["sh", str(script)], 60, request, scratch=tmp_path, heartbeat=0.2)
            )
        )
        worker.start()
        try:
            wait_until(lambda: "slow: started" in _lines(logs), 15, "the first line logged")
            beats = wait_until(lambda: _events(logs, "validation.running"), 15, "a heartbeat")
            running = worker.is_alive()
        finally:
            go.touch()
            worker.join(60)
    assert running, "the command ended before its first line and a heartbeat were logged"
    assert not worker.is_alive()
    assert beats[0]["head"] == request.head and beats[0]["attempt"] == 1
    assert beats[0]["elapsed_s"] > 0 and beats[0]["output_bytes"] == len("slow: started\n")
    assert _lines(logs) == ["slow: started", "paint \\x1b[2J", "no end"]
    (result,) = outcome
    assert result.passed and result.exit_code == 0 and not result.timed_out
    assert result.log == b"slow: started\npaint \x1b[2J\nno end"


def test_a_timed_out_command_is_killed_and_recorded_as_before(tmp_path: Path) -> None:
    """Streaming does not move the timeout: a command that prints and sleeps past it is
    killed on time, its lines logged, its record the tail with the timeout's note."""
    repo, request = _request(tmp_path)
    with capture_logs() as logs:
        began = time.monotonic()
        result = run(repo, "echo before; sleep 30; echo after", 1.0, request, scratch=tmp_path)
        took = time.monotonic() - began
    assert result.timed_out and result.exit_code is None and not result.passed
    assert took < 10
    assert result.log == b"before\n\n[integrator: killed after the timeout of 1 s]\n"
    assert _lines(logs) == ["before"]


def test_more_lines_than_the_cap_stream_the_cap_and_record_the_tail(tmp_path: Path) -> None:
    """A command printing more lines than VALIDATION_LOG_LINES: that many are logged, then
    one `validation.output_capped`; the record is the output's tail, as before."""
    repo, request = _request(tmp_path)
    count = limits.VALIDATION_LOG_LINES + 500
    with capture_logs() as logs:
        result = run(repo, f"seq 1 {count}", 60, request, scratch=tmp_path)
    assert result.passed
    lines = _lines(logs)
    assert lines == [str(i) for i in range(1, limits.VALIDATION_LOG_LINES + 1)]
    (capped,) = _events(logs, "validation.output_capped")
    assert capped["lines"] == limits.VALIDATION_LOG_LINES
    assert result.log == "".join(f"{i}\n" for i in range(1, count + 1)).encode()


def test_more_bytes_than_the_cap_stop_the_stream_there(tmp_path: Path) -> None:
    """Output past VALIDATION_LOG_BYTES (in lines under the line cap) is not streamed
    beyond it: the lines logged hold at most that many bytes, and one capped event says
    so; the record keeps its tail of LOG_TAIL_BYTES with the note of what it left out."""
    repo, request = _request(tmp_path)
    width = 1000  # bytes per line with its newline: under the line cap
    count = 2 * limits.VALIDATION_LOG_BYTES // width
    assert count < limits.VALIDATION_LOG_LINES
    command = f"yes {'y' * (width - 1)} | head -n {count}"
    with capture_logs() as logs:
        result = run(repo, command, 60, request, scratch=tmp_path)
    assert result.passed
    lines = _lines(logs)
    assert len(lines) == limits.VALIDATION_LOG_BYTES // width
    assert sum(len(line) + 1 for line in lines) <= limits.VALIDATION_LOG_BYTES
    (capped,) = _events(logs, "validation.output_capped")
    assert capped["bytes"] == limits.VALIDATION_LOG_BYTES
    assert result.log.startswith(b"[... %d earlier bytes" % (count * width - limits.LOG_TAIL_BYTES))


def test_a_line_longer_than_the_cap_is_logged_cut_once(tmp_path: Path) -> None:
    """A line past VALIDATION_LOG_LINE_BYTES, written in two halves a moment apart (so the
    first is read before the line ends), is logged once, cut to the cap; the next line is
    logged whole. The record keeps the whole line."""
    repo, request = _request(tmp_path)
    cap = limits.VALIDATION_LOG_LINE_BYTES
    half = cap + 500
    command = (
        f"head -c {half} /dev/zero | tr '\\0' a; sleep 0.6; "
        f"head -c {half} /dev/zero | tr '\\0' b; echo; echo after"
    )
    with capture_logs() as logs:
        result = run(repo, command, 60, request, scratch=tmp_path)
    assert result.passed
    out = _events(logs, "validation.output")
    assert [(e["line"], e.get("cut", False)) for e in out] == [
        ("a" * cap, True), ("after", False)
    ]  # fmt: skip
    assert result.log == b"a" * half + b"b" * half + b"\nafter\n"


SLOW = """#!/bin/sh
echo "slow: validating $INTEGRATOR_VALIDATION_HEAD"
i=0; while [ ! -e "$1" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done
echo "slow: done"
"""


def test_the_promoter_logs_the_output_and_status_waits_with_progress(
    promotion: PromotionWorld,
) -> None:
    """A real `promote --once` whose validation waits for a file: its JSON log has the
    command's first line while the command still runs (no `validation.run` yet) and, with
    `heartbeat = 0.2`, a `validation.running` beat within seconds, and a
    `status --until promoted --wait` meanwhile says on stderr (no terminal: plain lines)
    that the landing waits for its promotion; once the file is made, the run is recorded,
    and status prints one JSON document on stdout saying promoted."""
    world = promotion
    go = world.tmp / "go"
    script = world.tmp / "slow.sh"
    script.write_text(SLOW)
    world.set_policy(f'command = ["sh", "{script}", "{go}"]\nheartbeat = 0.2')
    sid = world.submit("t0")
    assert world.serve_once("--no-promote").proc.returncode == 0
    err = world.tmp / "status.err"
    with err.open("wb") as err_file:
        status = subprocess.Popen(
            [*_cli(), "status", "--spool", str(world.spool.root), "--submission", sid,
             "--until", "promoted", "--wait", "120", "--json"],
            stdout=subprocess.PIPE, stderr=err_file, env={**os.environ, **GIT_ENV},
        )  # fmt: skip
        world.procs.append(status)
        promoter = world.run("promote", "--repo", str(world.repo), "--once", "--log-format",
                             "json", name="promote")  # fmt: skip
        try:
            first = promoter.wait_event("validation.output", timeout=60)[0]
            # `heartbeat = 0.2`: a beat within seconds (the default would wait 30 s).
            beat = promoter.wait_event("validation.running", timeout=20)[0]
            still = promoter.proc.poll() is None and not promoter.events("validation.run")
            said = wait_until(
                lambda: "waiting for its promotion" in err.read_text(), 30, "status progress"
            )
        finally:
            go.touch()
        assert promoter.proc.wait(timeout=120) == 0, promoter.text()
        out, _ = status.communicate(timeout=120)
    assert still, "the line was logged only after the command ended"
    assert beat["elapsed_s"] < 15 and beat["head"] == first["head"]
    assert first["line"].startswith("slow: validating ") and said
    names = [e["event"] for e in promoter.events()]
    assert names.index("validation.run") > max(
        i for i, e in enumerate(promoter.events()) if e.get("line") == "slow: done"
    )
    assert status.returncode == 0, err.read_text()
    doc = json.loads(out)
    assert doc["landing"]["state"] == "promoted"
    progress = [
        line for line in err.read_text().splitlines() if line.startswith(f"integrator: {sid}")
    ]
    assert progress and all("\r" not in line and "\x1b" not in line for line in progress)
    assert "ACCEPTED, waiting for its promotion (landing: queued as " in progress[0]


def _cli() -> list[str]:
    return [sys.executable, "-m", "integrator"]


def test_a_command_that_puts_a_fifo_where_its_output_was_cannot_block_the_promoter(
    tmp_path: Path,
) -> None:
    """The output file is read through a descriptor opened before the command starts: a
    command that replaces its name with a FIFO (whose open for reading would wait for a
    writer for ever) or a link elsewhere changes nothing the promoter reads."""
    repo, request = _request(tmp_path)
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("not the run's output\n")
    for swap in ("mkfifo ../output.log", f"ln -s '{elsewhere}' ../output.log"):
        command = f"echo 'mine'; rm ../output.log; {swap}; sleep 0.6; echo 'still mine'"
        outcome: list[RunOutcome] = []
        with capture_logs() as logs:
            worker = threading.Thread(
                target=lambda c=command, out=outcome: out.append(
                    run(repo, c, 30, request, scratch=tmp_path)
                ),
            )  # fmt: skip
            worker.start()
            worker.join(20)
        assert not worker.is_alive(), swap
        assert outcome[0].passed, outcome[0]
        assert outcome[0].log == b"mine\nstill mine\n", swap
        assert _lines(logs) == ["mine", "still mine"], swap
