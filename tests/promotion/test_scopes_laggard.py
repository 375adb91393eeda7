"""A scope whose window covers fewer landings than it has waiting holds no other scope
back: the landings past its next batch head are moved behind the other scopes' (a
`reorder` record), so every scope's batch head meets at one queue head and the target
moves there in one promotion (real repositories, a real `integrator serve`)."""

from __future__ import annotations

from integrator.promotion.scopes import plan
from integrator.records.canonical import Canonical
from integrator.records.validations import promotions
from tests.promotion.test_scopes import check_target_clean, scope_runs, scoped_policy
from tests.promotion_world import PromotionWorld

A, B = frozenset({"a"}), frozenset({"b"})


def test_landings_past_a_scopes_window_move_behind_the_other_scopes() -> None:
    """a's window is 2 of its 4 landings: a2 and a3 move behind b0 and b1; nothing is
    moved when each scope's batch head already covers everything it has."""
    members = [A, A, A, B, A, B]
    step = plan(members, ("a", "b"), {}, windows={"a": 2, "b": 2}, concurrency=1, budget=2)
    assert step.reorder == (3, (4, 6, 3, 5))
    after = [members[i - 1] for i in (1, 2, 4, 6, 3, 5)]
    step = plan(after, ("a", "b"), {}, windows={"a": 2, "b": 2}, concurrency=1, budget=2)
    assert step.validate == (("a", 4), ("b", 6))
    step = plan(after, ("a", "b"), {"a": {2: True}, "b": {2: True}},
                windows={"a": 2, "b": 2}, concurrency=1, budget=2)  # fmt: skip
    assert step.promote == 4
    step = plan(members, ("a", "b"), {}, windows={"a": 4, "b": 2}, concurrency=1, budget=2)
    assert step.reorder is None and step.validate == (("a", 6), ("b", 6))
    step = plan(members, ("a", "b"), {}, windows={"a": 2, "b": 2}, concurrency=1, budget=2,
                reorder=False)  # fmt: skip
    assert step.reorder is None and step.validate == (("a", 2), ("b", 6))


def test_a_scope_behind_its_window_does_not_hold_the_other_scope_off_the_target(
    promotion: PromotionWorld,
) -> None:
    """max_batch 2: a has four landings, b two, in the order a0 a1 a2 b0 a3 b1. b's two
    are moved before a2 and a3 and promoted with a0 and a1 in the first promotion; each
    scope's suite ran once per batch (b once, a twice), every landing reaches the target,
    and no value of the target held a marker."""
    world = promotion
    world.set_policy(scoped_policy(world).replace("max_batch = 8", "max_batch = 2"))
    for task in ("a0", "a1", "a2", "b0", "a3", "b1"):
        world.submit(task)
    served = world.serve_once()
    assert served.proc.returncode == 0, served.text()
    runs = scope_runs(world)
    assert [r[3] for r in runs] == ["pass"] * len(runs)
    assert sorted(r[0] for r in runs) == ["a", "a", "b"]
    with Canonical(world.repo) as canonical:
        records = [r for _, r in reversed(promotions(canonical, "main"))]
    actions = [r.action for r in records]
    assert actions[0] == "reorder" and actions.count("promote") == 2
    first = next(r for r in records if r.action == "promote")
    assert {c.task_id for c in first.landings} == {"a0", "a1", "b0", "b1"}
    assert set(world.chain("refs/heads/main")) == set(world.heads.values())
    check_target_clean(world)
