"""A tiny run of the merge-queue benchmark (`make bench-queue` runs the full one): two
strategies on a small generated workload with the real engine and promoter, so the
benchmark cannot rot between full runs."""

from __future__ import annotations

from pathlib import Path

from bench.queue_run import run_strategy, table, targets
from bench.queue_world import Shape, plan_candidates


def test_the_queue_benchmark_runs_and_judges_its_targets(tmp_path: Path) -> None:
    """Sixteen candidates over four areas, two culprits: both strategies promote every
    other candidate, eject the culprits, never put one on the target, and the table
    names each strategy and each target it could judge."""
    shape = Shape(
        candidates=16, areas=4, culprit_share=0.125, scale=0.05 / 600.0, interval_s=30.0,
        scope_s=600.0 * (0.1 + 0.9 / 4),
    )  # fmt: skip
    plan = plan_candidates(shape)
    culprits = sum(c.culprit for c in plan)
    assert culprits == 2
    results = {
        name: run_strategy(name, shape, plan, tmp_path) for name in ("single-queue", "integrator")
    }
    for figures in results.values():
        assert figures.landed == shape.candidates
        assert figures.culprits_ejected == culprits
        assert figures.promoted + figures.culprits_ejected + figures.innocent == shape.candidates
        assert not figures.culprit_on_target
        assert figures.runs > 0 and figures.p95_s is not None
    rendered = table(results, shape)
    assert "| integrator |" in rendered and "| single-queue |" in rendered
    judged = [what for what, _, _ in targets(results, shape)]
    assert any("best single queue" in what for what in judged)
    assert results["integrator"].ci_per_landing < results["single-queue"].ci_per_landing
