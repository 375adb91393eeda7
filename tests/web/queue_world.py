"""A queue with history for the Queue page's tests: a real `integrator serve` validates two
scopes with a real script, promotes two landings and ejects a broken one; three more land
and wait (no promoter runs), and a promoter stopped in the middle of a run left a `running`
record on the last of them an hour ago."""

from __future__ import annotations

from datetime import timedelta

from integrator.documents.promotion import ValidationResult
from integrator.promotion.state import read_state
from integrator.records.canonical import Canonical
from integrator.records.validations import validation_ref, write_result
from tests.gitutil import git
from tests.promotion.test_scopes import scoped_policy
from tests.promotion_world import PromotionWorld, now

STUCK_SCOPE = "b"
STUCK_FOR = timedelta(hours=1)


def running_record(world: PromotionWorld, scope: str, age: timedelta) -> str:
    """What a promoter stopped in the middle of a run leaves: a `running` record of the last
    waiting head in `scope`, written by the records' own writer; the head."""
    with Canonical(world.repo) as canonical:
        state = read_state(canonical)
        head = state.landings[-1].staging
        result = ValidationResult(
            target="main", head=head, tree=str(canonical.commit(head).tree_id),
            base=state.promoted, status="running", attempt=1, at=now() - age, scope=scope,
        )  # fmt: skip
        oid = write_result(canonical, result, None)
    git("update-ref", validation_ref("main", head, scope), oid, cwd=world.repo)
    return head


def build_queue(world: PromotionWorld) -> str:
    """Land, validate, promote and eject as the module docstring says; the stuck head."""
    world.set_policy(scoped_policy(world))
    world.submit("a0")
    world.submit("b0")
    world.submit("a1", broken=True)
    served = world.serve_once()
    assert served.proc.returncode == 0, served.text()
    assert world.spool.entries("fenced") == [world.sids["a1"]]  # ejected by scope a's run
    for task in ("a2", "b2", "b3"):
        world.submit(task)
    served = world.serve_once("--no-promote")
    assert served.proc.returncode == 0, served.text()
    return running_record(world, STUCK_SCOPE, STUCK_FOR)
