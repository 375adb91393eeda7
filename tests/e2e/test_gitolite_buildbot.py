"""Both real servers at once, in remote mode: the canonical repository and the intake on
gitolite over sshd (the setup of docs/remote.md), Buildbot validating queue heads that its
workers fetch over ssh with a read-only `ci` key, and the bridge and the promoter on the
integrator's mirror, pushing results and promotions with the integrator's key."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from integrator.documents.trailers import TRAILER_CANDIDATE
from tests.e2e import buildbot_world, gitolite_server
from tests.e2e.buildbot_world import Buildbot
from tests.e2e.gitolite_server import Gitolite
from tests.e2e.gitolite_setup import as_key, cli, configure, on_server, server_refs
from tests.gitutil import GIT_ENV, commit_files, git, make_repo
from tests.promotion_world import CHECK_SCRIPT, MARKER

pytestmark = pytest.mark.e2e

PEOPLE = ["integrator", "coordinator", "agent-a", "agent-b", "ci"]
TASKS, CULPRIT = ["t0", "t1", "t2", "t3"], "t2"


@pytest.fixture
def server() -> Iterator[Gitolite]:
    for reason in (gitolite_server.missing(), buildbot_world.missing()):
        if reason:
            pytest.skip(reason)
    yield from gitolite_server.start(PEOPLE)


def land_four(server: Gitolite, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """docs/remote.md's setup, an external-validation policy, and four candidates of
    agent-a through the intake landed on the queue (main stays): the integrator's mirror
    and the candidates by task."""
    configure(server, tmp_path, PEOPLE)
    product, intake = server.url("product"), server.url("product-intake")
    seed = make_repo(tmp_path / "seed")
    commit_files(seed, {"ci/check.sh": CHECK_SCRIPT} | {f"{t}/f.txt": "0\n" for t in TASKS}, "base")
    pushed = as_key(server, "integrator", "push", "-q", product, "HEAD:refs/heads/main", cwd=seed)
    assert pushed.returncode == 0, pushed.stderr
    mirror, coord = tmp_path / "mirror.git", tmp_path / "coord.git"
    for who, path in (("integrator", mirror), ("coordinator", coord)):
        done = cli(server, who, "init", "--repo", str(path), "--remote", product, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    policy = tmp_path / "policy.toml"
    policy.write_text('version = 1\n\n[validation]\nmode = "external"\ntimeout = 600\n'
                      "max_batch = 4\nconcurrency = 2\n")  # fmt: skip
    done = cli(
        server, "integrator", "policy", "set", str(policy), "--repo", str(mirror), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr

    agent = tmp_path / "agent-a"
    assert (
        as_key(server, "agent-a", "clone", "-q", product, str(agent), cwd=tmp_path).returncode == 0
    )
    base = git("rev-parse", "HEAD", cwd=agent)
    candidates = {}
    for task in TASKS:
        contract = tmp_path / f"{task}.json"
        done = cli(server, "coordinator", "contract", "issue", "--repo", str(coord), "--task", task,
                   "--path", f"{task}/**", "--holder", "agent-a", "--base", "main",
                   "-o", str(contract), cwd=tmp_path)  # fmt: skip
        assert done.returncode == 0, done.stderr
        git("checkout", "-q", "-B", task, base, cwd=agent)
        files = {f"{task}/f.txt": f"{task} changed\n"}
        if task == CULPRIT:
            files[f"{task}/{MARKER}"] = "this landing breaks the build\n"
        candidates[task] = commit_files(agent, files, f"work on {task}")
        done = cli(server, "agent-a", "submit", "--intake", intake, "--contract", str(contract),
                   "--candidate", "HEAD", "--repo", str(agent), cwd=agent)  # fmt: skip
        assert done.returncode == 0, done.stderr
    done = cli(server, "integrator", "serve", "--repo", str(mirror), "--spool", str(tmp_path / "spool"),
               "--intake", intake, "--once", "--no-promote", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    refs = server_refs(server, "product")
    assert refs["refs/heads/main"] == base and refs["refs/integrator/queue/main"] != base
    return mirror, candidates


def test_remote_validation_on_buildbot_through_gitolite(server: Gitolite, tmp_path: Path) -> None:
    """Four candidates through the intake, one culprit: Buildbot's workers fetch each head
    over ssh with the ci key, the bridge reports with the integrator's key, and on the
    server the culprit is ejected and main holds the other three."""
    mirror, candidates = land_four(server, tmp_path)
    product = server.url("product")

    runs = tmp_path / "runs.log"
    suite = f"sh ci/check.sh {runs} {tmp_path / 'lenient'}"
    bb_root = tmp_path / "buildbot"
    bb_root.mkdir()
    started = time.monotonic()
    bots = buildbot_world.run(bb_root, product, suite, 2, env=server.env("ci"))
    bot: Buildbot = next(bots)
    try:
        promoter = subprocess.Popen(
            [sys.executable, "-m", "integrator", "promote", "--repo", str(mirror), "--poll", "0.5"],
            stdout=(tmp_path / "promote.log").open("wb"), stderr=-2,
            env={**os.environ, **GIT_ENV, **server.env("integrator")},
        )  # fmt: skip
        bridge_log = tmp_path / "bridge.log"
        bridge = buildbot_world.bridge(bot, mirror, sys.executable, bridge_log,
                                       {**GIT_ENV, **server.env("integrator")})  # fmt: skip
        try:
            deadline = time.monotonic() + 400
            while (
                not server_refs(server, "product", "refs/integrator/ejected/")
                or len(landed(server)) < len(TASKS) - 1
            ):
                assert promoter.poll() is None and bridge.poll() is None, bridge_log.read_text()
                assert time.monotonic() < deadline, (
                    bridge_log.read_text() + (tmp_path / "promote.log").read_text()
                )
                time.sleep(0.5)
        finally:
            for proc in (bridge, promoter):
                proc.terminate()
                proc.wait(timeout=30)
    finally:
        next(bots, None)  # stops Buildbot
    elapsed = time.monotonic() - started

    assert sorted(landed(server)) == sorted(c for t, c in candidates.items() if t != CULPRIT)
    (ejected,) = server_refs(server, "product", "refs/integrator/ejected/")
    record = json.loads(on_server(server, "product", "show", f"{ejected}:ejection.json"))
    assert record["ejected"]["taskId"] == CULPRIT
    assert record["ejected"]["code"] == "VALIDATION_FAILED"
    listing = on_server(server, "product", "ls-tree", "-r", "--name-only", "main")
    assert f"{CULPRIT}/{MARKER}" not in listing.splitlines()
    # The workers fetched over ssh with the ci key: gitolite logged its reads.
    logs = "".join(p.read_text() for p in (server.home / ".gitolite" / "logs").glob("*.log"))
    assert re.search(r"\tssh\tARGV=ci\tSOC=git-upload-pack '?/?product'?\t", logs), logs[-2000:]
    print(f"gitolite+buildbot: settled in {elapsed:.1f}s")


def landed(server: Gitolite) -> list[str]:
    """Candidates on the server's main, oldest first."""
    out = on_server(server, "product", "log", "--first-parent",
                    f"--format=%(trailers:key={TRAILER_CANDIDATE},valueonly)", "main")  # fmt: skip
    return [line.strip() for line in out.splitlines() if line.strip()]
