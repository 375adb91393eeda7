"""A validation record of a head the target already holds is swept by the next round: a
promoter that began a run of a head just before another promoter promoted past it, or was
killed while running it, left its "running" record on the server for ever (found by the
system soak: `refs/integrator/validations/main/<head>` of a promoted head, expired, left
after every promoter was idle)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gitutil import git
from tests.promotion_world import PromotionWorld, promotion_world


@pytest.fixture
def promotion(tmp_path: Path) -> Iterator[PromotionWorld]:
    yield from promotion_world(tmp_path)


def test_records_of_promoted_heads_are_swept_and_no_other(promotion: PromotionWorld) -> None:
    w = promotion
    w.set_policy(w.command())
    w.submit("t0")
    assert w.serve_once("--no-promote").proc.returncode == 0
    assert w.promote_once().proc.returncode == 0
    promoted = git("rev-parse", "refs/heads/main", cwd=w.repo)
    older = git("rev-parse", "refs/heads/main~1", cwd=w.repo)
    record = git("rev-parse", "refs/integrator/promotion/main", cwd=w.repo)
    unrelated = git("commit-tree", f"{promoted}^{{tree}}", "-m", "not on the target", cwd=w.repo)
    stale = {
        f"refs/integrator/validations/main/{promoted}",
        f"refs/integrator/validations/main/{older}",
        f"refs/integrator/validations/main/scope/api/{promoted}",
        f"refs/integrator/validations/main/{unrelated}",  # nor on the queue: dropped
    }
    kept = {
        f"refs/integrator/validations/main/cache/{'ab' * 32}",  # the result cache stays
    }

    def listed() -> set[str]:
        return set(git("for-each-ref", "--format=%(refname)", "refs/integrator/validations/",
                       cwd=w.repo).split())  # fmt: skip

    cached = listed()  # the promotion's own result cache entries
    assert all("/cache/" in ref for ref in cached), cached
    for ref in stale | kept:
        git("update-ref", ref, record, cwd=w.repo)
    served = w.promote_once()
    assert served.proc.returncode == 0
    assert listed() == kept | cached
    assert served.events("promote.swept")[0]["refs"] == len(stale)


def test_records_of_heads_a_rebuild_dropped_are_settled_and_the_queues_are_not(
    promotion: PromotionWorld,
) -> None:
    """A head the queue no longer holds (a rebuild dropped it while another promoter ran
    it: found by the system soak, a final "fail" record left after every promoter was
    idle) is settled; a head the queue holds and the target does not yet is not."""
    from integrator.records.canonical import Canonical
    from integrator.records.validations import settled_refs

    w = promotion
    w.set_policy(w.command())
    w.submit("t0")
    assert w.serve_once("--no-promote").proc.returncode == 0
    assert w.promote_once().proc.returncode == 0
    w.submit("t1")
    assert w.serve_once("--no-promote").proc.returncode == 0
    promoted = git("rev-parse", "refs/heads/main", cwd=w.repo)
    queue = git("rev-parse", "refs/integrator/queue/main", cwd=w.repo)
    assert queue != promoted
    dropped = git("commit-tree", f"{queue}^{{tree}}", "-p", promoted, "-m", "rebuilt away",
                  cwd=w.repo)  # fmt: skip
    record = git("rev-parse", "refs/integrator/promotion/main", cwd=w.repo)
    for head in (queue, dropped):
        git("update-ref", f"refs/integrator/validations/main/{head}", record, cwd=w.repo)
    with Canonical(w.repo) as canonical:
        found = settled_refs(canonical, "main", promoted, queue)
        assert set(found) == {f"refs/integrator/validations/main/{dropped}"}
        assert settled_refs(canonical, "main", promoted) == {}  # without the queue: as before
