"""Observe mode that reports: a week of submissions, what would have been fenced, false
positives marked in git, and which categories are ready for enforce."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from integrator import refnames
from integrator.cli import main
from tests.factories import NOW
from tests.gitutil import git, run_integrator
from tests.rollout_world import Rollout, legacy_contract, make_rollout

# (label, task, owned paths, files): one day each; every category has something unowned.
WEEK: list[list[tuple[str, str, list[str], dict[str, str]]]] = [
    [
        ("clean-1", "billing", ["src/billing/**"], {"src/billing/invoice.py": "invoice = 2\n"}),
        (
            "migration",
            "mig",
            ["db/migrations/0002_add.sql"],
            {"db/migrations/0002_add.sql": "alter;\n"},
        ),
    ],
    [("schema", "api", ["src/api/**"], {"src/api/v.py": "v = 1\n", "schema/invoice.json": "{}\n"})],
    [
        (
            "codegen",
            "gen",
            ["src/gen.py"],
            {"src/gen.py": "g = 1\n", "gen/client.py": "client = 2\n"},
        )
    ],
    [("ci", "pipeline", ["tools/**"], {"tools/run.sh": "run\n", ".github/ci.yml": "on: push\n"})],
    [
        (
            "source",
            "auth",
            ["src/auth/**"],
            {"src/auth/login.py": "login = 2\n", "docs/index.md": "# d\n"},
        )
    ],
    [("clean-2", "docs", ["docs/**"], {"docs/guide.md": "# guide\n"})],
    [("clean-3", "readme", ["README.md"], {"README.md": "# readme\n"})],
]


@pytest.fixture
def week(tmp_path: Path) -> Rollout:
    """Seven days on the fake clock, every category observed, the daemon draining daily;
    on the last day a legacy runner hands in a candidate without a generation."""
    world = make_rollout(tmp_path)
    for day in WEEK:
        for label, task, paths, files in day:
            world.submit(label, task, paths, files)
        world.drain()
        world.canon.clock.advance(24 * 60)
    contract = world.issue("legacy", ["src/legacy/**"])
    old = world.commit(contract.base_commit, {"src/legacy/x.py": "x = 1\n"})
    world.hand_in("legacy", legacy_contract(contract), old)
    world.drain()
    return world


def _report(world: Rollout, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    assert main(["report", "observe", "--repo", str(world.repo), "--json", *extra]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def _by_category(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["category"]: c for c in doc["categories"]}


def test_a_week_in_observe_mode_reports_what_would_have_been_fenced(
    week: Rollout, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every candidate landed; the report names, per category and code, exactly the
    landings that broke ownership, each under its staging commit, and all five
    categories are ready (no false positives) in rollout order."""
    for label in ("clean-1", "migration", "schema", "codegen", "ci", "source", "clean-2"):
        assert week.verdict(label)[0] == "accepted", label
    capsys.readouterr()
    doc = _report(week, capsys)
    assert doc["examined"] == {"landings": 8, "held": 1}
    cats = _by_category(doc)
    found = {
        (name, code["code"]): [
            (f["taskId"], f["path"] or f["resource"], f["key"]) for f in code["candidates"]
        ]
        for name, c in cats.items()
        for code in c["codes"]
    }
    assert found == {
        ("migrations", "RESOURCE_NOT_OWNED"): [
            ("mig", "migration-slot:db/migrations/0002_add.sql", week.staging("migration"))
        ],
        ("schemas", "PATH_NOT_OWNED"): [("api", "schema/invoice.json", week.staging("schema"))],
        ("codegen", "PATH_NOT_OWNED"): [("gen", "gen/client.py", week.staging("codegen"))],
        ("ci", "PATH_NOT_OWNED"): [("pipeline", ".github/ci.yml", week.staging("ci"))],
        ("source", "PATH_NOT_OWNED"): [("auth", "docs/index.md", week.staging("source"))],
    }
    assert all(c["wouldBeFenced"] == 1 and c["falsePositives"] == 0 for c in cats.values())
    assert doc["ready"] == ["migrations", "schemas", "codegen", "ci", "source"]
    assert doc["next"] == "migrations"
    legacy = doc["legacy"]
    assert [(x["submission"], x["taskId"], x["state"]) for x in legacy] == [
        (week.sids["legacy"], "legacy", "held")
    ]


def test_marking_false_positives_changes_which_categories_are_ready(
    week: Rollout, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mark (recorded in git with who and why) takes its category out of the ready list;
    withdrawing it puts the category back; a mark names a landing by a prefix."""
    staging = week.staging("schema")
    repo = str(week.repo)
    assert main(["review", "mark-false-positive", staging[:10], "--repo", repo,
                 "--reason", "schema/ is generated from src/api", "--actor", "rm-bob"]) == 0  # fmt: skip
    assert main(["review", "mark-false-positive", week.staging("ci"), "--repo", repo,
                 "--reason", "only PATH_DENIED is wrong", "--code", "PATH_DENIED"]) == 0  # fmt: skip
    capsys.readouterr()
    doc = _report(week, capsys)
    cats = _by_category(doc)
    assert cats["schemas"]["falsePositives"] == 1 and not cats["schemas"]["ready"]
    assert cats["ci"]["falsePositives"] == 0  # the mark names a code the finding is not
    assert doc["ready"] == ["migrations", "codegen", "ci", "source"]
    mark = cats["schemas"]["codes"][0]["candidates"][0]["falsePositive"]
    assert mark["actor"] == "rm-bob" and mark["reason"] == "schema/ is generated from src/api"
    message = git("log", "-1", "--format=%B", refnames.FALSE_POSITIVES + staging, cwd=week.repo)
    assert message.startswith(f"false positive: landing {staging} (all codes)")
    assert "schema/ is generated from src/api" in message
    assert main(["review", "mark-false-positive", staging, "--repo", repo, "--withdraw",
                 "--reason", "it was a real violation after all"]) == 0  # fmt: skip
    capsys.readouterr()
    assert _report(week, capsys)["ready"] == ["migrations", "schemas", "codegen", "ci", "source"]
    assert git("rev-list", "--count", refnames.FALSE_POSITIVES + staging, cwd=week.repo) == "2"


def test_since_and_enforced_categories(week: Rollout, capsys: pytest.CaptureFixture[str]) -> None:
    """`--since` keeps only later decisions; once ci is enforced a ci violation is fenced
    (held), counted as fenced, and a category in enforce is never "ready"."""
    assert main(["policy", "enforce", "ci", "--repo", str(week.repo), "--reason", "0 FP"]) == 0
    week.submit("ci-late", "pipeline-2", ["tools2/**"], {"tools2/a": "a\n", ".github/x.yml": "x\n"})
    week.drain()
    assert week.verdict("ci-late")[0] == "fenced"
    capsys.readouterr()
    since = (NOW.replace(day=NOW.day + 6)).isoformat()
    doc = _report(week, capsys, "--since", since)
    cats = _by_category(doc)
    assert doc["examined"] == {"landings": 1, "held": 2}
    assert cats["ci"]["mode"] == "enforce" and not cats["ci"]["ready"]
    assert (cats["ci"]["fenced"], cats["ci"]["wouldBeFenced"]) == (1, 0)
    assert "ci" not in doc["ready"]
    sid = week.sids["ci-late"]
    assert main(["review", "mark-false-positive", sid, "--repo", str(week.repo),
                 "--reason", "a false block"]) == 0  # fmt: skip
    capsys.readouterr()
    assert _by_category(_report(week, capsys))["ci"]["falsePositives"] == 1


def test_the_text_report_and_a_mark_that_names_nothing(week: Rollout) -> None:
    """The report a person reads (a real process) has the table, the candidates, the
    ready list, the next step and the legacy runner; marking an unknown id is exit 2."""
    done = run_integrator("report", "observe", "--repo", str(week.repo), cwd=week.repo)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "migrations   observe            1      0          0  ready for enforce" in out
    assert "ready for enforce, in order: migrations, schemas, codegen, ci, source" in out
    assert "next: integrator policy enforce migrations" in out
    assert f"  {week.sids['legacy']}  held" in out
    assert "legacy submissions (no ownership generation; review only): 1" in out
    wrong = run_integrator("review", "mark-false-positive", "feedface", "--repo", str(week.repo),
                           "--reason", "x", cwd=week.repo)  # fmt: skip
    assert wrong.returncode == 2
    assert "names no held submission and no landing" in wrong.stderr


def test_the_report_reads_records_folded_into_the_archive(
    week: Rollout, capsys: pytest.CaptureFixture[str]
) -> None:
    """After `refs archive` folds the consumed claims away, every landing is still found
    with its contract (the claim chains are read from the archive): the same findings."""
    capsys.readouterr()
    before = _report(week, capsys)
    assert main(["refs", "archive", "--repo", str(week.repo), "--older-than", "0s"]) == 0
    capsys.readouterr()
    assert git("for-each-ref", "refs/integrator/claims/mig", cwd=week.repo) == ""
    after = _report(week, capsys)
    assert after["categories"] == before["categories"] and after["skipped"] == []
