"""The shadow: every recorded submission decided again — under another policy, or by
another integrator run as a process — and compared with what happened, moving nothing."""

from __future__ import annotations

import json
import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from integrator.records.canonical import Canonical
from integrator.records.claims import Claims
from integrator.rollout.shadow import CommandDecider, run_shadow
from tests.gitutil import git, run_integrator
from tests.gitutil import run_integrator_raw as cli
from tests.rollout_world import Rollout, legacy_contract, make_rollout

DECIDE = f"{shlex.quote(sys.executable)} -m integrator shadow --decide -"


def _history(world: Rollout) -> None:
    """One batch with every kind of decision: clean, observed (source, migrations), fenced
    (ci enforced), a merge conflict onto the batch's own landing, a stale generation, and a
    legacy runner."""
    world.submit(
        "clean", "billing", ["src/billing/**"], {"src/billing/invoice.py": "invoice = 2\n"}
    )
    world.submit(
        "source",
        "auth",
        ["src/auth/**"],
        {"src/auth/login.py": "login = 2\n", "docs/index.md": "# d\n"},
    )
    world.submit(
        "migration", "mig", ["db/migrations/0002.sql"], {"db/migrations/0002.sql": "alter;\n"}
    )
    world.submit("ci", "pipe", ["tools/**"], {"tools/a.sh": "a\n", ".github/ci.yml": "on: push\n"})
    world.submit("first", "gen-a", ["gen/**"], {"gen/client.py": "client = 'a'\n"})
    world.submit(
        "clash", "gen-b", ["gen/**"], {"gen/client.py": "client = 'b'\n"}, force_shared=True
    )
    old = world.issue("docs", ["docs/guide/**"])
    with world.open() as canonical:
        Claims(canonical).reclaim("docs", force=True)
    world.submit("stale", "docs", [], {"docs/guide/a.md": "a\n"}, contract=old)
    legacy = world.issue("legacy", ["src/legacy/**"])
    cand = world.commit(legacy.base_commit, {"src/legacy/x.py": "x\n"})
    world.hand_in("legacy", legacy_contract(legacy), cand)
    world.drain()


@pytest.fixture
def world(tmp_path: Path) -> Rollout:
    w = make_rollout(tmp_path, ci="enforce", codegen="enforce")
    _history(w)
    return w


def _shadow(world: Rollout, *args: str) -> tuple[int, dict[str, Any]]:
    done = run_integrator("shadow", "--repo", str(world.repo), "--json", *args, cwd=world.repo)
    assert done.returncode in (0, 1), done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    return done.returncode, doc


def _mismatched(doc: dict[str, Any]) -> dict[str, list[str]]:
    return {m["key"]: m["differ"] for m in doc["mismatches"]}


def test_the_recorded_history_has_every_kind_of_decision(world: Rollout) -> None:
    """The fixture's batch decided as intended (so the comparisons below mean something)."""
    folders = {label: world.verdict(label)[0] for label in world.sids}
    assert folders == {
        "clean": "accepted", "source": "accepted", "migration": "accepted", "ci": "fenced",
        "first": "accepted", "clash": "fenced", "stale": "fenced", "legacy": "review",
    }  # fmt: skip
    assert world.verdict("clash")[1].codes[0].value == "MERGE_CONFLICT"
    assert world.verdict("clash")[1].queue_head == world.staging("first")


def test_an_identical_policy_reports_zero_mismatches(world: Rollout) -> None:
    """Same policy: every landing's tree and winner, every held verdict's codes and
    determinations come out the same (exit 0)."""
    same = world.policy_file(ci="enforce", codegen="enforce")
    code, doc = _shadow(world, "--policy", str(same))
    assert code == 0
    assert (doc["compared"], doc["landings"], doc["held"]) == (8, 4, 4)
    assert doc["mismatches"] == [] and doc["skipped"] == []


def test_a_stricter_policy_reports_exactly_the_candidates_it_would_fence(world: Rollout) -> None:
    """Enforcing source fences the one landing that wrote an unowned source path, and
    enforcing migrations the one that took an unowned migration slot; nothing else differs."""
    strict = world.policy_file(ci="enforce", codegen="enforce", source="enforce")
    code, doc = _shadow(world, "--policy", str(strict))
    assert code == 1
    assert _mismatched(doc) == {world.staging("source"): ["winner", "decision", "codes"]}
    (only,) = doc["mismatches"]
    assert only["recorded"]["landed"] is True and only["shadow"]["landed"] is False
    assert only["shadow"]["codes"] == [
        {"code": "PATH_NOT_OWNED", "subject": "docs/index.md", "mode": "enforce"}
    ]
    migrations = world.policy_file(ci="enforce", codegen="enforce", migrations="enforce")
    _, doc = _shadow(world, "--policy", str(migrations))
    assert set(_mismatched(doc)) == {world.staging("migration")}
    lenient = world.policy_file()  # ci observed: the fenced ci candidate would have landed
    _, doc = _shadow(world, "--policy", str(lenient))
    assert _mismatched(doc) == {world.sids["ci"]: ["winner", "decision", "codes"]}


def test_another_integrator_run_as_a_command_agrees_and_moves_nothing(world: Rollout) -> None:
    """`--command` runs a real process per submission (`shadow --decide -`), reading its
    verdict; the same version agrees, a stricter policy through it finds the same
    candidate, and neither run moves a ref or adds an object to the canonical repository."""
    refs = git("for-each-ref", "--format=%(objectname) %(refname)", cwd=world.repo)
    objects = git("count-objects", "-v", cwd=world.repo)
    packs = sorted(p.name for p in (world.repo / ".git" / "objects" / "pack").iterdir())
    with world.open() as canonical:
        decider = CommandDecider(DECIDE)
        report = run_shadow(canonical, decider=decider)
    assert report.mismatches == [] and len(report.compared) == 8
    assert decider.calls == 8
    strict = world.policy_file(ci="enforce", codegen="enforce", source="enforce")
    code, doc = _shadow(world, "--policy", str(strict), "--command", DECIDE)
    assert code == 1 and set(_mismatched(doc)) == {world.staging("source")}
    assert git("for-each-ref", "--format=%(objectname) %(refname)", cwd=world.repo) == refs
    assert git("count-objects", "-v", cwd=world.repo) == objects
    assert sorted(p.name for p in (world.repo / ".git" / "objects" / "pack").iterdir()) == packs


def test_a_command_that_disagrees_is_reported_with_both_sides(
    world: Rollout, tmp_path: Path
) -> None:
    """An integrator that fences everything disagrees on every landing and every held
    verdict: exit 1, and the text names each side's decision, tree and codes."""
    other = tmp_path / "other.py"
    other.write_text(
        "import json, sys\n"
        "request = json.load(sys.stdin)\n"
        "print(json.dumps({'schema': 'integrator.verdict.v1', 'decision': 'FENCED',\n"
        "  'violations': [{'code': 'PATH_DENIED', 'path': 'x', 'detail': 'no'}]}))\n"
        "sys.exit(1)\n"
    )
    done = run_integrator("shadow", "--repo", str(world.repo), "--command",
                          f"{shlex.quote(sys.executable)} {other}", cwd=world.repo)  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "compared 8 recorded submissions (4 landings, 4 held): 8 mismatch(es)" in done.stdout
    first = world.staging("clean")
    assert f"✗ landing {first}" in done.stdout
    assert "recorded: ACCEPTED landed=True tree=" in done.stdout
    assert "shadow  : FENCED   landed=False tree=- codes=[PATH_DENIED x]" in done.stdout
    broken = run_integrator(
        "shadow", "--repo", str(world.repo), "--command", "false", cwd=world.repo
    )
    assert broken.returncode == 4 and "--command printed no integrator.verdict.v1" in broken.stderr


def test_the_daemon_compares_every_batch_under_a_shadow_policy(tmp_path: Path) -> None:
    """`serve --once --shadow-policy FILE` (a real process) logs one shadow.mismatch, with
    both sides, for the candidate FILE would fence, and sums up the batch."""
    w = make_rollout(tmp_path)
    w.canon.clock.now = datetime.now(UTC)  # the daemon process reads the real clock
    w.submit("clean", "billing", ["src/billing/**"], {"src/billing/invoice.py": "invoice = 2\n"})
    w.submit(
        "source",
        "auth",
        ["src/auth/**"],
        {"src/auth/login.py": "login = 2\n", "docs/index.md": "# d\n"},
    )
    strict = w.policy_file(source="enforce")
    done = cli("serve", "--once", "--repo", str(w.repo), "--spool", str(w.spool.root),
               "--log-format", "json", "--shadow-policy", str(strict))  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith(b"{")]

    def named(name: str) -> list[dict[str, Any]]:
        return [e for e in events if e.get("event") == name]

    (mismatch,) = named("shadow.mismatch")
    assert mismatch["submission"] == w.sids["source"]
    assert mismatch["differ"] == ["winner", "decision", "codes"]
    assert mismatch["recorded"]["landed"] is True and mismatch["shadow"]["landed"] is False
    (summary,) = named("shadow.compared")
    assert (summary["submissions"], summary["mismatches"]) == (2, 1)
    assert w.verdict("source")[0] == "accepted"  # the shadow only logs


def test_shadow_without_anything_to_compare_with_is_a_usage_error(tmp_path: Path) -> None:
    """Neither --policy nor --command: exit 2 saying what to pass."""
    w = make_rollout(tmp_path)
    done = run_integrator("shadow", "--repo", str(w.repo), cwd=w.repo)
    assert done.returncode == 2 and "--policy FILE and/or --command CMD" in done.stderr
    with Canonical(w.repo) as canonical:  # and an empty history compares nothing
        report = run_shadow(canonical, policy=canonical.policy_state())
        assert report.compared == [] and report.mismatches == []
