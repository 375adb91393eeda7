"""Promotion in remote mode, against a real `git daemon` on 127.0.0.1: two `integrator
promote` processes with their own mirrors race over one canonical repository; the server's
reflog of the target shows it never promoted twice, never backwards, and only to trees the
validation script passed, and the culprit is ejected exactly once."""

from __future__ import annotations

import itertools
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.git_server import git_daemon
from tests.gitutil import GIT_ENV, git
from tests.gitutil import run_integrator_raw as cli
from tests.promotion_world import CHECK_SCRIPT, MARKER
from tests.remote_world import PYTHON, RemoteWorld

TASKS = 8
CULPRIT = 5


@pytest.fixture
def world(tmp_path: Path) -> Iterator[RemoteWorld]:
    files = {f"t{i}/f.txt": "0\n" for i in range(TASKS)} | {"ci/check.sh": CHECK_SCRIPT}
    with git_daemon(tmp_path / "srv") as server:
        made = RemoteWorld(tmp_path, server, files)
        try:
            yield made
        finally:
            made.stop()


def _submit(world: RemoteWorld, coordinator: Path, i: int, tmp: Path) -> None:
    contract = tmp / f"c{i}.json"
    world.issue(coordinator, f"t{i}", [f"t{i}/**"], contract)
    agent = world.agent(f"a{i}")
    (agent / f"t{i}/f.txt").write_text(f"agent {i}\n")
    if i == CULPRIT:
        (agent / f"t{i}/{MARKER}").write_text("breaks the build\n")
    git("add", "-A", cwd=agent)
    git("commit", "-qm", f"agent {i}", cwd=agent)
    done = cli("submit", "--intake", world.intake, "--contract", str(contract),
               "--candidate", "HEAD", "--repo", str(agent))  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()


def test_two_promoters_on_one_remote_never_promote_twice_or_backwards(
    world: RemoteWorld, tmp_path: Path
) -> None:
    """Eight landings (one breaks the script) through the intake; two promoters on two
    mirrors, started together until the queue is promoted: every target move on the
    server is a fast-forward to a new, passing tree, and the culprit has one ejection."""
    runs = tmp_path / "runs.log"
    policy = tmp_path / "policy.toml"
    policy.write_text(
        "version = 1\n[validation]\n"
        f'command = ["sh", "ci/check.sh", "{runs}", "{tmp_path / "lenient"}"]\nmax_batch = 8\n'
    )
    coordinator = world.mirror("coordinator")
    done = cli("policy", "set", str(policy), "--repo", str(coordinator))
    assert done.returncode == 0, done.stderr.decode()
    git("config", "core.logAllRefUpdates", "always", cwd=world.canon)
    for i in range(TASKS):
        _submit(world, coordinator, i, tmp_path)
    lander = world.serve(world.mirror("lander"), tmp_path / "spool", "--once", "--no-promote")
    assert lander.wait(120) == 0
    assert len(world.landed()) == TASKS
    base = git("rev-parse", "main", cwd=world.canon)

    mirrors = [world.mirror("host-b"), world.mirror("host-c")]
    for _ in range(6):
        procs = [
            subprocess.Popen(
                [
                    PYTHON,
                    "-m",
                    "integrator",
                    "promote",
                    "--repo",
                    str(m),
                    "--once",
                    "--log-format",
                    "json",
                ],
                stdout=subprocess.DEVNULL,
                stderr=(tmp_path / f"promote-{n}.log").open("ab"),
                env={**os.environ, **GIT_ENV},
            )
            for n, m in enumerate(mirrors)
        ]
        world.procs.extend(procs)
        assert [p.wait(180) for p in procs] == [0, 0]
        if (
            git("rev-parse", "main", cwd=world.canon)
            == git("rev-parse", "refs/integrator/queue/main", cwd=world.canon)
            != base
        ):
            break
    entries = [
        line.split()[:2] for line in (world.canon / "logs/refs/heads/main").read_text().splitlines()
    ]
    assert entries[0][0] == base  # the reflog starts with the first promotion
    moves = [base, *(new for old, new in entries)]
    assert all(old == new for (_, old), (new, _) in itertools.pairwise([(None, base), *entries]))
    assert len(moves) >= 2 and len(set(moves)) == len(moves)  # never the same head twice
    passed = {line.split()[0] for line in runs.read_text().splitlines() if line.endswith(" pass")}
    for before, after in itertools.pairwise(moves):
        git("merge-base", "--is-ancestor", before, after, cwd=world.canon)  # forward only
        assert git("rev-parse", f"{after}^{{tree}}", cwd=world.canon) in passed
    on_target = git(
        "log", "--first-parent", "--format=%(trailers:key=Integrator-Candidate,valueonly)",
        "main", cwd=world.canon,
    ).split()  # fmt: skip
    assert len(on_target) == TASKS - 1
    ejected = git(
        "for-each-ref", "--format=%(refname)", "refs/integrator/ejected/", cwd=world.canon
    )
    assert len(ejected.splitlines()) == 1
    assert git("show", f"{ejected.strip()}:ejection.json", cwd=world.canon).count("t5") >= 1
    git("fsck", "--no-dangling", cwd=world.canon)
