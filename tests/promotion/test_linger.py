"""`[validation] linger`: a batch smaller than its window waits for more landings, counted
from its oldest landing, and starts at once when the window fills; with scopes, a
lingering scope holds no other scope back. Real repositories, real landings through
`integrator serve --once`, real scripts; the promoter's rounds on an injected clock."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from integrator.promotion.linger import hold_until
from integrator.promotion.promoter import Promoter
from integrator.promotion.rounds import Round
from integrator.promotion.scopes import plan
from integrator.records.canonical import Canonical
from tests.promotion.test_scopes import scope_runs, scoped_policy
from tests.promotion_world import PromotionWorld


@pytest.mark.parametrize(
    ("waiting", "window", "oldest", "now", "linger", "expected"),
    [
        (2, 4, 100.0, 150.0, 600.0, 700.0),  # fewer than the window, young: waits
        (2, 4, 100.0, 700.0, 600.0, None),  # waited its linger: starts
        (2, 4, 100.0, 701.0, 600.0, None),
        (4, 4, 100.0, 150.0, 600.0, None),  # the window is full: starts
        (5, 4, 100.0, 150.0, 600.0, None),
        (0, 4, None, 150.0, 600.0, None),  # nothing waits
        (2, 4, 100.0, 150.0, 0.0, None),  # no linger
        (1, 1, 100.0, 150.0, 600.0, None),  # a window of one never waits
    ],
)
def test_hold_until(
    waiting: int, window: int, oldest: float | None, now: float, linger: float,
    expected: float | None,
) -> None:  # fmt: skip
    assert hold_until(waiting, window, oldest, now, linger) == expected


def test_a_held_scope_validates_nothing_and_its_landings_move_behind_the_others() -> None:
    """Scope a holds (one landing, first in the queue), scope b's two landings behind it
    are free: the plan moves b's landings before a's; without the hold it validates both."""
    members = [frozenset({"a"}), frozenset({"b"}), frozenset({"b"})]
    windows = {"a": 4, "b": 4}
    free = plan(members, ("a", "b"), {}, windows=windows, concurrency=1, budget=4)
    assert set(free.validate) == {("a", 3), ("b", 3)}  # a scope's head: its newest
    held = plan(members, ("a", "b"), {}, windows=windows, concurrency=1, budget=4, hold={"a"})
    assert held.reorder == (1, (2, 3, 1))
    kept = plan(
        members, ("a", "b"), {}, windows=windows, concurrency=1, budget=4, hold={"a"},
        reorder=False,
    )  # fmt: skip
    assert kept.validate == (("b", 3),)
    # A failure to bisect is never held.
    failing = plan(
        [frozenset({"a"})] * 3, ("a",), {"a": {3: False}}, windows={"a": 4}, concurrency=1,
        budget=4, hold={"a"},
    )  # fmt: skip
    assert failing.validate == (("a", 1),)


def _rounds(world: PromotionWorld, at: datetime, limit: int = 20) -> list[Round]:
    """The promoter's rounds at the time `at` until one makes no progress."""
    out = []
    (world.tmp / "scratch").mkdir(exist_ok=True)
    with Canonical(world.repo, clock=lambda: at) as canonical:
        promoter = Promoter(canonical, scratch=world.tmp / "scratch")
        for _ in range(limit):
            done = promoter.round()
            out.append(done)
            if not done.progress:
                break
    return out


def _landed(world: PromotionWorld, tasks: list[str]) -> datetime:
    """Each task submitted and landed by `serve --once`; the time after the landings."""
    for task in tasks:
        world.submit(task)
    served = world.serve_once()
    assert served.proc.returncode == 0, served.text()
    return datetime.now(UTC)


def test_a_batch_short_of_its_window_waits_its_linger_then_is_validated(
    promotion: PromotionWorld,
) -> None:
    world = promotion
    world.set_policy(world.command() + "\nmax_batch = 4\nlinger = 600")
    moves = world.target_moves()
    after = _landed(world, ["t0", "t1"])
    # `serve --once` landed both and validated nothing: the batch of two lingers.
    assert world.runs() == []
    assert world.target_moves() == moves
    early = _rounds(world, after + timedelta(seconds=60))
    assert [r.action for r in early] == ["linger"]
    until = float(str(early[0].detail["until"]))
    assert after.timestamp() - 60 <= until - 600 <= after.timestamp()
    assert world.runs() == []
    # `queue status` says so, and its estimates count the wait.
    shown = world.cli("queue", "status", "--repo", str(world.repo), "--json")
    assert shown.returncode == 0, shown.stderr.decode()
    scope = json.loads(shown.stdout)["scopes"]["*"]
    held = datetime.fromisoformat(scope["lingerUntil"])
    assert abs(held.timestamp() - until) <= 1
    text = world.cli("queue", "status", "--repo", str(world.repo))
    assert f"lingering for a fuller batch until {scope['lingerUntil']}" in text.stdout.decode()
    late = _rounds(world, after + timedelta(seconds=601))
    assert [r.action for r in late][:2] == ["validate", "promote"]
    shown = world.cli("queue", "status", "--repo", str(world.repo), "--json")
    assert json.loads(shown.stdout)["scopes"]["*"]["lingerUntil"] is None
    assert len(world.runs()) == 1  # one run covered both landings
    assert sorted(world.chain("refs/heads/main")) == sorted(world.heads.values())


def test_a_full_window_is_validated_at_once(promotion: PromotionWorld) -> None:
    world = promotion
    world.set_policy(world.command() + "\nmax_batch = 3\nlinger = 3600")
    _landed(world, ["t0", "t1", "t2"])
    assert len(world.runs()) == 1  # validated within `serve --once`, no waiting
    assert sorted(world.chain("refs/heads/main")) == sorted(world.heads.values())


def test_a_lingering_scope_holds_no_other_scope_back(promotion: PromotionWorld) -> None:
    """Scope a's one landing comes first and lingers; scope b's three fill its window and
    are moved before it, validated once and promoted; a's is validated after its linger."""
    world = promotion
    policy = scoped_policy(world, "linger = 900").replace("max_batch = 8", "max_batch = 3")
    world.set_policy(policy)
    after = _landed(world, ["a0", "b0", "b1", "b2"])
    # One run of b (at the newest head holding its three: a's landing moved behind them
    # leaves b's projection as it was), none of a.
    assert [scope for scope, *_ in scope_runs(world)] == ["b"]
    promoted = set(world.chain("refs/heads/main"))
    assert {world.heads[t] for t in ("b0", "b1", "b2")} <= promoted
    assert world.heads["a0"] not in promoted
    late = _rounds(world, after + timedelta(seconds=901))
    assert "validate" in [r.action for r in late]
    assert [scope for scope, *_ in scope_runs(world)] == ["b", "a"]
    assert set(world.chain("refs/heads/main")) >= set(world.heads.values())
