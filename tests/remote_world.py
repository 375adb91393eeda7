"""A remote world for tests: a canonical repository and an intake served by a real
`git daemon` on 127.0.0.1, integrators with their own mirrors, agents in their own clones."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from integrator.documents.trailers import TRAILER_CANDIDATE
from tests.daemon_world import spawn_integrator
from tests.git_server import GitDaemon, git_daemon
from tests.gitutil import commit_files, git, make_repo
from tests.gitutil import run_integrator_raw as cli

PYTHON = sys.executable


@dataclass
class RemoteWorld:
    tmp: Path
    server: GitDaemon
    files: dict[str, str]
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.canon = self.server.bare("canon")
        self.server.bare("intake")
        seed = make_repo(self.tmp / "seed")
        commit_files(seed, self.files, "base")
        git("push", "-q", str(self.canon), "HEAD:refs/heads/main", cwd=seed)

    @property
    def url(self) -> str:
        return self.server.url("canon")

    @property
    def intake(self) -> str:
        return self.server.url("intake")

    def mirror(self, name: str) -> Path:
        """An integrator host's mirror, prepared with `init --remote` (idempotent)."""
        path = self.tmp / f"{name}.git"
        done = cli("init", "--repo", str(path), "--remote", self.url)
        assert done.returncode == 0, done.stderr.decode()
        return path

    def issue(self, mirror: Path, task: str, paths: list[str], out: Path) -> dict[str, Any]:
        args = ["contract", "issue", "--repo", str(mirror), "--task", task, "--lease", "2h"]
        for p in paths:
            args += ["--path", p]
        done = cli(*args, "-o", str(out))
        assert done.returncode == 0, done.stderr.decode()
        doc: dict[str, Any] = json.loads(out.read_text())
        return doc

    def agent(self, name: str) -> Path:
        path = self.tmp / "agents" / name
        git("clone", "-q", self.url, str(path), cwd=self.tmp)
        return path

    def serve(self, mirror: Path, spool: Path, *args: str, env: Mapping[str, str] | None = None,
              name: str = "serve") -> subprocess.Popen[bytes]:  # fmt: skip
        return spawn_integrator(
            self.tmp, self.procs, "serve", "--repo", str(mirror), "--spool", str(spool),
            "--intake", self.intake, "--poll", "0.2", "--log-format", "json", *args,
            env=env, name=name,
        ).proc  # fmt: skip

    def refs(self, repo: Path, prefix: str) -> dict[str, str]:
        out = git("for-each-ref", "--format=%(refname) %(objectname)", prefix, cwd=repo)
        return dict(reversed(line.split(" ", 1)) for line in out.splitlines() if line)  # type: ignore[misc]

    def landed(self) -> list[str]:
        """Candidates on the server's queue, oldest first (one per staging commit)."""
        out = git(
            "log", "--first-parent", "--reverse",
            f"--format=%(trailers:key={TRAILER_CANDIDATE},valueonly)",
            "refs/integrator/queue/main", cwd=self.canon,
        )  # fmt: skip
        return [line.strip() for line in out.splitlines() if line.strip()]

    def verdict(self, ref: str) -> dict[str, Any]:
        for name in ("verdict.json", "rejection.json"):
            try:
                doc: dict[str, Any] = json.loads(
                    git("show", f"{ref}:{name}", cwd=self.server.root / "intake.git")
                )
                return doc
            except AssertionError:
                continue
        raise AssertionError(f"{ref} holds no verdict")

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[RemoteWorld]:
    with git_daemon(tmp_path / "srv") as server:
        world = RemoteWorld(
            tmp_path, server, {f"t{i}/f.txt": "0\n" for i in range(30)} | {"shared/x": "x\n"}
        )
        try:
            yield world
        finally:
            world.stop()
