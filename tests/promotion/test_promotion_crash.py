"""SIGKILL of a real `integrator promote` process in the middle of a bisection, of a queue
rebuild and of a promotion (INTEGRATOR_FAULT): no landing is lost, the target moves only
to heads the script itself passed, and a restarted promoter finishes the job."""

from __future__ import annotations

import signal

import pytest

from tests.gitutil import git
from tests.promotion_world import TASKS, PromotionWorld, runs_bound

CULPRIT = 4


def _accounted(world: PromotionWorld) -> None:
    """Every candidate is on the queue, or recorded as ejected: nothing was lost."""
    queued = set(world.chain("refs/integrator/queue/main"))
    ejected = git("for-each-ref", "--format=%(refname)", "refs/integrator/ejected/", cwd=world.repo)
    names = {line.rsplit("/", 1)[1] for line in ejected.splitlines()}
    landed = {}
    for task in world.heads:
        claim = git("show", f"refs/integrator/claims/{task}:claim.json", cwd=world.repo)
        assert '"state": "consumed"' in claim  # every landing's claim stays consumed
        landed[task] = claim.split('"stagingCommit": "')[1][:40]
    for task, head in world.heads.items():
        assert head in queued or landed[task] in names, f"{task} was lost"


@pytest.mark.parametrize(
    "point", ["mid-bisection", "before-rebuild", "after-rebuild", "before-promote"]
)
def test_a_promoter_killed_mid_job_loses_nothing_and_a_restart_finishes(
    promotion: PromotionWorld, point: str
) -> None:
    """Killed at `point`, the queue still accounts for every landing and the target only
    ever moved to validated heads; `promote --once` again ejects the culprit, promotes the
    other eleven, and the spool holds the culprit for review after the daemon reflects."""
    world = promotion
    world.set_policy(world.command() + f"\nmax_batch = {TASKS}")
    for i in range(TASKS):
        world.submit(f"t{i}", broken=i == CULPRIT)
    drained = world.serve_once("--no-promote")
    assert drained.proc.returncode == 0, drained.text()
    assert len(world.chain("refs/integrator/queue/main")) == TASKS

    killed = world.promote_once(env={"INTEGRATOR_FAULT": f"kill:{point}"})
    assert killed.proc.returncode == -signal.SIGKILL, killed.text()
    _accounted(world)
    world.check_target_moves()

    again = world.promote_once()
    assert again.proc.returncode == 0, again.text()
    _accounted(world)
    world.check_target_moves()
    others = sorted(h for t, h in world.heads.items() if t != f"t{CULPRIT}")
    assert sorted(world.chain("refs/heads/main")) == others
    assert git("rev-parse", "main", cwd=world.repo) == git(
        "rev-parse", "refs/integrator/queue/main", cwd=world.repo
    )
    assert len(world.runs()) <= runs_bound(TASKS) + 1  # at most the one run the kill lost

    reflected = world.serve_once()
    assert reflected.proc.returncode == 0, reflected.text()
    sid = world.sids[f"t{CULPRIT}"]
    assert world.spool.entries("fenced") == [sid]
    assert world.verdict("fenced", sid).violations[0].code.value == "VALIDATION_FAILED"
