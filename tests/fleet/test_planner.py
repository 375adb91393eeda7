"""The partition planner: write sets, mechanical edges, ready set, ceiling, rendering."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from integrator.documents.policy import Policy, default_policy, parse_policy
from integrator.fence.overlap import find_overlaps
from integrator.fleet.planner import PlanError, build_plan, expand_writeset, width
from integrator.fleet.tasks import Task, parse_task
from tests.gitutil import run_integrator as integrator


def make_task(
    task_id: str,
    owns: list[str] | None = None,
    *,
    blocked_by: list[str] | None = None,
    resources: list[str] | None = None,
    writes: bool | None = None,
) -> Task:
    owns = owns or []
    lines = [f"id: {task_id}"]
    if owns:
        lines.append("owns: [" + ", ".join(f"'{o}'" for o in owns) + "]")
    if resources:
        lines.append("resources: [" + ", ".join(resources) + "]")
    if blocked_by:
        lines.append("blocked-by: [" + ", ".join(blocked_by) + "]")
    lines.append(
        f"requires_filesystem: {'true' if (bool(owns) if writes is None else writes) else 'false'}"
    )
    return parse_task("---\n" + "\n".join(lines) + f"\n---\n# {task_id}\n")


def policy_with(extra: str) -> Policy:
    return parse_policy("version = 1\n" + extra)


def test_disjoint_tasks_all_run_at_once() -> None:
    """Disjoint write sets give no edges, everything ready, ceiling = number of tasks."""
    tasks = [
        make_task("A", ["src/a/**"]),
        make_task("B", ["src/b/**"]),
        make_task("C", ["docs/**"]),
    ]
    plan = build_plan(tasks, default_policy())
    assert plan.edges == ()
    assert plan.ready == ("A", "B", "C")
    assert plan.ceiling == 3


def test_overlapping_pair_gets_one_edge_from_the_earlier_task() -> None:
    """An overlapping pair is blocked from the earlier id, so only one of them is ready."""
    plan = build_plan(
        [make_task("B", ["src/b/x.py"]), make_task("A", ["src/**"])], default_policy()
    )
    assert [(e.blocker, e.blocked) for e in plan.edges] == [("A", "B")]
    assert plan.ready == ("A",)
    assert "overlaps" in plan.waiting["B"][0]


def test_shared_resource_makes_an_edge_unless_policy_shares_it() -> None:
    """Two tasks claiming one semantic resource conflict; a policy-shared one does not."""
    tasks = [
        make_task("A", ["src/a/**"], resources=["api:Invoice.v2"]),
        make_task("B", ["src/b/**"], resources=["api:Invoice.v2"]),
    ]
    assert len(build_plan(tasks, default_policy()).edges) == 1
    shared = policy_with('[shared]\nresources = ["api:Invoice.v2"]\n')
    assert build_plan(tasks, shared).edges == ()


def test_lockfile_regenerated_from_both_manifests_serialises_them() -> None:
    """Two tasks that both trigger one lockfile update overlap though edits do not."""
    policy = policy_with('[[writeset]]\ninputs = ["pyproject.toml"]\noutputs = ["/uv.lock"]\n')
    a = make_task("A", ["services/a/pyproject.toml"])
    b = make_task("B", ["services/b/pyproject.toml"])
    assert "/uv.lock" in expand_writeset(a, policy).patterns
    plan = build_plan([a, b], policy)
    assert [(e.blocker, e.blocked) for e in plan.edges] == [("A", "B")]
    assert plan.ceiling == 1


def test_default_policy_places_lockfiles_beside_their_manifest() -> None:
    """With the default policy a root pyproject.toml owns the root lockfiles and their resources."""
    ws = expand_writeset(make_task("A", ["/pyproject.toml"]), default_policy())
    assert ws.patterns[:2] == ("/pyproject.toml", "/uv.lock")
    assert "lockfile:uv.lock" in ws.resources
    folder = expand_writeset(make_task("B", ["packages/billing/**"]), default_policy())
    assert folder.patterns == ("packages/billing/**",)  # nested lockfiles are already owned


def test_schema_change_owns_the_generated_client() -> None:
    """`schema/**` → generated client: a schema task and a client task are serialised."""
    policy = policy_with('[[writeset]]\ninputs = ["schema/**"]\noutputs = ["clients/gen/**"]\n')
    schema_task = make_task("A", ["schema/invoice.graphql"])
    client_task = make_task("B", ["clients/gen/invoice.ts"])
    entry = expand_writeset(schema_task, policy).entry("clients/gen/**")
    assert entry is not None and entry.origin == "generated"
    assert len(build_plan([schema_task, client_task], policy).edges) == 1


def test_repo_wide_file_serialises_everything_and_is_named_as_hot_path() -> None:
    """A repo-wide changelog drops the ceiling to 1 and is the first path to split."""
    policy = policy_with('[planner]\nrepo_wide = ["/CHANGELOG.md"]\n')
    tasks = [make_task(t, [f"src/{t.lower()}/**"]) for t in ("A", "B", "C", "D")]
    plan = build_plan(tasks, policy, fleet=4)
    assert plan.ceiling == 1
    assert plan.ready == ("A",)
    assert plan.split[0].pattern == "/CHANGELOG.md"
    assert "downstream" in plan.split[0].advice


def test_no_split_advice_when_the_fleet_fits() -> None:
    """Hot paths are reported only when the ceiling is below the fleet."""
    plan = build_plan(
        [make_task("A", ["src/**"]), make_task("B", ["src/x.py"])], default_policy(), fleet=1
    )
    assert plan.split == ()


def test_ceiling_is_the_widest_antichain_not_the_ready_count() -> None:
    """A→B→C with D disjoint: A and C never run together, so the ceiling is 2."""
    tasks = [
        make_task("A", ["src/a/**", "lib/x.py"]),
        make_task("B", ["lib/**"]),
        make_task("C", ["lib/y.py"]),
        make_task("D", ["docs/**"]),
    ]
    plan = build_plan(tasks, default_policy())
    assert plan.ceiling == 2
    assert width(["a", "b", "c"], []) == 3
    assert width(["a", "b", "c", "d"], [("a", "c"), ("b", "d")]) == 2


def test_declared_edge_orders_an_overlapping_pair_against_the_ids() -> None:
    """A declared blocked-by wins the stable order, so the derived edge follows it (no cycle)."""
    tasks = [make_task("A", ["src/**"], blocked_by=["Z"]), make_task("Z", ["src/x.py"])]
    plan = build_plan(tasks, default_policy())
    assert plan.order == ("Z", "A")
    assert [(e.blocker, e.blocked, e.declared) for e in plan.edges] == [("Z", "A", True)]
    assert plan.edges[0].overlaps


def test_done_blockers_are_resolved_and_unknown_ones_refused() -> None:
    """A blocker that is done resolves; a blocker nobody knows is an error."""
    task = make_task("B", ["src/**"], blocked_by=["A"])
    assert build_plan([task], default_policy(), done=["A"]).ready == ("B",)
    with pytest.raises(PlanError, match="unknown task A"):
        build_plan([task], default_policy())


def test_declared_cycle_is_refused() -> None:
    """blocked-by edges that form a cycle cannot be planned."""
    tasks = [make_task("A", blocked_by=["B"]), make_task("B", blocked_by=["A"])]
    with pytest.raises(PlanError, match="cycle"):
        build_plan(tasks, default_policy())


def test_undecomposed_tasks_are_all_refused_at_once() -> None:
    """Every task whose owns cannot be written is named in one refusal."""
    tasks = [make_task("A", writes=True), make_task("B", ["**"])]
    with pytest.raises(PlanError) as err:
        build_plan(tasks, default_policy())
    assert len(err.value.problems) == 2


def test_running_task_blocks_an_overlapping_task_ordered_before_it() -> None:
    """A task added later with an earlier id still waits for the running one it overlaps."""
    running = make_task("B", ["src/**"])
    late = make_task("A", ["src/a.py"], blocked_by=[])
    first = make_task("C", ["docs/**"], blocked_by=[])
    plan = build_plan([late, first], default_policy(), running=[running])
    assert plan.running == ("B",)
    assert plan.ready == ("C",)
    assert any("B" in why for why in plan.waiting["A"])


def test_unanchored_owned_pattern_warns() -> None:
    """`pyproject.toml` without a slash matches at any depth, and the plan says so."""
    plan = build_plan([make_task("A", ["pyproject.toml"])], default_policy())
    assert any("/pyproject.toml" in w for w in plan.warnings)


paths = st.sampled_from(
    ["src/**", "src/a/**", "src/a/x.py", "src/b/**", "docs/**", "docs/x.md", "*.env",
     "/pyproject.toml", "lib/*.py", "lib/c/**", "tests/**"]
)  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(paths, min_size=1, max_size=3), min_size=1, max_size=7))
def test_every_overlapping_pair_has_an_edge_and_edges_never_cycle(owns: list[list[str]]) -> None:
    """Property: each overlapping pair is directly ordered, edges follow the order, no two
    overlapping tasks are ready together."""
    tasks = [make_task(f"T{i}", o) for i, o in enumerate(owns)]
    plan = build_plan(tasks, default_policy())
    position = {t: i for i, t in enumerate(plan.order)}
    pairs = {(e.blocker, e.blocked) for e in plan.edges}
    assert all(position[a] < position[b] for a, b in pairs)
    for i, a in enumerate(plan.order):
        for b in plan.order[i + 1 :]:
            wa, wb = plan.writesets[a], plan.writesets[b]
            if find_overlaps(wa.patterns, wa.resources, wb.patterns, wb.resources):
                assert (a, b) in pairs
                assert not (a in plan.ready and b in plan.ready)
    assert 1 <= plan.ceiling <= len(tasks)


def write_tasks(folder: Path, tasks: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in tasks.items():
        (folder / f"{name}.md").write_text(text, encoding="utf-8")
    return folder


def test_plan_command_renders_json_mermaid_and_dot(tmp_path: Path) -> None:
    """`integrator plan` prints the plan as JSON, Mermaid and DOT with the same edge."""
    folder = write_tasks(
        tmp_path / "tasks",
        {
            "A": "---\nid: A\nowns: [src/**]\nrequires_filesystem: true\n---\n# Refactor src\n",
            "B": "---\nid: B\nowns: [src/x.py]\nrequires_filesystem: true\n---\n# Fix x\n",
        },
    )
    out = integrator("plan", str(folder), "--json", "--fleet", "2", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["ready"] == ["A"] and doc["ceiling"] == 1
    assert doc["edges"][0]["from"] == "A" and doc["split"]
    mermaid = integrator("plan", str(folder), "--format", "mermaid", cwd=tmp_path).stdout
    assert mermaid.startswith("flowchart TD") and "n0 -. overlap .-> n1" in mermaid
    dot = integrator("plan", str(folder), "--format", "dot", cwd=tmp_path).stdout
    assert '"A" -> "B" [style=dashed' in dot


def test_plan_command_refuses_an_undecomposed_task(tmp_path: Path) -> None:
    """A writing task without owns makes `integrator plan` exit 2 and say why."""
    folder = write_tasks(
        tmp_path / "tasks", {"A": "---\nid: A\nrequires_filesystem: true\n---\n# Everything\n"}
    )
    out = integrator("plan", str(folder), cwd=tmp_path)
    assert out.returncode == 2
    assert "not yet decomposed enough" in out.stderr
