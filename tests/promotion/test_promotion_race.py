"""A promotion and an ejection decided from the same state cannot both commit.

Both move refs/integrator/promotion/<target>; they used to take its old value when they
wrote (after a rebuild), not from the state they decided on, so one promoter ejecting the
landing whose head failed and another promoting a later head that passed both succeeded:
the target held the ejected landing and the rebuilt queue no longer descended from it. The
lease is now the value read with the state."""

from __future__ import annotations

import pytest

from integrator.errors import ConfigurationError
from integrator.promotion import promoter as promoter_module
from integrator.promotion.promoter import Promoter
from integrator.promotion.state import read_state
from integrator.records.canonical import Canonical
from tests.gitutil import git
from tests.promotion_world import PromotionWorld


def _report(world: PromotionWorld, head: str, status: str) -> None:
    done = world.cli(
        "validation", "report", "--repo", str(world.repo), "--head", head, "--status", status,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()


def test_an_ejection_and_a_promotion_cannot_both_win(
    promotion: PromotionWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = promotion
    world.set_policy('mode = "external"\ntimeout = 600\nmax_batch = 3')
    for task in ("t0", "t1", "t2"):
        world.submit(task)
    assert world.serve_once("--no-promote").proc.returncode == 0
    heads = git(
        "log", "--first-parent", "--reverse", "--format=%H", "main..refs/integrator/queue/main",
        cwd=world.repo,
    ).split()  # fmt: skip
    assert len(heads) == 3
    _report(world, heads[0], "fail")  # head 1 fails (final: retries = 0)

    real_rebuild = promoter_module.rebuild  # type: ignore[attr-defined]
    raced: list[str] = []

    def rebuild_while_another_promotes(*args, **kwargs):  # type: ignore[no-untyped-def]
        # While promoter B rebuilds without landing 1, CI reports head 3 passing and
        # promoter A (its own repository handle) promotes it.
        if not raced:
            raced.append("x")
            _report(world, heads[2], "pass")
            with Canonical(world.repo) as other:
                done = Promoter(other).round()
            raced.append(done.action)
        return real_rebuild(*args, **kwargs)

    monkeypatch.setattr(promoter_module, "rebuild", rebuild_while_another_promotes)
    with Canonical(world.repo) as canonical:
        first = Promoter(canonical).round()
    assert raced == ["x", "promote"]  # A promoted head 3 in B's window

    target = git("rev-parse", "refs/heads/main", cwd=world.repo)
    ejected = git("for-each-ref", "--format=%(refname)", "refs/integrator/ejected/", cwd=world.repo)
    # At most one of them may have won: either the target holds head 3 and nothing in it
    # was ejected, or landing 1 was ejected and the target does not hold it.
    if first.action == "eject":
        assert target != heads[2], (
            f"the target moved to {heads[2][:12]}, which holds the landing just ejected "
            f"({ejected.strip()})"
        )
    with Canonical(world.repo) as canonical:
        try:
            read_state(canonical)
        except ConfigurationError as err:
            pytest.fail(f"the target is off the queue after the race: {err}")
