"""External validation on a real CI engine: a Buildbot master (contrib/buildbot/master.cfg,
SQLite) with two workers on 127.0.0.1 validates the queue heads integrator asks for. The
bridge (contrib/buildbot/integrator_buildbot.py) forces one build per requested head
through Buildbot's REST API and reports each result with `integrator validation report`;
`integrator promote` promotes and bisects on those results exactly as on a local command's.
A batch of eight landings with one culprit: the culprit is ejected, the rest promoted, and
two heads are built at once on the two workers."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
import urllib.error
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e import buildbot_world
from tests.e2e.buildbot_world import Buildbot
from tests.gitutil import GIT_ENV, git
from tests.promotion_world import PromotionWorld, make_world, runs_bound

pytestmark = pytest.mark.e2e

LANDINGS, CULPRIT = 8, "t5"
CANCELLED = 6  # a Buildbot result code


@pytest.fixture
def world(tmp_path: Path) -> Iterator[PromotionWorld]:
    reason = buildbot_world.missing()
    if reason:
        pytest.skip(reason)
    made = make_world(tmp_path, None)
    yield made
    for proc in made.procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.fixture
def buildbot(world: PromotionWorld, request: pytest.FixtureRequest) -> Iterator[Buildbot]:
    root = world.tmp / "buildbot"
    root.mkdir()
    # The suite: the world's check script (it fails on a BROKEN file and logs every tree
    # it saw, outside the checkout), after a pause (a second by default, so two builds
    # overlap visibly; longer where the test stops a build while it runs).
    pause = getattr(request, "param", 1)
    suite = f"sleep {pause}; sh ci/check.sh {world.log} {world.lenient}"
    yield from buildbot_world.run(root, world.repo, suite, workers=2)


def stop(proc: subprocess.Popen[bytes]) -> int:
    if proc.poll() is None:
        os.kill(proc.pid, 15)
        try:
            return proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, 9)
    return proc.wait(timeout=10)


def test_buildbot_validates_a_batch_and_its_culprit_is_ejected(
    world: PromotionWorld, buildbot: Buildbot
) -> None:
    world.set_policy('mode = "external"\ntimeout = 600\nmax_batch = 8\nconcurrency = 2')
    for i in range(LANDINGS):
        world.submit(f"t{i}", broken=f"t{i}" == CULPRIT)
    assert world.serve_once("--no-promote").proc.returncode == 0
    queued = world.chain("refs/integrator/queue/main")
    assert len(queued) == LANDINGS and world.chain("refs/heads/main") == []

    started = time.monotonic()
    promoter = world.run("promote", "--repo", str(world.repo), "--poll", "0.5",
                         "--log-format", "json", name="promote")  # fmt: skip
    bridge_log = world.tmp / "bridge.log"
    bridge = buildbot_world.bridge(buildbot, world.repo, sys.executable, bridge_log, GIT_ENV)
    others = sorted(h for t, h in world.heads.items() if t != CULPRIT)

    def ejected() -> list[str]:
        out = git("for-each-ref", "--format=%(refname)", "refs/integrator/ejected/", cwd=world.repo)
        return out.splitlines()

    deadline = time.monotonic() + 400
    while not (ejected() and sorted(world.chain("refs/heads/main")) == others):
        assert promoter.proc.poll() is None, promoter.text()
        assert bridge.poll() is None, bridge_log.read_text()
        if time.monotonic() > deadline:
            raise AssertionError(
                f"not settled: {bridge_log.read_text()}\n{promoter.text()[-3000:]}"
            )
        time.sleep(0.5)
    elapsed = time.monotonic() - started

    def reported() -> list[str]:
        return [line for line in bridge_log.read_text().splitlines() if " reported " in line]

    # A build of a head the rebuild dropped may still run: let the bridge answer it too.
    while len(reported()) < len(buildbot.get("builds")["builds"]):
        assert time.monotonic() < deadline, bridge_log.read_text()
        time.sleep(0.5)
    assert stop(bridge) in (0, -15) and stop(promoter.proc) in (0, -15)

    # The culprit alone is out; every value the target took passed the suite on Buildbot.
    (record,) = ejected()
    ejection = json.loads(git("show", f"{record}:ejection.json", cwd=world.repo))
    assert ejection["ejected"]["code"] == "VALIDATION_FAILED"
    assert ejection["ejected"]["taskId"] == CULPRIT
    assert ejection["ejected"]["candidate"] == world.heads[CULPRIT]
    assert f"(log: {buildbot.url}/#/builders/" in ejection["ejected"]["detail"]  # its build
    world.check_target_moves()
    assert world.serve_once().proc.returncode == 0  # the daemon reflects the ejection
    assert world.spool.entries("fenced") == [world.sids[CULPRIT]]

    # Every build Buildbot ran: complete, of a requested head, on both workers, two at once.
    builds = buildbot.get("builds?property=got_revision")["builds"]
    assert builds and all(b["complete"] for b in builds)
    assert len(builds) <= runs_bound(LANDINGS) + 2, len(builds)  # + the speculative batch
    assert {b["workerid"] for b in builds} == {1, 2}
    overlapping = [
        (a["number"], b["number"])
        for a, b in itertools.combinations(builds, 2)
        if a["workerid"] != b["workerid"]
        and a["started_at"] < b["complete_at"]
        and b["started_at"] < a["complete_at"]
    ]
    assert overlapping, builds
    # Each result went back through `validation report`: recorded (exit 0), or refused as
    # moot (exit 2) for a head a rebuild had dropped while its build still ran.
    answers = reported()
    assert len(answers) == len(builds), answers
    assert all(": exit 0" in line or "is not an unpromoted head" in line for line in answers)
    assert sum(": exit 0" in line for line in answers) >= 3, answers
    print(
        f"buildbot: {len(builds)} builds, {len(overlapping)} overlapping, settled in {elapsed:.1f}s"
    )


def test_the_documented_master_config_is_the_one_tested() -> None:
    """docs/ci-engines.md shows an exact excerpt of contrib/buildbot/master.cfg."""
    from tests.e2e.gitolite_server import doc_block

    excerpt = doc_block(
        "ci-engines.md", "excerpt of contrib/buildbot/master.cfg (tests/e2e/test_buildbot.py)"
    )
    assert "collapseRequests=False" in excerpt and 'name="suite"' in excerpt
    assert excerpt in buildbot_world.MASTER_CFG.read_text()


def wait(predicate: Callable[[], bool], what: str, *logs: Path, limit: float = 300) -> None:
    deadline = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: " + "\n".join(p.read_text() for p in logs))
        time.sleep(0.3)


@pytest.mark.parametrize("buildbot", [8], indirect=True)
def test_a_cancelled_build_decides_nothing_and_the_head_is_built_again(
    world: PromotionWorld, buildbot: Buildbot
) -> None:
    """A build stopped while its suite runs (as a lost runner or an operator would) is not
    the head's fault: the bridge reports nothing for it and forces the head again, and the
    second build's pass promotes the head."""
    world.set_policy('mode = "external"\ntimeout = 600')
    world.submit("t0")
    assert world.serve_once("--no-promote").proc.returncode == 0
    head = git("rev-parse", "refs/integrator/queue/main", cwd=world.repo)
    promoter = world.run("promote", "--repo", str(world.repo), "--poll", "0.5", name="promote")
    bridge_log = world.tmp / "bridge.log"
    bridge = buildbot_world.bridge(buildbot, world.repo, sys.executable, bridge_log, GIT_ENV)

    def suite_running() -> bool:
        builds = buildbot.get("builds")["builds"]
        if not builds:
            return False
        steps = buildbot.get(f"builds/{builds[0]['buildid']}/steps")["steps"]
        return any(s["name"] == "suite" and s["started_at"] for s in steps)

    wait(suite_running, "the first build's suite never started", bridge_log)
    stopped = buildbot.control("builds/1", "stop", reason="the test stops it")
    assert "error" not in stopped, stopped
    wait(lambda: git("rev-parse", "main", cwd=world.repo) == head, "not promoted", bridge_log)
    # The promoter may act on the result before the bridge has logged its report.
    wait(lambda: f"reported {head} pass" in bridge_log.read_text(), "no report", bridge_log)
    assert stop(bridge) in (0, -15) and stop(promoter.proc) in (0, -15)

    first, *rest = buildbot.get("builds")["builds"]
    assert first["results"] == CANCELLED, first
    assert [b["results"] for b in rest] == [0], rest
    said = bridge_log.read_text()
    assert f"forced build request 2 for {head} (try 2)" in said, said
    assert [line for line in said.splitlines() if " reported " in line] == [
        line for line in said.splitlines() if f"reported {head} pass" in line
    ]
    world.check_target_moves()


def test_with_accounts_only_the_bridge_forces_builds(world: PromotionWorld) -> None:
    """With INTEGRATOR_BUILDBOT_USERS set, an anonymous force is refused (403) and the
    bridge, logged in with INTEGRATOR_BUILDBOT_AUTH, gets the head built and promoted."""
    world.set_policy('mode = "external"\ntimeout = 600')
    world.submit("t0")
    assert world.serve_once("--no-promote").proc.returncode == 0
    head = git("rev-parse", "refs/integrator/queue/main", cwd=world.repo)
    root = world.tmp / "buildbot"
    root.mkdir()
    suite = f"sh ci/check.sh {world.log} {world.lenient}"
    users = {"INTEGRATOR_BUILDBOT_USERS": "bridge:bridge-secret"}
    bots = buildbot_world.run(root, world.repo, suite, 1, env=users)
    bot = next(bots)
    try:
        with pytest.raises(urllib.error.HTTPError) as refused:
            bot.control("forceschedulers/integrator-validate", "force",
                        builderNames=["integrator-validate"], branch="refs/integrator/queue/main",
                        revision=head, repository="", project="")  # fmt: skip
        assert refused.value.code == 403
        promoter = world.run("promote", "--repo", str(world.repo), "--poll", "0.5", name="promote")
        bridge_log = world.tmp / "bridge.log"
        auth = {**GIT_ENV, "INTEGRATOR_BUILDBOT_AUTH": "bridge:bridge-secret"}
        bridge = buildbot_world.bridge(bot, world.repo, sys.executable, bridge_log, auth)
        wait(lambda: git("rev-parse", "main", cwd=world.repo) == head, "not promoted", bridge_log)
        wait(lambda: f"reported {head} pass" in bridge_log.read_text(), "no report", bridge_log)
        assert stop(bridge) in (0, -15) and stop(promoter.proc) in (0, -15)
        (build,) = bot.get("builds")["builds"]
        assert build["results"] == 0
        assert f"reported {head} pass" in bridge_log.read_text()
    finally:
        next(bots, None)
