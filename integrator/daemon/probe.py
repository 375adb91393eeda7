"""Is it the host? Asked of the host, the git server and the intake — never read from an
error's text, and never counted against the submission that happened to be in hand.

A failure while integrating is the submission's only when every part the daemon depends
on answers now: the local object store can be written, the canonical git server answers a
`git ls-remote` and takes a write (remote mode: a leased push to
`refs/integrator/probe/<host>`), and the intake answers too. Anything else is the host's
trouble: the submission keeps its place, the daemon backs off and retries, and the failure
is counted by kind (disk, git-server, intake, other) in
`integrator_infrastructure_errors_total{kind=…}`.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeGuard

from integrator import refnames
from integrator.errors import (
    CheckoutDirtyError,
    ConfigurationError,
    InfrastructureError,
    IntegratorError,
    QueuePausedError,
    RefLockedError,
)
from integrator.plumbing import git
from integrator.plumbing.remote import KEY_FILE_CONFIG, ServerRefused, push_signature, remote_refs
from integrator.records.canonical import Canonical

PROBE_EVERY = 5.0  # seconds a remote probe's answer is reused by /readyz
PROBE_TIMEOUT = 10.0  # seconds a server has to answer a probe


@dataclass(frozen=True)
class Trouble:
    """Why the host cannot work now: which part (disk, git-server, intake, other) and what
    it said."""

    kind: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


def server_trouble(mirror: Path, url: str, what: str, ref: str) -> Trouble | None:
    """Whether the server at `url` answers a `git ls-remote` of `ref` now (within
    `PROBE_TIMEOUT`: a server that hangs is in trouble too)."""
    try:
        remote_refs(mirror, url, [ref], timeout=PROBE_TIMEOUT)
    except IntegratorError as err:
        return Trouble(what, f"{url} does not answer: {err}")
    except OSError as err:  # this host could not even start git (process or file limits)
        return Trouble("other", f"cannot start git to ask {url}: {err}")
    return None


@dataclass(frozen=True)
class HostProbe:
    """What to ask, captured once from the canonical repository as plain paths and names, so
    that /readyz may ask from its own thread without touching the daemon's repository."""

    git_dir: Path
    target: str
    remote_url: str | None = None
    intake_url: str | None = None
    key: bytes | None = None  # signs the write probe, where the server's hook checks that
    host: str = "host"

    @classmethod
    def of(cls, canonical: Canonical, intake_url: str | None = None) -> HostProbe:
        key = canonical.push_key(KEY_FILE_CONFIG) if canonical.remote_url else None
        # One plain ref component whatever the host is called (no dots: `a..b` or `x.lock`
        # would make a ref git refuses, and a probe that can never be pushed would blame
        # every failure on the server).
        host = re.sub(r"[^A-Za-z0-9_-]", "-", socket.gethostname()).strip("-")[:64]
        git_dir = git.common_dir(canonical.repo)
        # Several hosts on one machine (containers sharing a hostname, a test bench) each
        # probe their own ref: the mirror's folder tells them apart.
        mirror = hashlib.sha256(os.fsencode(Path(git_dir).resolve())).hexdigest()[:8]
        return cls(
            git_dir, canonical.target, canonical.remote_url, intake_url, key,
            f"{host or 'host'}-{mirror}",
        )  # fmt: skip

    def write_trouble(self) -> Trouble | None:
        """Whether the git server takes a write now: one leased push of a fresh empty commit
        to `refs/integrator/probe/<host>` (asked only after a failure: a server that
        answers reads but refuses writes is the host's trouble, a candidate it refuses is
        the candidate's)."""
        if self.remote_url is None:
            return None
        ref = f"{refnames.PROBE}{self.host}"
        try:
            old = remote_refs(self.git_dir, self.remote_url, [ref], timeout=PROBE_TIMEOUT).get(ref)
            tree = git.run_git(["mktree"], git_dir=self.git_dir).stdout.decode().strip()
            stamp = f"write probe at {time.time():.3f}"
            commit = git.run_git(["commit-tree", tree, "-m", stamp], git_dir=self.git_dir)
            new = commit.stdout.decode().strip()
            sign = push_signature(self.key, [(old, new, ref)])
            pushed = git.run_git(
                ["push", "--porcelain", "--no-verify", *sign, self.remote_url,
                 f"--force-with-lease={ref}:{old or ''}", f"+{new}:{ref}"],
                git_dir=self.git_dir, timeout=PROBE_TIMEOUT, check=False,
            )  # fmt: skip
        except IntegratorError as err:
            return Trouble("git-server", f"{self.remote_url} cannot be written to: {err}")
        except OSError as err:
            return Trouble("other", f"cannot start git to write to {self.remote_url}: {err}")
        if pushed.returncode != 0:
            why = git.server_said(pushed.stderr)
            return Trouble("git-server", f"{self.remote_url} refuses writes: {why}")
        return None

    def __call__(self) -> Trouble | None:
        """The first part of this host that cannot work now, or None when all of them can."""
        disk = git.store_trouble(self.git_dir / "objects")
        if disk is not None:
            return Trouble("disk", disk)
        ref = f"refs/heads/{self.target}"
        if self.remote_url is not None:
            found = server_trouble(self.git_dir, self.remote_url, "git-server", ref)
            if found is not None:
                return found
        if self.intake_url is not None and self.intake_url != self.remote_url:
            return server_trouble(self.git_dir, self.intake_url, "intake", ref)
        return None

    def error(self, cause: BaseException) -> InfrastructureError | None:
        """The host's trouble behind `cause`, as the error to retry with, or None when the
        host is well (and `cause` is then the submission's): read, then write."""
        found = self() or self.write_trouble()
        if found is None:
            return None
        return InfrastructureError(f"{found} ({type(cause).__name__}: {cause})", kind=found.kind)


def operators(err: BaseException) -> TypeGuard[IntegratorError]:
    """What the operator or the host must fix (a ref lock, a pause, the configuration, a
    checkout of the target that has changes), retried as it is — but not a server's refusal
    of one push (`ServerRefused`), which `HostProbe.error` pins on the host or on the
    candidate."""
    if isinstance(err, ServerRefused):
        return False
    return isinstance(
        err, (RefLockedError, QueuePausedError, ConfigurationError, CheckoutDirtyError)
    )


class CachedProbe:
    """A probe asked at most once every `every` seconds (a scrape of /readyz must not put
    a round trip to the server on every request); thread-safe."""

    def __init__(
        self,
        probe: Callable[[], Trouble | None],
        every: float = PROBE_EVERY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._probe = probe
        self._every = every
        self._clock = clock
        self._lock = threading.Lock()
        self._at: float | None = None
        self._answer: Trouble | None = None

    def __call__(self) -> Trouble | None:
        """The last answer; asks again when it is older than `every` — unless another
        request is asking right now (that one's answer is not waited for: /readyz answers
        at once with the answer it has)."""
        now = self._clock()
        if self._at is not None and now - self._at < self._every:
            return self._answer
        if not self._lock.acquire(blocking=self._at is None):
            return self._answer
        try:
            self._answer = self._probe()
            self._at = self._clock()
        finally:
            self._lock.release()
        return self._answer


class Backoff:
    """The wait before the next try after a failure: doubling from half a second up to
    `most`, with jitter (hosts that failed together do not retry together)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._ceiling = 0.0

    def grow(self, most: float) -> bool:
        """One more failure; True when the wait grew (worth a log line), False when it was
        already at `most` (the same trouble, said once)."""
        before = self._ceiling
        self._ceiling = min(max(before * 2, 0.5), most)
        self.seconds = self._ceiling * random.uniform(0.8, 1.0)
        return self._ceiling > before

    def reset(self) -> None:
        self.seconds = self._ceiling = 0.0
