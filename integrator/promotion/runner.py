"""Running a validation command on a queue head, in a clean checkout of its tree.

The tree is written into a fresh temporary folder by git itself (`read-tree` into a
private index file, then `checkout-index`, with the canonical repository as `--git-dir`
and the folder as `--work-tree`): git's own path checks apply (nothing written through a
symlink, no `.git` in any spelling), no hook runs, the repository's index and the
operator's checkout are never touched, and the folder has no `.git`, so the command —
code the agents wrote — cannot reach the canonical repository through it. The command runs there in its own process group (killed whole on timeout) with
the head, tree, target and landings in its environment; its output (stdout and stderr
together) goes to a file outside the checkout, whose tail is recorded.

While it runs, the lines it writes there are logged as they come (`validation.output`,
escaped, within the VALIDATION_LOG_* limits), and every HEARTBEAT_S seconds one
`validation.running` event says it still runs; neither changes what is recorded.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

import structlog

from integrator import faults
from integrator.documents.promotion import Covered
from integrator.errors import IntegratorError
from integrator.escape import visible
from integrator.limits import (
    LOG_TAIL_BYTES,
    VALIDATION_LOG_BYTES,
    VALIDATION_LOG_LINE_BYTES,
    VALIDATION_LOG_LINES,
)
from integrator.plumbing.git import bounded, git_env, run_git
from integrator.promotion.scratch import PREFIX, mark, remove_folder

ENV_PREFIX = "INTEGRATOR_VALIDATION_"
HEARTBEAT_S = 30.0  # seconds between two `validation.running` events (`[validation] heartbeat`)
STREAM_POLL_S = 0.25  # how often the output file is read for lines to log while a run runs

log = structlog.get_logger("integrator.promote")

# Runs in progress (their process groups), killed by `interrupt` when the promoter stops:
# a run cut short that way is no result, so nothing of it is recorded.
_running: set[int] = set()
_interrupted = threading.Event()


class Interrupted(Exception):
    """The promoter is stopping: the run in hand was killed and counts for nothing."""


def interrupt() -> None:
    _interrupted.set()
    for pid in list(_running):
        _kill_group(pid, settle=0)


@dataclass(frozen=True, kw_only=True)
class RunRequest:
    """One run: which head, on which tree, against which target, covering what."""

    target: str
    head: str
    tree: str
    base: str
    landings: tuple[Covered, ...]
    attempt: int
    scope: str | None = None  # the [[validation.scope]] this run validates


@dataclass(frozen=True, kw_only=True)
class RunOutcome:
    passed: bool
    exit_code: int | None
    timed_out: bool
    started_at: datetime
    duration_s: float
    log: bytes
    error: str | None = None  # the run could not start (no checkout, no such command)


def environment(request: RunRequest, request_file: Path) -> dict[str, str]:
    """What the command is told about the head it validates."""
    env = git_env()
    env.update(
        {
            f"{ENV_PREFIX}TARGET": request.target,
            f"{ENV_PREFIX}HEAD": request.head,
            f"{ENV_PREFIX}TREE": request.tree,
            f"{ENV_PREFIX}BASE": request.base,
            f"{ENV_PREFIX}ATTEMPT": str(request.attempt),
            f"{ENV_PREFIX}LANDINGS": " ".join(c.staging for c in request.landings),
            f"{ENV_PREFIX}CANDIDATES": " ".join(c.candidate or "-" for c in request.landings),
            f"{ENV_PREFIX}TASKS": " ".join(c.task_id or "-" for c in request.landings),
            f"{ENV_PREFIX}REQUEST": str(request_file),
        }
    )
    if request.scope is not None:
        env[f"{ENV_PREFIX}SCOPE"] = request.scope
    return env


def request_document(request: RunRequest) -> dict[str, object]:
    return {
        "schema": "integrator.validation-request.v1",
        "target": request.target,
        "head": request.head,
        "tree": request.tree,
        "base": request.base,
        "attempt": request.attempt,
        "landings": [c.wire() for c in request.landings],
        **({"scope": request.scope} if request.scope is not None else {}),
    }


def checkout(repo_path: str | Path, tree: str, folder: Path, index: Path) -> None:
    """Write `tree` into `folder` with git (a private index file at `index`)."""
    base = [f"--work-tree={folder}", "-c", "core.hooksPath=/dev/null"]
    for args in (["read-tree", tree], ["checkout-index", "--all"]):
        proc = run_git(
            [*base, *args], cwd=folder, git_dir=repo_path, index_file=index, timeout=3600,
            check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            why = bounded(proc.stderr.decode("utf-8", "replace"))
            raise OSError(f"git {args[0]} {tree} failed: {why}")


def argv_of(command: Sequence[str] | str) -> list[str]:
    return ["sh", "-c", command] if isinstance(command, str) else list(command)


def run(
    repo_path: str | Path,
    command: Sequence[str] | str,
    timeout: float,
    request: RunRequest,
    *,
    scratch: Path | None = None,
    heartbeat: float | None = None,
) -> RunOutcome:
    """Check the head's tree out into a temporary folder and run `command` in it, its
    output logged as it comes and a heartbeat every `heartbeat` s (HEARTBEAT_S)."""
    started = datetime.now(UTC)
    clock = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix=PREFIX, dir=scratch))
    try:
        mark(root)  # a promoter that dies leaves it: the next one finds it (scratch.sweep)
        work = root / "checkout"
        work.mkdir()
        request_file = root / "request.json"
        request_file.write_text(json.dumps(request_document(request), indent=2) + "\n")
        try:
            checkout(repo_path, request.tree, work, root / "index")
        except (OSError, IntegratorError) as err:  # git failed, timed out or is missing
            why = f"cannot check out {request.tree}: {err}"
            return _not_run(started, clock, why)
        log_path = root / "output.log"
        # Read through a descriptor opened before the command starts: the command may
        # replace the file's name (a FIFO there would block an open by name for ever).
        with log_path.open("wb") as sink, log_path.open("rb") as reader:
            try:
                proc = subprocess.Popen(
                    argv_of(command), cwd=work, stdin=subprocess.DEVNULL, stdout=sink,
                    stderr=subprocess.STDOUT, env=environment(request, request_file),
                    start_new_session=True,
                )  # fmt: skip
            except OSError as err:
                why = f"cannot run {argv_of(command)[0]!r}: {err.strerror or err}"
                return _not_run(started, clock, why)
            faults.children.add(proc.pid)  # a drill's SIGKILL takes the command down too
            _running.add(proc.pid)
            timed_out = False
            stream = Stream(reader, head=request.head, scope=request.scope,
                            attempt=request.attempt)  # fmt: skip
            beat = HEARTBEAT_S if heartbeat is None else heartbeat
            try:
                code: int | None = _wait(proc, timeout, stream, beat)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(proc.pid, settle=0)  # the leader first (reaped just below)
                proc.wait()
                code = None
            finally:
                # Whatever the command left running in its group (`sleep 300 &`) is code of
                # a head that may be ejected: it does not outlive its run. (A process that
                # made a session of its own is out of reach; run the promoter in a container
                # or a cgroup where that matters.)
                _kill_group(proc.pid)
                faults.children.discard(proc.pid)
                _running.discard(proc.pid)
                stream.close()  # what the command wrote last (and a line with no end)
            if _interrupted.is_set():
                raise Interrupted(request.head)
            output = _tail(reader)
        if timed_out:
            output += f"\n[integrator: killed after the timeout of {timeout:g} s]\n".encode()
        passed = code == 0 and not timed_out
        return RunOutcome(
            passed=passed, exit_code=code, timed_out=timed_out, started_at=started,
            duration_s=time.monotonic() - clock, log=output,
        )  # fmt: skip
    finally:
        remove_folder(root)


def _wait(proc: subprocess.Popen[bytes], timeout: float, stream: Stream, beat: float) -> int:
    """`proc.wait(timeout)` (TimeoutExpired after `timeout` s), logging the output as it
    comes and a heartbeat every `beat` s meanwhile."""
    clock = time.monotonic()
    deadline = clock + timeout
    next_beat = clock + (beat if beat > 0 else math.inf)
    while True:
        now = time.monotonic()
        pause = max(0.0, min(STREAM_POLL_S, deadline - now, next_beat - now))
        with contextlib.suppress(subprocess.TimeoutExpired):
            return proc.wait(timeout=pause)
        stream.pump()
        now = time.monotonic()
        if now >= deadline:
            raise subprocess.TimeoutExpired(proc.args, timeout)
        if now >= next_beat:
            log.info(
                "validation.running", **stream.fields, elapsed_s=round(now - clock, 1),
                output_bytes=stream.size(),
            )  # fmt: skip
            next_beat = now + beat


class Stream:
    """The lines a run writes to its output file, logged as they come (`validation.output`,
    each escaped): at most VALIDATION_LOG_LINE_BYTES of a line (`cut`), VALIDATION_LOG_LINES
    lines and VALIDATION_LOG_BYTES bytes of one run, then one `validation.output_capped`.
    It never fails the run: a file it cannot read ends the streaming, not the command."""

    def __init__(self, handle: BinaryIO, **fields: Any) -> None:
        self.fields = fields
        self.handle = handle  # the output file, opened before the command started
        self.read = 0  # bytes read from the file (and streamed)
        self.lines = 0  # lines logged
        self.partial = b""  # the start of a line not ended yet
        self.skipping = False  # the line in hand was logged cut: its rest is not
        self.stopped = False

    def size(self) -> int:
        """The bytes the command wrote so far."""
        try:
            return os.fstat(self.handle.fileno()).st_size
        except OSError:
            return self.read

    def pump(self, *, last: bool = False) -> None:
        """Log the lines written since the last pump; `last`: the command is over, a line
        it did not end is logged too."""
        if self.stopped:
            return
        try:
            chunk: bytes = self.handle.read(VALIDATION_LOG_BYTES + 1 - self.read)
        except OSError as err:
            log.warning("validation.output_unreadable", **self.fields, error=str(err))
            self._stop()
            return
        over = self.read + len(chunk) > VALIDATION_LOG_BYTES
        chunk = chunk[: VALIDATION_LOG_BYTES - self.read]
        self.read += len(chunk)
        *complete, self.partial = (self.partial + chunk).split(b"\n")
        for line in complete:
            if self.skipping:  # the end of a line logged cut
                self.skipping = False
            else:
                self._line(line)
        if self.skipping:
            self.partial = b""
        elif len(self.partial) > VALIDATION_LOG_LINE_BYTES:
            self._line(self.partial)
            self.partial, self.skipping = b"", True
        if over:
            self._cap()
        elif last and self.partial:
            self._line(self.partial)
            self.partial = b""

    def _line(self, raw: bytes) -> None:
        if self.stopped:
            return
        if self.lines >= VALIDATION_LOG_LINES:
            self._cap()
            return
        cut = {"cut": True} if len(raw) > VALIDATION_LOG_LINE_BYTES else {}
        text = raw[:VALIDATION_LOG_LINE_BYTES].decode("utf-8", "replace").removesuffix("\r")
        self.lines += 1
        log.info("validation.output", **self.fields, line=visible(text), **cut)

    def _cap(self) -> None:
        log.info(
            "validation.output_capped", **self.fields, lines=self.lines, bytes=self.read,
            max_lines=VALIDATION_LOG_LINES, max_bytes=VALIDATION_LOG_BYTES,
        )  # fmt: skip
        self._stop()

    def _stop(self) -> None:
        self.stopped = True
        self.partial = b""  # the handle is the caller's: it reads the tail from it after

    def close(self) -> None:
        """The command is over: what it wrote last is logged, the file closed."""
        self.pump(last=True)
        self._stop()


def _not_run(started: datetime, clock: float, why: str) -> RunOutcome:
    """The outcome of a command that could not start."""
    return RunOutcome(
        passed=False, exit_code=None, timed_out=False, started_at=started,
        duration_s=time.monotonic() - clock, log=b"", error=why,
    )  # fmt: skip


def _kill_group(pid: int, *, settle: float = 2.0) -> None:
    """SIGKILL the process group `pid` and wait (up to `settle` s) until it is gone."""
    deadline = time.monotonic() + settle
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
        while time.monotonic() < deadline:
            os.killpg(pid, 0)  # ProcessLookupError once no member (or only reaped ones) is left
            time.sleep(0.01)


def _tail(handle: BinaryIO) -> bytes:
    """The last LOG_TAIL_BYTES of the output file open as `handle`."""
    size = os.fstat(handle.fileno()).st_size
    handle.seek(max(0, size - LOG_TAIL_BYTES))
    data = handle.read(LOG_TAIL_BYTES)
    if size > LOG_TAIL_BYTES:
        return b"[... %d earlier bytes not kept ...]\n" % (size - LOG_TAIL_BYTES) + data
    return data
