"""The canonical repository on a git server, seen through a local bare mirror.

The mirror is only a cache: every command that reads authority fetches the target and the
authority refs first (`fetch`), and every ref write is one `git push --atomic` carrying a
lease (`--force-with-lease=<ref>:<expected>`) for each ref it moves (`RemotePush.apply`: a
`transaction.RefWriter`, like the local `RefUpdater`). The server's `receive-pack` checks
every old value under its ref lock and applies all or none, so integrators on many hosts
coordinate only through those compare-and-swaps.

Two facts shape it. A ref pushed to its unchanged value is not sent, so a lease on it is
never checked: a `verify` cannot be pushed, and the landing fences on the claim by moving
it (consuming it). And a push can be reported ambiguously (a connection dropped after the
server committed): after any push that did not come back clean, the remote's refs are read
again and the outcome decided from them, never from the report.

A server that authenticates no pusher (a plain `git daemon`) can still protect its
authority refs with integrator's pre-receive hook and a shared key: with
`integrator.remoteKeyFile` set in the mirror's config, every push carries a fresh
`integrator-hmac` push option over exactly the ref updates it asks for (`push_signature`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from integrator import faults, refnames
from integrator.errors import (
    ConfigurationError,
    GitTimeoutError,
    InfrastructureError,
    RefMovedError,
)
from integrator.plumbing.git import GitRun, last_line, run_git, server_said
from integrator.plumbing.signing import push_option
from integrator.plumbing.transaction import RefOp, RefUpdater

# What a mirror fetches: the target and every namespace of authority and records — all of
# refs/integrator/ but what only this mirror holds (bundle quarantine, outgoing bundles) and
# the intake's namespaces (fetched from the intake, wherever it is).
LOCAL_ONLY = (
    refnames.QUARANTINE,
    refnames.OUTGOING,
    refnames.SUBMIT,
    refnames.VERDICTS,
    refnames.INTAKE,
    refnames.SEEN,
)
AUTHORITY_REFSPECS = (refnames.ALL_REFSPEC, *(f"^{prefix}*" for prefix in LOCAL_ONLY))
PUSH_TIMEOUT = 300.0  # seconds for one push or fetch before it counts as failed
KEY_FILE_CONFIG = "integrator.remoteKeyFile"  # the canonical server's push key
INTAKE_KEY_FILE_CONFIG = "integrator.intakeKeyFile"  # the intake's, when it is another server
ZERO_OID = "0" * 40
_NOT_ATOMIC = "does not support --atomic"


# What a fetch says when its update of a local ref lost a race with another process of the
# same repository (both read the old value; the other one moved it first, or holds its lock).
_LOCAL_REF_RACE = (b"cannot lock ref", b".lock': File exists")
FETCH_TRIES = 5  # a fetch that lost such a race is run again; pauses 0.05, 0.1, 0.2, 0.4 s


def lost_ref_race(stderr: bytes) -> bool:
    """Whether a failed fetch failed only at updating a local ref another process moved."""
    return any(sign in stderr for sign in _LOCAL_REF_RACE)


def fetch_retried(run: Callable[[], GitRun]) -> GitRun:
    """Run a fetch (`run`), again after a short pause while it fails by `lost_ref_race`:
    the refs it writes are a cache many processes share (a host's mirror, an agent's
    clone), and the next attempt reads the value the other process wrote."""
    proc = run()
    for attempt in range(FETCH_TRIES - 1):
        if proc.returncode == 0 or not lost_ref_race(proc.stderr):
            break
        time.sleep(0.05 * 2**attempt)
        proc = run()
    return proc


def push_signature(
    key: bytes | None, updates: Sequence[tuple[str | None, str | None, str]]
) -> list[str]:
    """The `--push-option` that signs a push of `updates` — (expected old value or None for
    "absent", new value or None to delete, ref) — for the server's hook; none without a key."""
    if key is None:
        return []
    sent = [(old or ZERO_OID, new or ZERO_OID, ref) for old, new, ref in updates]
    return [f"--push-option={push_option(key, sent)}"]


class ServerRefused(ConfigurationError):
    """The server refused the push for a reason of its own (a hook, permissions)."""


def transport_options(url: str) -> list[str]:
    """git options for reading refs from `url`. git:// is a bare TCP socket without
    TCP_NODELAY, and protocol v2 writes each request as several small packets, each left
    waiting on a delayed ACK: a loopback fetch that brings nothing took 130-180 ms with v2
    and 60-70 ms with v0 (git 2.39). Over git:// the whole v0 advertisement costs less
    than those waits; ssh and http(s) keep v2 and its ref prefixes."""
    return ["-c", "protocol.version=0"] if url.startswith("git://") else []


def fetch_refspecs(target: str) -> list[str]:
    return [f"+refs/heads/{target}:refs/heads/{target}", *AUTHORITY_REFSPECS]


def _git(args: Sequence[str], mirror: Path, timeout: float | None = None) -> GitRun:
    try:  # PUSH_TIMEOUT read at each call (tests and operators may change it)
        return run_git(
            args, cwd=mirror, timeout=PUSH_TIMEOUT if timeout is None else timeout, check=False
        )
    except GitTimeoutError as err:
        command = next(a for a in args if not a.startswith("-") and "=" not in a)
        raise InfrastructureError(f"git {command} to the remote timed out") from err


def remote_refs(
    mirror: Path, url: str, refs: Sequence[str], *, timeout: float | None = None
) -> dict[str, str]:
    """The remote's current value of each of `refs` that exists (one `git ls-remote`)."""
    proc = _git([*transport_options(url), "ls-remote", "--refs", url, *refs], mirror, timeout)
    if proc.returncode != 0:
        raise InfrastructureError(f"cannot read the remote's refs: {last_line(proc.stderr)}")
    out: dict[str, str] = {}
    for line in proc.stdout.decode("utf-8", "replace").splitlines():
        oid, _, name = line.partition("\t")
        if name in refs:
            out[name] = oid
    return out


@dataclass(frozen=True)
class PushLine:
    """One ref of `git push --porcelain`'s report: its flag and summary."""

    flag: str
    ref: str
    summary: str

    @property
    def ok(self) -> bool:
        return self.flag in (" ", "+", "-", "*", "=")


def parse_porcelain(stdout: bytes) -> dict[str, PushLine]:
    """`flag \\t from:to \\t summary` lines by ref name (their order is not the refspecs')."""
    out: dict[str, PushLine] = {}
    for line in stdout.decode("utf-8", "replace").splitlines():
        parts = line.split("\t")
        if len(parts) < 3 or len(parts[0]) != 1:
            continue
        ref = parts[1].rpartition(":")[2]
        out[ref] = PushLine(parts[0], ref, parts[2])
    return out


class RemotePush:
    """Ref transactions on the server: one atomic push with a lease per moved ref.

    Objects travel with the push (the mirror holds them); after the server applied the
    push, the mirror's refs are moved to match, so the next read sees it without a fetch.
    """

    def __init__(
        self,
        mirror: str | Path,
        url: str,
        target: str,
        *,
        key: bytes | None = None,
        also: Callable[[Sequence[RefOp]], list[RefOp]] | None = None,
    ) -> None:
        self.mirror = Path(mirror)
        self.url = url
        self.target = target
        self.key = key
        self.also = also  # more of the mirror's own refs to move with an applied push's
        self._local = RefUpdater(self.mirror)
        # The mirror's copies of what the server now holds are a cache (a fetch restores
        # them): written out, never an empty ref, but not waited on per file. Deletions
        # may rewrite packed-refs, which holds this mirror's own refs too: those wait.
        self._cache = RefUpdater(self.mirror, writeout_only=True)
        self.transactions = 0
        # Connections to the server, by kind: what a batch costs in round trips.
        self.pushes = 0
        self.fetches = 0
        self.reads = 0  # `ls-remote` after a push that did not come back clean

    def traffic(self) -> dict[str, int]:
        """How many fetches, pushes and ref reads this has made (each one connection)."""
        return {"fetches": self.fetches, "pushes": self.pushes, "remote_reads": self.reads}

    def fetch(self) -> None:
        """Bring the mirror's target and authority refs to the remote's values."""
        args = [*transport_options(self.url), "fetch", "--quiet", "--prune", "--no-tags",
                "--no-write-fetch-head", "--no-auto-maintenance", self.url,
                *fetch_refspecs(self.target)]  # fmt: skip
        # The mirror is shared by the processes of its host (the daemon's drain and its
        # promoter thread, `review web`, the commands): a lost race on a local ref is retried.

        def attempt() -> GitRun:
            self.fetches += 1
            return _git(args, self.mirror)

        proc = fetch_retried(attempt)
        if proc.returncode != 0:
            raise InfrastructureError(f"cannot fetch from the remote: {last_line(proc.stderr)}")

    def check_atomic(self, ref: str) -> None:
        """Refuse a server that does not advertise atomic pushes (a dry run moves nothing)."""
        proc = _git(
            ["push", "--dry-run", "--atomic", "--porcelain", self.url, f"{ref}:{ref}"], self.mirror
        )
        if _NOT_ATOMIC in proc.stderr.decode("utf-8", "replace"):
            raise ConfigurationError(
                f"{self.url} does not support atomic pushes (git push --atomic); integrator "
                "needs them to land and to claim on a server (Azure DevOps, for one, lacks them)"
            )

    def apply(self, ops: Sequence[RefOp], *, on_prepared: Callable[[], None] | None = None) -> None:
        """Apply `ops` on the server, all or nothing; RefMovedError names a ref that moved.

        `verify` ops cannot be pushed (an unchanged ref is never sent): what they guard must
        be covered by a ref the transaction moves.
        """
        moves = [op for op in ops if op.verb != "verify"]
        if not moves:
            return
        args = ["push", "--atomic", "--porcelain", "--no-verify"]
        args += push_signature(
            self.key, [(op.old, None if op.verb == "delete" else op.new, op.ref) for op in moves]
        )
        args.append(self.url)
        for op in moves:
            args.append(f"--force-with-lease={op.ref}:{op.old or ''}")
        for op in moves:
            args.append(f":{op.ref}" if op.verb == "delete" else f"{op.new}:{op.ref}")
        if on_prepared is not None:
            on_prepared()
        self.pushes += 1
        proc = _git(args, self.mirror)
        report = parse_porcelain(proc.stdout)
        clean = proc.returncode == 0 and all(op.ref in report and report[op.ref].ok for op in moves)
        if not clean:
            self._settle(moves, proc)
        faults.point("after-push")
        self._mirror(moves)
        self.transactions += 1

    def _settle(self, moves: Sequence[RefOp], proc: GitRun) -> None:
        """A push that did not come back clean: decide from what the server holds now."""
        self.reads += 1
        now = remote_refs(self.mirror, self.url, [op.ref for op in moves])
        if all(now.get(op.ref) == (None if op.verb == "delete" else op.new) for op in moves):
            return  # it was applied (the report was lost or wrong)
        with contextlib.suppress(InfrastructureError):
            self.fetch()  # whoever reads next sees the server's refs
        for op in moves:
            actual = now.get(op.ref)
            if actual != op.old:
                raise RefMovedError(op.ref, actual, op.old)
        message = proc.stderr.decode("utf-8", "replace").strip()
        if "hook declined" in proc.stdout.decode("utf-8", "replace") or "declined" in message:
            raise ServerRefused(f"the server refused the push: {server_said(proc.stderr)}")
        raise InfrastructureError(f"the push to the remote failed: {server_said(proc.stderr)}")

    def _mirror(self, moves: Sequence[RefOp]) -> None:
        """Move the mirror's refs to what the server now holds (a cache: no leases)."""
        ops = [
            RefOp("drop", op.ref) if op.verb == "delete" else RefOp("set", op.ref, op.new)
            for op in moves
        ]
        if self.also is not None:
            ops += self.also(moves)
        updater = self._local if any(op.verb == "drop" for op in ops) else self._cache
        try:
            updater.apply(ops)
        except (RefMovedError, InfrastructureError):
            self.fetch()

    def close(self) -> None:
        self._local.close()
        self._cache.close()
