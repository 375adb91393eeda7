"""A daemon world for tests: a canonical repository, a spool, real `integrator serve` runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pygit2
import pytest

from integrator.documents.attempt_key import AttemptKey
from integrator.documents.submission import Submission, SubmissionSignature
from integrator.documents.verdict import Verdict
from integrator.errors import ConfigurationError
from integrator.records.canonical import Canonical
from integrator.records.claims import Claims, IssueRequest
from integrator.store.keys import KeyStore, store_of, write_key
from integrator.store.spool import VERDICT_FILE, Spool
from tests.canon import make_canon
from tests.gitutil import GIT_ENV, git

PYTHON = sys.executable


def wait_until(predicate: Callable[[], Any], timeout: float = 15.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@dataclass
class Served:
    """A daemon process and its JSON-lines log."""

    proc: subprocess.Popen[bytes]
    log: Path

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        out = []
        for line in self.log.read_text(errors="replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and (name is None or event.get("event") == name):
                out.append(event)
        return out

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_event(self, name: str, count: int = 1, timeout: float = 15.0) -> list[dict[str, Any]]:
        def seen() -> list[dict[str, Any]] | None:
            if self.proc.poll() is not None and len(self.events(name)) < count:
                raise AssertionError(
                    f"daemon exited {self.proc.returncode}: {self.log.read_text()}"
                )
            found = self.events(name)
            return found if len(found) >= count else None

        result: list[dict[str, Any]] = wait_until(seen, timeout, f"{count} {name} events")
        return result

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def wait(self, timeout: float = 15.0) -> int:
        return self.proc.wait(timeout=timeout)


def spawn_integrator(
    tmp: Path,
    procs: list[subprocess.Popen[bytes]],
    *args: str,
    env: Mapping[str, str] | None = None,
    name: str = "serve",
) -> Served:
    """Start a long-running `python -m integrator ARGS` (serve, promote, ...): its output
    goes to tmp/NAME-N.log, and the process joins `procs`, which the fixture kills after the
    test. The environment is this one with the pinned git settings and `env` on top."""
    log = tmp / f"{name}-{len(procs)}.log"
    proc = subprocess.Popen(
        [PYTHON, "-m", "integrator", *args],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        env={**os.environ, **GIT_ENV, **(env or {})},
    )
    procs.append(proc)
    return Served(proc, log)


@dataclass
class World:
    """A canonical repository, a spool, and helpers to make candidates and run the daemon."""

    tmp: Path
    repo: Path
    spool: Spool
    candidates: dict[str, str] = field(default_factory=dict)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def canonical(self) -> Canonical:
        return Canonical(self.repo)  # the real clock, like the daemon's

    def candidate(self, task: str, files: dict[str, str] | None = None) -> tuple[bytes, str]:
        """Issue a claim for `work/<task>/**` and commit a candidate on its base."""
        with self.canonical() as canonical:
            contract = Claims(canonical).issue(
                IssueRequest(task_id=task, paths=(f"work/{task}/**",), lease=timedelta(hours=2))
            )
            repo = canonical.repo
            base = canonical.commit(contract.base_commit)
            index = pygit2.Index()
            index.read_tree(base.tree)
            for path, text in (files or {f"work/{task}/f.txt": f"{task}\n"}).items():
                blob = repo.create_blob(text.encode())
                index.add(pygit2.IndexEntry(path, blob, pygit2.enums.FileMode.BLOB))
            tree = index.write_tree(repo)
            sig = pygit2.Signature("agent", "agent@example.invalid", 1767225600, 0)
            oid = str(repo.create_commit(None, sig, sig, f"work on {task}", tree, [base.id]))
        self.candidates[task] = oid
        return contract.to_json().encode(), oid

    def submit(self, task: str, files: dict[str, str] | None = None) -> str:
        data, oid = self.candidate(task, files)
        contract = json.loads(data)
        return self.spool.submit(submission(contract, oid), key=key_for(self.repo, contract))

    def serve(self, *args: str, env: dict[str, str] | None = None, name: str = "serve") -> Served:
        return spawn_integrator(
            self.tmp, self.procs, "serve", "--repo", str(self.repo), "--spool",
            str(self.spool.root), "--poll", "0.2", "--log-format", "json", *args,
            env=env, name=name,
        )  # fmt: skip

    def once(self, *args: str, env: dict[str, str] | None = None) -> Served:
        served = self.serve("--once", *args, env=env, name="once")
        served.wait(60)
        return served

    def landed(self) -> list[str]:
        """Candidate ids in the order the queue took them (oldest first)."""
        out = git(
            "log", "--first-parent", "--reverse", "--format=%(trailers:key=Integrator-Candidate,valueonly)",
            "refs/integrator/queue/main", cwd=self.repo,
        )  # fmt: skip
        return [line.strip() for line in out.splitlines() if line.strip()]

    def verdict(self, folder: str, sid: str) -> Verdict:
        return Verdict.model_validate_json(
            (self.spool.folder(folder) / sid / VERDICT_FILE).read_bytes()
        )

    def config(self, text: str) -> Path:
        path = self.tmp / "integrator.toml"
        path.write_text(text)
        return path


def key_for(repo: Path, contract: Mapping[str, Any]) -> AttemptKey | None:
    """The attempt key the canonical repository at `repo` issued `contract` with (what an
    agent signs its submission with); None when it holds none for it."""
    task, attempt = contract.get("taskId"), contract.get("attemptId")
    generation = contract.get("ownershipGeneration")
    if not isinstance(task, str) or not isinstance(attempt, str) or type(generation) is not int:
        return None
    store = KeyStore(store_of(Path(pygit2.Repository(str(repo)).path)))
    try:
        return store.load(task, attempt, generation)
    except ConfigurationError:
        return None


def signed(repo: Path, document: Submission, sid: str) -> Submission:
    """`document` signed for submission id `sid` with the key `repo` issued its contract
    with (unchanged when it holds none)."""
    key = key_for(repo, document.contract)
    if key is None:
        return document
    signature = SubmissionSignature.model_validate(key.signature(sid, document.candidate))
    return document.model_copy(update={"signature": signature})


def hand_over(repo: Path, data: bytes, path: Path) -> Path:
    """Write the contract `data` to `path` and its attempt key beside it (`path`.key, where
    `contract issue -o` puts it and `integrator submit` looks): what a coordinator hands an
    agent."""
    path.write_bytes(data)
    key = key_for(repo, json.loads(data))
    if key is not None:
        write_key(Path(f"{path}.key"), key)
    return path


def submission(contract: dict[str, Any], candidate: str) -> Submission:
    return Submission.model_validate(
        {
            "schema": "integrator.submission.v1",
            "contract": contract,
            "candidate": candidate,
            "submitter": {"user": "agent", "host": "test"},
            "submittedAt": datetime.now(UTC),
        }
    )


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    canon = make_canon(tmp_path)
    w = World(tmp_path, canon.path, Spool(tmp_path / "spool").ensure())
    yield w
    for proc in w.procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
