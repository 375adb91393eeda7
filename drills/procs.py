"""Processes and fault hooks: stop/continue, wait for a state, daemons and their logs.

Every fault a drill injects is explicit and named here: SIGSTOP of a process we started
(`pause`), SIGKILL at a named step (integrator's own `INTEGRATOR_FAULT` points), a held
ref lock (`hold_ref_lock`, what a crashed or paused git leaves), and an unavailable
registry (`hold_registry`). Only processes a drill started are ever signalled, by pid.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from drills.repo import git_dir

T = TypeVar("T")


class DrillError(Exception):
    """The drill could not run as scripted (a timeout, a process that died): a failure."""

    def __init__(self, message: str, evidence: Sequence[Path | str] = ()) -> None:
        super().__init__(message)
        self.evidence = [str(p) for p in evidence]


def wait_until(
    predicate: Callable[[], T | None],
    timeout: float,
    what: str,
    evidence: Sequence[Path] = (),
    *,
    interval: float = 0.01,
) -> T:
    """Poll `predicate` every `interval` seconds until it returns something true; a timeout
    names what was awaited."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise DrillError(f"timed out after {timeout:g} s waiting for {what}", evidence)
        time.sleep(interval)


def proc_state(pid: int) -> str | None:
    """The kernel's one-letter state of `pid` (T = stopped), None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may hold spaces and parentheses; the state follows the last ')'.
    return text[text.rfind(")") + 2 :].split(" ", 1)[0]


def wait_stopped(proc: subprocess.Popen[bytes], timeout: float, what: str) -> None:
    """Until `proc` is stopped (SIGSTOP, by itself or by us); fails if it exits instead."""

    def stopped() -> bool:
        if proc.poll() is not None:
            raise DrillError(f"{what}: process {proc.pid} exited {proc.returncode} instead")
        return proc_state(proc.pid) in ("T", "t")

    wait_until(stopped, timeout, f"{what} (pid {proc.pid}) to stop")


def is_stopped(proc: subprocess.Popen[bytes]) -> bool:
    return proc.poll() is None and proc_state(proc.pid) in ("T", "t")


def pause(proc: subprocess.Popen[bytes]) -> None:
    """SIGSTOP a process we started: it keeps everything it holds and does nothing."""
    proc.send_signal(signal.SIGSTOP)
    wait_stopped(proc, 10, "paused process")


def resume(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGCONT)


def end(proc: subprocess.Popen[bytes]) -> None:
    """Make sure a process we started is gone (continued first, so SIGKILL is not queued)."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGCONT)
        proc.send_signal(signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


@contextlib.contextmanager
def hold_ref_lock(repo: Path, ref: str) -> Iterator[Path]:
    """Hold `<ref>.lock` the way git does while it updates the ref (or after it was killed)."""
    lock = git_dir(repo) / f"{ref}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.close(fd)
    try:
        yield lock
    finally:
        lock.unlink(missing_ok=True)


@contextlib.contextmanager
def hold_registry(path: Path) -> Iterator[None]:
    """Keep the SQLite registry write-locked (BEGIN IMMEDIATE), as a busy or hung peer would."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("BEGIN IMMEDIATE")
        yield
        conn.execute("COMMIT")
    finally:
        conn.close()


@dataclass
class Served:
    """A daemon process (`integrator serve`) and its JSON-lines log."""

    proc: subprocess.Popen[bytes]
    log: Path

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        out = []
        try:
            lines = self.log.read_text(errors="replace").splitlines()
        except FileNotFoundError:
            return []
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and (name is None or event.get("event") == name):
                out.append(event)
        return out

    def wait_event(self, name: str, count: int = 1, timeout: float = 30) -> list[dict[str, Any]]:
        def seen() -> list[dict[str, Any]] | None:
            found = self.events(name)
            if len(found) >= count:
                return found
            if self.proc.poll() is not None:
                raise DrillError(
                    f"the daemon exited {self.proc.returncode} before {count} {name!r} events",
                    [self.log],
                )
            return None

        return wait_until(seen, timeout, f"{count} {name!r} events in {self.log}", [self.log])

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM (finish the batch in hand, exit 0); returns the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)
