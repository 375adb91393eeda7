"""A scoped batch head that fails with `flaky_reruns` is not rerun at once: its rerun runs
in the next round beside its scope's first bisection probe (while the other scope is
promoted), and a provisional failure is found again by its projection after the queue
moved (real repositories, a real `integrator serve`)."""

from __future__ import annotations

from typing import Any

from integrator.records.canonical import Canonical
from integrator.records.validations import promotions
from tests.promotion.test_scopes import check_target_clean, scoped_policy
from tests.promotion_world import PromotionWorld


def _a_runs(events: list[dict[str, Any]]) -> list[tuple[int, str, bool]]:
    return [
        (e["attempt"], e["status"], e["final"])
        for e in events
        if e.get("event") == "validation.run" and e.get("scope") == "a"
    ]


def test_a_failing_batch_head_is_rerun_beside_the_first_probe_and_the_culprit_is_ejected(
    promotion: PromotionWorld,
) -> None:
    """a0 b0 a1 b1 a2 a3, a1 broken, `flaky_reruns = 1`: a's batch head (four landings)
    runs once and fails; b is moved first and promoted; the next round reruns a's batch
    head (now at another queue head of the same projection) beside the probe at two
    landings; the bisection ends on a1, confirmed before it is ejected; every other landing
    is promoted and the target never holds the marker."""
    world = promotion
    world.set_policy(scoped_policy(world, "flaky_reruns = 1"))
    for task in ("a0", "b0", "a1", "b1", "a2", "a3"):
        world.submit(task, broken=task == "a1")
    served = world.serve_once()
    assert served.proc.returncode == 0, served.text()
    events = served.events()
    assert _a_runs(events) == [
        (1, "fail", False),  # the batch head (a0..a3): one run, no rerun in its round
        (2, "fail", True),  # its rerun, in the next round ...
        (1, "fail", False),  # ... beside the probe at a0, a1
        (1, "pass", True),  # the probe at a0
        (2, "fail", True),  # a1's head confirmed before it ejects a1
        (1, "pass", True),  # a2 and a3 rebuilt without a1
    ]
    names = [e.get("event") for e in events]
    first_a = next(i for i, e in enumerate(events) if e.get("scope") == "a")
    rerun = next(i for i, e in enumerate(events) if e.get("scope") == "a" and e.get("attempt") == 2)
    assert "promote.promoted" in names[first_a:rerun]  # b promoted between the two runs
    with Canonical(world.repo) as canonical:
        records = [r for _, r in reversed(promotions(canonical, "main"))]
    assert [r.action for r in records][:2] == ["reorder", "promote"]
    assert {c.task_id for c in records[1].landings} == {"b0", "b1"}
    (ejection,) = [r for r in records if r.action == "eject"]
    (culprit,) = ejection.ejected
    assert culprit.task_id == "a1" and culprit.scope == "a" and culprit.flaky_seen is False
    assert world.spool.entries("fenced") == [world.sids["a1"]]
    expected = {h for t, h in world.heads.items() if t != "a1"}
    assert set(world.chain("refs/heads/main")) == expected
    check_target_clean(world)
