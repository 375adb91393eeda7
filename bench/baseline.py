"""What a user would script with plain git, and the floor under every landing: the ref move.

The plain pipeline lands each candidate with four git processes, as a shell script would:
`git diff-tree -r -M` (to see what the candidate changed), `git merge-tree --write-tree`
onto the branch head, `git commit-tree`, and `git update-ref` with the old value. It runs
on an identical copy of the repository, in the same order as the integrator run, and keeps
each landed tree for the correctness check.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pygit2

from integrator.plumbing import git, transaction

BRANCH = "refs/heads/main"
# The script's commits get a fixed identity and date, so runs are reproducible and do not
# depend on the machine's git configuration.
IDENTITY = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@localhost",
    "GIT_AUTHOR_DATE": "1700000000 +0000",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@localhost",
    "GIT_COMMITTER_DATE": "1700000000 +0000",
}


def _git(repo: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", *args],
        cwd=repo,
        capture_output=True,
        env={**git.git_env(), **IDENTITY},
        check=False,
    )
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and args[0] != "merge-tree"):
        raise RuntimeError(f"git {args[0]} failed: {proc.stderr.decode(errors='replace')}")
    return proc.stdout.decode()


@dataclass
class PipelineRun:
    """Per-candidate wall time of the four-process pipeline, and what it landed."""

    latencies_ms: list[float] = field(default_factory=list)
    landed: list[tuple[str, str, str]] = field(default_factory=list)  # (parent, candidate, tree)
    conflicts: int = 0
    total_s: float = 0.0

    @property
    def per_second(self) -> float:
        return len(self.latencies_ms) / self.total_s if self.total_s > 0 else 0.0


def plain_pipeline(repo: Path, base: str, candidates: tuple[str, ...]) -> PipelineRun:
    """Land `candidates` in order on `main`, one git process per step."""
    run = PipelineRun()
    head = _git(repo, "rev-parse", BRANCH).strip()
    started = time.perf_counter()
    for i, candidate in enumerate(candidates):
        t0 = time.perf_counter()
        _git(repo, "diff-tree", "-r", "-M", base, candidate)
        out = _git(repo, "merge-tree", "--write-tree", head, candidate).split("\n", 1)
        tree = out[0].strip()
        if len(out) > 1 and out[1].strip():
            run.conflicts += 1  # a conflicted merge: a script would stop here
            run.latencies_ms.append((time.perf_counter() - t0) * 1000)
            continue
        commit = _git(repo, "commit-tree", tree, "-p", head, "-m", f"land candidate {i}\n").strip()
        _git(repo, "update-ref", BRANCH, commit, head)
        run.latencies_ms.append((time.perf_counter() - t0) * 1000)
        run.landed.append((head, candidate, tree))
        head = commit
    run.total_s = time.perf_counter() - started
    return run


@dataclass(frozen=True)
class FloorRun:
    """Milliseconds per unit: a two-ref transaction through one long-lived
    `update-ref --stdin`, or one loose object write."""

    settings: str
    per_transaction_ms: float
    transactions: int


def ref_floor(
    repo: Path, a: str, b: str, transactions: int, *, durable: bool, syncfs: bool = False
) -> FloorRun:
    """Move two refs per transaction between commits `a` and `b`, `transactions` times.

    With `durable` the repository gets integrator's DURABLE_CONFIG first (fsync of refs);
    `syncfs` adds the one syncfs() integrator makes before each landing's transaction.
    """
    opened = pygit2.Repository(str(repo))
    for key in git.DURABLE_CONFIG:
        if key in opened.config:
            del opened.config[key]
    if durable:
        git.set_config(opened, git.DURABLE_CONFIG)
    refs = ("refs/bench/floor/queue", "refs/bench/floor/claim")
    with transaction.RefUpdater(repo) as updater:
        updater.apply([transaction.update(r, a, git.ref_target(opened, r)) for r in refs])
        current, other = a, b
        started = time.perf_counter()
        for _ in range(transactions):
            if syncfs:
                git.sync_objects(opened)
            updater.apply([transaction.update(r, other, current) for r in refs])
            current, other = other, current
        elapsed = time.perf_counter() - started
    label = ("durable" if durable else "git defaults") + (" + syncfs" if syncfs else "")
    return FloorRun(label, elapsed * 1000 / transactions, transactions)


def object_floor(repo: Path, count: int) -> FloorRun:
    """Milliseconds per small loose object written with pygit2 (`create_blob`).

    libgit2 writes each object as its own file (temporary file, zlib, rename), which is
    what a landing's rebuilt trees, staging commit and consumed-claim commit cost.
    """
    opened = pygit2.Repository(str(repo))
    started = time.perf_counter()
    for i in range(count):
        opened.create_blob(f"bench object floor {i} {started}\n".encode() * 4)
    elapsed = time.perf_counter() - started
    return FloorRun("one loose object (pygit2)", elapsed * 1000 / count, count)


def held_ref_floor(repo: Path, commit: str, count: int, per_transaction: int) -> FloorRun:
    """Milliseconds per new ref, created `per_transaction` at a time the way the daemon holds
    a batch of fenced candidates: git writes each ref out (core.fsyncMethod=writeout-only)
    and one syncfs makes the batch durable."""
    opened = pygit2.Repository(str(repo))
    git.set_config(opened, git.DURABLE_CONFIG)
    started = time.perf_counter()
    with transaction.RefUpdater(repo, writeout_only=True) as updater:
        for first in range(0, count, per_transaction):
            last = min(first + per_transaction, count)
            ops = [
                transaction.update(f"refs/bench/held/{i}", commit, None) for i in range(first, last)
            ]
            updater.apply(ops)
            git.sync_refs(opened)
    elapsed = time.perf_counter() - started
    return FloorRun(
        f"one held ref, {per_transaction} per transaction", elapsed * 1000 / count, count
    )


def spool_floor(folder: Path, count: int) -> FloorRun:
    """Milliseconds for the spool's own file-system work on one submission, without any
    deciding: a folder made in work/, the submission renamed into it, a verdict file
    written beside it, the folder renamed into a decided folder."""
    for name in ("new", "work", "fenced"):
        (folder / name).mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (folder / "new" / f"s{i}").mkdir()
    started = time.perf_counter()
    for i in range(count):
        holder = folder / "work" / f"s{i}"
        os.mkdir(holder)
        os.rename(folder / "new" / f"s{i}", holder / "submitted")
        with open(holder / "verdict.json", "wb") as out:
            out.write(b'{"decision": "FENCED"}\n')
        os.rename(holder, folder / "fenced" / f"s{i}")
    elapsed = time.perf_counter() - started
    return FloorRun("spool moves of one submission", elapsed * 1000 / count, count)
