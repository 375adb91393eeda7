"""SIGKILL of a real `integrator promote` with validation scopes, in the middle of a
bisection, of a reorder or rebuild and of a promotion: no landing is lost, the target never
holds the culprit, and a restarted promoter finishes the job."""

from __future__ import annotations

import signal

import pytest

from tests.gitutil import git
from tests.promotion.test_scopes import check_target_clean, scoped_policy
from tests.promotion_world import PromotionWorld


def _accounted(world: PromotionWorld) -> None:
    """Every candidate is on the queue, or recorded as ejected: nothing was lost."""
    queued = set(world.chain("refs/integrator/queue/main"))
    ejected = git("for-each-ref", "--format=%(refname)", "refs/integrator/ejected/", cwd=world.repo)
    names = {line.rsplit("/", 1)[1] for line in ejected.splitlines()}
    for task, head in world.heads.items():
        claim = git("show", f"refs/integrator/claims/{task}:claim.json", cwd=world.repo)
        landed = claim.split('"stagingCommit": "')[1][:40]
        assert head in queued or landed in names, f"{task} was lost"


@pytest.mark.parametrize(
    "point", ["mid-bisection", "before-rebuild", "after-rebuild", "before-promote"]
)
def test_a_scoped_promoter_killed_mid_job_loses_nothing_and_a_restart_finishes(
    promotion: PromotionWorld, point: str
) -> None:
    """Killed at `point` (the first reorder, ejection or promotion reaching it), every
    landing is still on the queue or ejected, the target never held the marker, and
    `promote --once` again promotes all but the culprit a2."""
    world = promotion
    world.set_policy(scoped_policy(world))
    for i in range(4):
        world.submit(f"a{i}", broken=i == 2)
        world.submit(f"b{i}")
    drained = world.serve_once("--no-promote")
    assert drained.proc.returncode == 0, drained.text()
    killed = world.promote_once(env={"INTEGRATOR_FAULT": f"kill:{point}"})
    assert killed.proc.returncode == -signal.SIGKILL, killed.text()
    _accounted(world)
    check_target_clean(world)
    again = world.promote_once()
    assert again.proc.returncode == 0, again.text()
    _accounted(world)
    check_target_clean(world)
    others = {h for t, h in world.heads.items() if t != "a2"}
    assert set(world.chain("refs/heads/main")) == others
    assert git("rev-parse", "main", cwd=world.repo) == git(
        "rev-parse", "refs/integrator/queue/main", cwd=world.repo
    )
