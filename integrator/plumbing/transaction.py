"""Ref transactions: one all-or-nothing `git update-ref --stdin` transaction at a time.

Every ref integrator moves in a local repository moves here, each with the value it was
expected to have; a failed compare-and-swap applies nothing and says which ref moved.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from integrator import faults
from integrator.errors import GitError, RefLockedError, RefMovedError
from integrator.plumbing.git import ZERO_OID, GitProcess, bounded, open_git

_LOCK_RE = re.compile(r"cannot lock ref '(?P<ref>[^']+)': (?P<why>.*)")
_LOCKFILE_RE = re.compile(r"Unable to create '(?P<lock>[^']+\.lock)': File exists")
_IS_AT_RE = re.compile(r"is at (?P<actual>[0-9a-f]+) but expected (?P<expected>[0-9a-f]+)")


@dataclass(frozen=True)
class RefOp:
    """One line of a transaction: `update` (new, old) or `verify` (old)."""

    verb: str
    ref: str
    new: str | None = None
    old: str | None = None

    def line(self) -> str:
        old = self.old or ZERO_OID
        if self.verb == "verify":
            return f"verify {self.ref} {old}\n"
        if self.verb == "update":
            return f"update {self.ref} {self.new} {old}\n"
        if self.verb == "delete":
            return f"delete {self.ref} {old}\n"
        if self.verb == "set":  # a cache's ref (a mirror): whatever it held before
            return f"update {self.ref} {self.new}\n"
        if self.verb == "drop":
            return f"delete {self.ref}\n"
        raise ValueError(f"unknown ref verb {self.verb}")


def update(ref: str, new: str, old: str | None) -> RefOp:
    return RefOp("update", ref, new, old)


def verify(ref: str, old: str | None) -> RefOp:
    return RefOp("verify", ref, None, old)


def delete(ref: str, old: str) -> RefOp:
    return RefOp("delete", ref, None, old)


class RefWriter(Protocol):
    """What a caller that moves refs holds: this module's `RefUpdater` (a local transaction;
    `checkout.KeptCheckouts` wraps it for a branch checked out in a work tree) or
    `remote.RemotePush` (one atomic push with a lease per ref), the same to its caller.

    `apply(ops)` is one all-or-nothing transaction of `update(ref, new, old)` (old None:
    create), `delete(ref, old)` and `verify(ref, old)` ops: it returns once every op holds,
    or raises RefMovedError naming a ref not at its expected value, and changes nothing.
    Where the two differ, callers must not rely on either side:

    - `verify` is checked under the local transaction's locks; a push cannot carry it (an
      unchanged ref is not sent), so remotely it is dropped: what it guards must be covered
      by a ref the same transaction moves (a landing consumes the claim it fences on).
    - `on_prepared` runs locally with every ref locked and every old value checked, just
      before the commit (an exception it raises aborts the transaction); remotely just
      before the push is sent, with nothing locked yet.
    - `set` and `drop` (cache verbs, no expected value) are for a mirror's local refs: a
      push leases every ref it moves, so remotely `set` would be pushed as a creation.
    - Other failures: locally RefLockedError (a `.lock` in the way) or GitError; remotely
      ServerRefused (a hook, permissions) or InfrastructureError. A push whose report was
      lost is decided from the server's refs afterwards: if the server applied it, `apply`
      returns normally. A `writeout_only` RefUpdater refuses deletions (ValueError).

    `transactions` counts the applied ones; `close` ends the local git process (the remote
    push's mirror updater too).
    """

    transactions: int

    def apply(
        self, ops: Sequence[RefOp], *, on_prepared: Callable[[], None] | None = None
    ) -> None: ...

    def close(self) -> None: ...


class RefUpdater:
    """A long-lived `git update-ref --stdin`, one all-or-nothing transaction at a time.

    git ends the process when a transaction fails; the next transaction starts a new one.
    A `.lock` left by someone else is reported as RefLockedError, never deleted.
    """

    def __init__(self, repo_path: str | Path, *, writeout_only: bool = False) -> None:
        self.repo_path = str(repo_path)
        # With writeout_only git runs with core.fsyncMethod=writeout-only: each ref file's
        # data is written to the device before its rename (sync_file_range), so a crash
        # can never leave an empty ref, but nothing waits for a journal commit per file;
        # the caller makes the whole transaction durable with one `sync_refs` afterwards.
        # Only for creations and updates: a deletion may rewrite packed-refs.
        self.writeout_only = writeout_only
        self._proc: GitProcess | None = None
        self.transactions = 0
        self.spawns = 0

    def _ensure(self) -> GitProcess:
        if self._proc is None or self._proc.poll() is not None:
            method = ["-c", "core.fsyncMethod=writeout-only"] if self.writeout_only else []
            self._proc = open_git([*method, "update-ref", "--stdin"], cwd=self.repo_path)
            self.spawns += 1
            faults.children.add(self._proc.pid)
        return self._proc

    def _say(self, proc: GitProcess, text: str, expect: str | None) -> None:
        stdin: IO[bytes] | None = proc.stdin
        stdout: IO[bytes] | None = proc.stdout
        assert stdin is not None and stdout is not None
        try:
            stdin.write(text.encode())
            stdin.flush()
        except BrokenPipeError:
            self._fail(proc)
        if expect is None:
            return
        line = stdout.readline().decode().strip()
        if line != expect:
            self._fail(proc)

    def _fail(self, proc: GitProcess) -> None:
        proc.finish(timeout=30)
        err = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
        faults.children.discard(proc.pid)
        self._proc = None
        raise classify_failure(err, self.repo_path)

    def apply(self, ops: Sequence[RefOp], *, on_prepared: Callable[[], None] | None = None) -> None:
        """Apply `ops` atomically: every expected old value holds, or nothing changes."""
        if self.writeout_only and any(op.verb == "delete" for op in ops):
            raise ValueError("a deletion may rewrite packed-refs: use an fsyncing updater")
        proc = self._ensure()
        body = "".join(op.line() for op in ops)
        self._say(proc, "start\n", "start: ok")
        self._say(proc, body, None)
        self._say(proc, "prepare\n", "prepare: ok")
        if on_prepared is not None:
            try:
                on_prepared()
            except BaseException:
                # Its refusal aborts the transaction: nothing moved, the locks are released.
                self._say(proc, "abort\n", "abort: ok")
                raise
        self._say(proc, "commit\n", "commit: ok")
        self.transactions += 1

    def close(self) -> None:
        if self._proc is not None:
            if self._proc.poll() is None:
                with contextlib.suppress(OSError):
                    if self._proc.stdin:
                        self._proc.stdin.close()
                if self._proc.wait(timeout=30) is None:  # left running: it may be committing
                    raise GitError("git update-ref --stdin did not exit within 30s of its end")
            faults.children.discard(self._proc.pid)
        self._proc = None

    def __enter__(self) -> RefUpdater:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def classify_failure(stderr: str, repo_path: str) -> Exception:
    match = _LOCK_RE.search(stderr)
    if match is None:
        return GitError(f"git update-ref failed: {bounded(stderr) or 'no message'}")
    ref = match.group("ref")
    why = match.group("why")
    lock = _LOCKFILE_RE.search(stderr)
    if lock is not None:
        return RefLockedError(ref, lock.group("lock"))
    is_at = _IS_AT_RE.search(why)
    if is_at is not None:
        return RefMovedError(ref, is_at.group("actual"), is_at.group("expected"))
    if "unable to resolve reference" in why:
        return RefMovedError(ref, None, "an existing value")
    if "reference already exists" in why:
        return RefMovedError(ref, "an existing value", None)
    return RefMovedError(ref, None, None)
