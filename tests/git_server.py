"""A real `git daemon` on 127.0.0.1 that accepts pushes: the remote for remote-mode tests.

It serves bare repositories under one folder (`git://127.0.0.1:<port>/<name>.git`), has no
authentication (as `git daemon` never does), and is stopped by its PID.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.gitutil import GIT_ENV, git, make_repo


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class GitDaemon:
    """One `git daemon --enable=receive-pack`, serving `root`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    def url(self, name: str) -> str:
        return f"git://127.0.0.1:{self.port}/{name}.git"

    def bare(self, name: str) -> Path:
        """A new bare repository served as `name`."""
        return make_repo(self.root / f"{name}.git", bare=True)

    def start(self, port: int | None = None) -> None:
        """Listen on a free port, or on `port` (a server coming back after an outage)."""
        exec_path = Path(git("--exec-path", cwd=self.root))
        for attempt in range(5):
            self.port = port or _free_port()
            self.log = self.root / f"git-daemon-{attempt}.log"
            with self.log.open("wb") as log:
                proc = subprocess.Popen(
                    [str(exec_path / "git-daemon"), "--reuseaddr", "--informative-errors",
                     "--verbose", "--enable=receive-pack", "--export-all",
                     f"--base-path={self.root}", "--listen=127.0.0.1", f"--port={self.port}"],
                    stdout=subprocess.DEVNULL, stderr=log,
                    env={**os.environ, **GIT_ENV},
                )  # fmt: skip
            if self._ready(proc):
                self.proc = proc
                return
            proc.kill()
            proc.wait()
        raise RuntimeError("git daemon did not start on 127.0.0.1")

    def _ready(self, proc: subprocess.Popen[bytes], timeout: float = 10.0) -> bool:
        """Wait for the daemon's "Ready to rumble" (logged once it listens)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and proc.poll() is None:
            if b"Ready to rumble" in self.log.read_bytes():
                return True
            time.sleep(0.02)
        return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None


@contextmanager
def git_daemon(root: Path) -> Iterator[GitDaemon]:
    root.mkdir(parents=True, exist_ok=True)
    daemon = GitDaemon(root)
    daemon.start()
    try:
        yield daemon
    finally:
        daemon.stop()
