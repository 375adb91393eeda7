"""Smoke tests of the benchmark harness (`python -m bench`) on a 1,000-file workload.

They pin that the harness runs end to end on a tiny workload and that its correctness
check is real: it compares landed trees with `git merge-tree` and fails on a wrong one.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from bench import (
    baseline,
    correctness,
    phases,
    remote_run,
    report,
    rows,
    startup_run,
    targets,
    workload,
)
from bench.daemon_run import union_attributes

CANDIDATES = 5


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> workload.Workload:
    root = tmp_path_factory.mktemp("bench")
    return workload.build(
        root / "base.git", 1_000, 1, {"fleet": (CANDIDATES, False), "shared": (CANDIDATES, True)}
    )


@pytest.fixture(scope="module")
def landed(tiny: workload.Workload, tmp_path_factory: pytest.TempPathFactory) -> phases.FleetResult:
    # The shared-file set: every candidate also appends to CHANGELOG (union merges).
    return phases.fleet(tiny, "shared", tmp_path_factory.mktemp("fleet"))


def test_shapes_are_seeded_disjoint_and_within_the_issue_bounds() -> None:
    """Candidate shapes repeat for a seed, own disjoint folders and stay within 1–45 edits."""
    layout = workload.layout_for(1_000)
    drawn = workload.shapes(layout, layout.max_candidates, "1:candidates", changelog=False)
    again = workload.shapes(layout, layout.max_candidates, "1:candidates", changelog=False)
    assert drawn == again
    folders = [f for s in drawn for f in s.folders]
    assert len(folders) == len(set(folders)) == layout.max_candidates * 5
    for s in drawn:
        assert 1 <= s.edit_count <= 45
        assert len(s.renames) <= 2 and len(s.exec_flips) <= 2
        touched = [*s.edits, *(old for old, _, _ in s.renames), s.deleted, *s.exec_flips]
        assert all(p is None or p.split("/f")[0] in s.folders for p in touched)


def test_a_candidate_has_the_same_shape_at_every_size() -> None:
    """The scaling curve compares like with like: counts match at 1,000 and 100,000 files."""

    def counts(files: int) -> list[tuple[int, int, bool, int]]:
        drawn = workload.shapes(workload.layout_for(files), 20, "7:c", changelog=False)
        return [
            (s.edit_count, len(s.renames), s.deleted is not None, len(s.exec_flips)) for s in drawn
        ]

    assert counts(1_000) == counts(100_000)


def test_the_harness_lands_every_candidate_with_git_merge_tree_trees(
    landed: phases.FleetResult,
) -> None:
    """Both daemon runs and the plain pipeline land all candidates, with git's trees."""
    assert landed.single.decisions == {"ACCEPTED": CANDIDATES}
    assert landed.batched.decisions == {"ACCEPTED": CANDIDATES}
    assert len(landed.single.latencies_ms) == CANDIDATES
    assert landed.single.startup_s > 0 and landed.batched.per_second > 0
    assert landed.batched.peak_rss_mb > 10
    assert len(landed.plain.landed) == CANDIDATES and landed.plain.conflicts == 0
    assert set(landed.checks) == {"one at a time", "batched"}
    assert landed.correct, landed.checks
    assert landed.sequence_problems == []
    assert set(landed.objects_per_landing) == {"one at a time", "batched"}
    assert all(n > 1 for n in landed.objects_per_landing.values())


def test_the_remote_phase_lands_every_candidate_on_the_server(
    tiny: workload.Workload, tmp_path: Path
) -> None:
    """Over a loopback git daemon, the server's queue holds every candidate with git's tree,
    in fewer pushes than landings (a batch is one atomic push)."""
    result = remote_run.remote_phase(tiny, "fleet", tmp_path, None)
    assert result.run.decisions == {"ACCEPTED": CANDIDATES}
    assert result.landed == CANDIDATES
    assert result.check.ok and result.check.checked == CANDIDATES
    assert 1 <= result.pushes < CANDIDATES
    # One fetch and one push per batch: the engine lands on the view the batch fetched.
    assert result.batches >= 1
    assert result.per_batch("fetches") == 1 and result.per_batch("pushes") == 1
    assert result.round_trips_per_batch == 2
    table = targets.target_rows(
        {
            "fleet": phases.fleet(tiny, "fleet", tmp_path / "local"),
            "shared": phases.fleet(tiny, "shared", tmp_path / "shared"),
            "scaling": [],
            "remote": result,
            "stale": phases.stale_flood(tiny, 4, tmp_path / "stale"),
            "floors": [],
            "startup": startup_run.StartupResult(
                {"write inside the contract": startup_run.Timing([30.0], [10.0], [30.0], [10.0])},
                startup_run.Timing(),
                0,
                {"write inside the contract": "allow"},
                startup_run.Timing([100.0], [10.0], [90.0], [9.0]),
                {
                    "--help": startup_run.Timing([60.0], [40.0], [60.0], [40.0]),
                    "status, a daemon serving the spool": startup_run.Timing(
                        [150.0], [40.0], [150.0], [40.0]
                    ),
                },
            ),
        }
    )
    by_metric = {r.metric: r for r in table}
    assert by_metric["fetches / pushes per batch (round trips per batch)"].met == "yes"
    assert by_metric["landed trees = git merge-tree, every run"].met == "yes"
    assert by_metric["stale submissions accepted"].met == "yes"
    guard = by_metric["guard per hook call, allow / python -c pass"]
    assert guard.met == "NO" and guard.integrator == "3.00×" and guard.other  # with a reason
    assert by_metric["serve --once on an empty spool, over python -c pass (s)"].met == "yes"
    assert by_metric["integrator --help, over python -c pass (ms)"].met == "yes"
    status = by_metric["integrator status, a daemon serving the spool, over python -c pass (ms)"]
    assert status.met == "NO" and status.integrator == "110.0"
    assert "integrator --version, over python -c pass (ms)" not in by_metric  # not measured


def test_the_cli_phase_times_help_version_and_the_status_a_daemon_answers(
    tmp_path: Path,
) -> None:
    """One round of each: the rows the start-up target reads, the daemon's answer checked
    (the phase refuses a status the daemon did not answer), and the daemon stopped."""
    timings = startup_run.cli_phase(tmp_path, rounds=1)
    assert set(timings) == {*startup_run.CLI_ROWS, startup_run.STATUS_READ}
    assert all(t.command_ms and t.baseline_ms for t in timings.values())
    assert not (tmp_path / "spool" / "overview.sock").exists()


def test_the_correctness_check_fails_on_a_wrong_tree(
    tiny: workload.Workload, tmp_path: Path
) -> None:
    """A landing whose tree is not git merge-tree's result is reported, and only that one."""
    repo = tiny.copy(tmp_path / "plain.git")
    union_attributes(repo)
    run = baseline.plain_pipeline(repo, tiny.base, tiny.sets["shared"].oids)
    landings = [correctness.Landing(*x) for x in run.landed]
    assert correctness.check_landings(repo, landings).ok
    landings[2] = dataclasses.replace(landings[2], tree=landings[1].tree)
    verdict = correctness.check_landings(repo, landings)
    assert not verdict.ok
    assert len(verdict.mismatches) == 1 and verdict.mismatches[0].startswith("landing 2 ")
    assert not correctness.check_landings(repo, []).ok


def test_merge_tree_reports_conflicts_and_honours_union(
    tiny: workload.Workload, tmp_path: Path
) -> None:
    """Two CHANGELOG appends conflict for git merge-tree unless info/attributes says union."""
    repo = tiny.copy(tmp_path / "conflict.git")
    first, second = tiny.sets["shared"].oids[:2]
    assert correctness.merge_tree_many(repo, [(first, second)]) == [None]
    union_attributes(repo)
    (tree,) = correctness.merge_tree_many(repo, [(first, second)])
    assert tree is not None and len(tree) == 40


def test_a_stale_flood_is_fenced_entirely(tiny: workload.Workload, tmp_path: Path) -> None:
    """Submissions carrying a superseded generation are all FENCED with STALE_GENERATION."""
    run = phases.stale_flood(tiny, 20, tmp_path)
    assert run.decisions == {"FENCED": 20}
    assert run.codes == {"STALE_GENERATION": 20}


def test_the_table_and_json_report_the_run(landed: phases.FleetResult, tmp_path: Path) -> None:
    """Rows carry the figures and targets; the JSON document round-trips."""
    table = rows.fleet_rows(landed, shared=True)
    text = report.render(table)
    assert "landed trees = git merge-tree" in text and "throughput" in text
    correctness_row = next(r for r in table if r.metric == "landed trees = git merge-tree")
    assert correctness_row.met == "yes"
    path = tmp_path / "out.json"
    report.write_json(path, {"fleet": landed, "table": [r.__dict__ for r in table]})
    document = json.loads(path.read_text())
    assert document["fleet"]["candidates"] == CANDIDATES
    assert len(document["fleet"]["single"]["latencies_ms"]) == CANDIDATES


def test_percentiles_use_the_nearest_rank() -> None:
    """p50 of 1..10 is 5, p95 is 10, and no values give NaN rather than an error."""
    values = [float(v) for v in range(10, 0, -1)]
    assert report.percentile(values, 50) == 5
    assert report.percentile(values, 95) == 10
    assert report.summary([])["p50"] != report.summary([])["p50"]  # NaN


def test_scaling_rounds_pool_latencies_per_size(landed: phases.FleetResult) -> None:
    """Interleaved rounds of one size become one result with every latency and every check."""
    (pooled,) = phases.combine([landed, landed])
    assert len(pooled.single.latencies_ms) == 2 * CANDIDATES
    assert set(pooled.checks) == {"round 1", "round 2"} and pooled.correct
    assert len(landed.single.latencies_ms) == CANDIDATES  # the inputs are left alone
