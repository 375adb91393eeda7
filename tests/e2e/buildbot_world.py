"""A real Buildbot on 127.0.0.1 for the end-to-end checks: a master from
contrib/buildbot/master.cfg (SQLite, its default database) and workers, from the pinned
virtual environment tests/e2e/install-buildbot.sh makes in .e2e/buildbot. Each runs in the
foreground as a child of the test and is stopped by its PID."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".e2e" / "buildbot"
MASTER_CFG = ROOT / "contrib" / "buildbot" / "master.cfg"
BRIDGE = ROOT / "contrib" / "buildbot" / "integrator_buildbot.py"


def missing() -> str | None:
    """Why Buildbot cannot run here (None: it can)."""
    recorded = ROOT / ".e2e" / "buildbot.missing"
    if recorded.exists():
        return recorded.read_text().strip()
    for tool in ("buildbot", "buildbot-worker"):
        if not os.access(VENV / "bin" / tool, os.X_OK):
            return f"{VENV / 'bin' / tool} is missing: run tests/e2e/install.sh (make e2e does)"
    return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Buildbot:
    root: Path
    www_port: int
    worker_port: int
    settings: dict[str, str]
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.www_port}"

    def get(self, path: str) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.url}/api/v2/{path}", timeout=10) as answer:
            document: dict[str, Any] = json.loads(answer.read())
        return document

    def control(self, path: str, method: str, **params: Any) -> dict[str, Any]:
        """A JSON-RPC control call (POST) on a REST path: its answer."""
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        request = urllib.request.Request(
            f"{self.url}/api/v2/{path}", data=body.encode(),
            headers={"Content-Type": "application/json"},
        )  # fmt: skip
        with urllib.request.urlopen(request, timeout=10) as answer:
            document: dict[str, Any] = json.loads(answer.read())
        return document

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = (self.root / f"{name}.out").open("wb")
        self.procs[name] = subprocess.Popen(
            argv, cwd=self.root, stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, **self.settings},
        )  # fmt: skip

    def connected(self) -> list[str]:
        try:
            workers = self.get("workers")["workers"]
        except OSError:
            return []
        return sorted(w["name"] for w in workers if w["connected_to"])

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
            for p in sorted(self.root.glob("*.out")) + sorted(self.root.glob("*/twistd.log"))
        )

    def stop(self) -> None:
        """Workers first, then the master; each by its PID (SIGTERM, then SIGKILL)."""
        for name in sorted(self.procs, key=lambda n: n == "master"):
            proc = self.procs[name]
            if proc.poll() is None:
                os.kill(proc.pid, 15)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.kill(proc.pid, 9)
                    proc.wait(timeout=10)


def run(
    root: Path, repository: Path | str, suite: str, workers: int,
    env: Mapping[str, str] | None = None,
) -> Iterator[Buildbot]:  # fmt: skip
    """A master validating heads of `repository` with `suite`, and `workers` workers; `env`
    goes to every Buildbot process (the workers' git reads it: GIT_SSH_COMMAND)."""
    names = [f"w{i}" for i in range(1, workers + 1)]
    bot = Buildbot(root, free_port(), free_port(), {})
    bot.settings = {
        "INTEGRATOR_BUILDBOT_REPOSITORY": str(repository),
        "INTEGRATOR_BUILDBOT_SUITE": suite,
        "INTEGRATOR_BUILDBOT_SUITE_TIMEOUT": "600",
        "INTEGRATOR_BUILDBOT_WORKERS": ",".join(f"{n}:{n}-secret" for n in names),
        "INTEGRATOR_BUILDBOT_WWW_PORT": str(bot.www_port),
        "INTEGRATOR_BUILDBOT_WORKER_PORT": str(bot.worker_port),
        **(env or {}),
    }
    bb, worker = str(VENV / "bin" / "buildbot"), str(VENV / "bin" / "buildbot-worker")
    subprocess.run([bb, "create-master", "-q", "master"], cwd=root, check=True,
                   capture_output=True)  # fmt: skip
    shutil.copy(MASTER_CFG, root / "master" / "master.cfg")
    checked = subprocess.run([bb, "checkconfig", "master"], cwd=root, capture_output=True,
                             text=True, env={**os.environ, **bot.settings}, check=False)  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    try:
        bot._spawn("master", [bb, "start", "--nodaemon", "master"])
        for name in names:
            subprocess.run(
                [worker, "create-worker", "-q", name, f"127.0.0.1:{bot.worker_port}", name,
                 f"{name}-secret"], cwd=root, check=True, capture_output=True,
            )  # fmt: skip
            bot._spawn(name, [worker, "start", "--nodaemon", name])
        deadline = time.monotonic() + 120
        while bot.connected() != names:
            dead = [n for n, p in bot.procs.items() if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise AssertionError(f"Buildbot did not come up ({dead} exited)\n{bot.logs()}")
            time.sleep(0.3)
        yield bot
    finally:
        bot.stop()


def bridge(
    bot: Buildbot, repo: Path, python: str, log: Path, env: Mapping[str, str]
) -> subprocess.Popen[bytes]:
    """contrib/buildbot/integrator_buildbot.py against `bot`, as a process of its own."""
    return subprocess.Popen(
        [python, str(BRIDGE), "--repo", str(repo), "--buildbot", bot.url, "--poll", "0.5",
         "--integrator", f"{python} -m integrator"],
        stdout=log.open("wb"), stderr=subprocess.STDOUT, env={**os.environ, **env},
    )  # fmt: skip
