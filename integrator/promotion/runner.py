"""Running a validation command on a queue head, in a clean checkout of its tree.

The tree is written into a fresh temporary folder by git itself (`read-tree` into a
private index file, then `checkout-index`, with the canonical repository as `--git-dir`
and the folder as `--work-tree`): git's own path checks apply (nothing written through a
symlink, no `.git` in any spelling), no hook runs, the repository's index and the
operator's checkout are never touched, and the folder has no `.git`, so the command —
code the agents wrote — cannot reach the canonical repository through it. The command runs there in its own process group (killed whole on timeout) with
the head, tree, target and landings in its environment; its output (stdout and stderr
together) goes to a file outside the checkout, whose tail is recorded.
"""

from __future__ import annotations

import contextlib
import json
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

from integrator import faults
from integrator.documents.promotion import Covered
from integrator.errors import IntegratorError
from integrator.limits import LOG_TAIL_BYTES
from integrator.plumbing.git import bounded, git_env, run_git
from integrator.promotion.scratch import PREFIX, mark, remove_folder

ENV_PREFIX = "INTEGRATOR_VALIDATION_"

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
) -> RunOutcome:
    """Check the head's tree out into a temporary folder and run `command` in it."""
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
        with log_path.open("wb") as log:
            try:
                proc = subprocess.Popen(
                    argv_of(command), cwd=work, stdin=subprocess.DEVNULL, stdout=log,
                    stderr=subprocess.STDOUT, env=environment(request, request_file),
                    start_new_session=True,
                )  # fmt: skip
            except OSError as err:
                why = f"cannot run {argv_of(command)[0]!r}: {err.strerror or err}"
                return _not_run(started, clock, why)
            faults.children.add(proc.pid)  # a drill's SIGKILL takes the command down too
            _running.add(proc.pid)
            timed_out = False
            try:
                code: int | None = proc.wait(timeout=timeout)
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
        if _interrupted.is_set():
            raise Interrupted(request.head)
        output = _tail(log_path)
        if timed_out:
            output += f"\n[integrator: killed after the timeout of {timeout:g} s]\n".encode()
        passed = code == 0 and not timed_out
        return RunOutcome(
            passed=passed, exit_code=code, timed_out=timed_out, started_at=started,
            duration_s=time.monotonic() - clock, log=output,
        )  # fmt: skip
    finally:
        remove_folder(root)


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


def _tail(path: Path) -> bytes:
    size = path.stat().st_size
    with path.open("rb") as handle:
        if size > LOG_TAIL_BYTES:
            handle.seek(size - LOG_TAIL_BYTES)
            return b"[... %d earlier bytes not kept ...]\n" % (size - LOG_TAIL_BYTES) + handle.read(
                LOG_TAIL_BYTES
            )
        return handle.read(LOG_TAIL_BYTES)
