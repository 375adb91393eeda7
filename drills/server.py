"""A git server for the drills: a real `git daemon` on 127.0.0.1 that accepts pushes.

It serves the bare repositories under one folder as `git://127.0.0.1:<port>/<name>.git`,
with no authentication (as `git daemon` never has), and every ref update logged in each
repository's reflog so a drill can read every value a ref ever took. An outage is the
daemon stopped by its PID and started again on the same port.

The tests have their own (`tests/git_server.py`); the drills do not import the tests.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from pathlib import Path

from drills.procs import DrillError
from drills.repo import environment, git


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class GitServer:
    """One `git daemon --enable=receive-pack` serving `root`."""

    def __init__(self, root: Path, owned: list[subprocess.Popen[bytes]]) -> None:
        self.root = root
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.owned = owned  # every daemon started goes here: the drill ends them (by PID)
        root.mkdir(parents=True, exist_ok=True)

    def url(self, name: str) -> str:
        return f"git://127.0.0.1:{self.port}/{name}.git"

    def bare(self, name: str) -> Path:
        """A new bare repository served as `name`, logging every ref update."""
        path = self.root / f"{name}.git"
        git("init", "-q", "--bare", "-b", "main", str(path), cwd=self.root)
        git("config", "core.logAllRefUpdates", "always", cwd=path)
        return path

    def start(self, port: int | None = None) -> None:
        """Listen on a free port, or on `port` again (the server back after an outage)."""
        exec_path = Path(git("--exec-path", cwd=self.root))
        for attempt in range(5 if port is None else 50):
            self.port = port or free_port()
            self.starts += 1
            log = self.root / f"git-daemon-{self.starts}.log"
            with log.open("wb") as sink:
                proc = subprocess.Popen(
                    [str(exec_path / "git-daemon"), "--reuseaddr", "--informative-errors",
                     "--verbose", "--enable=receive-pack", "--export-all",
                     f"--base-path={self.root}", "--listen=127.0.0.1", f"--port={self.port}"],
                    stdout=subprocess.DEVNULL, stderr=sink, env=environment(),
                )  # fmt: skip
            self.owned.append(proc)
            if self._ready(proc, log):
                self.proc = proc
                return
            proc.kill()
            proc.wait()
            if port is not None:  # the old port may still be in TIME_WAIT: try again
                time.sleep(0.1 * (attempt + 1))
        raise DrillError(f"git daemon did not start on 127.0.0.1:{port or 'any'}", [self.root])

    @staticmethod
    def _ready(proc: subprocess.Popen[bytes], log: Path, timeout: float = 10.0) -> bool:
        """Until the daemon logs "Ready to rumble" (it listens)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and proc.poll() is None:
            if b"Ready to rumble" in log.read_bytes():
                return True
            time.sleep(0.02)
        return False

    def stop(self) -> None:
        """Stop the daemon by its PID (SIGTERM, then SIGKILL); connections in flight drop."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def refs(self, name: str, prefix: str = "refs/") -> dict[str, str]:
        """Ref → object of the served repository `name`, read on disk (not over the wire)."""
        out = git(
            "for-each-ref", "--format=%(refname) %(objectname)", prefix,
            cwd=self.root / f"{name}.git",
        )  # fmt: skip
        return dict(line.split(" ", 1) for line in out.splitlines() if line)
