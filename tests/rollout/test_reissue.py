"""Restoring service after a policy change: revoked contracts reissued one at a time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from integrator.cli import main
from integrator.documents.contract import OwnershipContract
from integrator.documents.verdict import Code, Decision
from integrator.records.pause import set_pause
from tests.rollout_world import Rollout, make_rollout

TASKS = {"auth": ["src/auth/**"], "billing": ["src/billing/**"], "docs": ["docs/**"]}


@pytest.fixture
def issued(tmp_path: Path) -> dict[str, OwnershipContract]:
    return {}


@pytest.fixture
def rollout(tmp_path: Path, issued: dict[str, OwnershipContract]) -> Rollout:
    """Three live claims (their contracts in `issued`), then `policy set` (source
    enforced) revoked all three."""
    world = make_rollout(tmp_path)
    issued.update({task: world.issue(task, paths) for task, paths in TASKS.items()})
    stricter = world.policy_file(source="enforce")
    assert main(["policy", "set", "--repo", str(world.repo), str(stricter)]) == 0
    return world


def _reissue(
    rollout: Rollout, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, dict[str, object]]:
    code = main(["contract", "reissue", "--repo", str(rollout.repo), "--json", *args])
    doc: dict[str, object] = json.loads(capsys.readouterr().out)
    return code, doc


def test_one_at_a_time_brings_the_tasks_back_one_by_one(
    rollout: Rollout,
    issued: dict[str, OwnershipContract],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """Each run reissues the next task only, with a new generation under the new policy,
    until nothing waits; an agent holding its old contract is fenced all along."""
    capsys.readouterr()
    order = []
    for expected_waiting in (["billing", "docs"], ["docs"], []):
        code, doc = _reissue(rollout, capsys, "--one-at-a-time", "--out-dir", str(tmp_path / "c"))
        assert code == 0
        outcomes = doc["outcomes"]
        assert isinstance(outcomes, list) and len(outcomes) == 1
        order.append(outcomes[0]["taskId"])
        assert outcomes[0]["generation"] == 2
        assert doc["waiting"] == expected_waiting
    assert order == ["auth", "billing", "docs"]
    code, doc = _reissue(rollout, capsys)
    assert (code, doc) == (0, {"outcomes": [], "waiting": []})
    with rollout.open() as canonical:
        live = canonical.policy_state().digest
        for task in TASKS:
            claim = canonical.claim(task)
            assert claim is not None and claim.view.state == "live"
            assert claim.contract.policy_digest == live
            assert claim.contract.attempt_id != issued[task].attempt_id
    old = issued["auth"]
    stale = rollout.commit(old.base_commit, {"src/auth/login.py": "login = 2\n"})
    fenced = rollout.canon.integrate(old, stale)
    assert fenced.decision is Decision.FENCED
    assert Code.STALE_GENERATION in fenced.codes
    fresh = json.loads((tmp_path / "c" / "auth.json").read_text())
    landed = rollout.canon.integrate(json.dumps(fresh).encode(), stale)
    assert landed.decision is Decision.ACCEPTED, landed.codes


def test_a_task_that_now_overlaps_is_refused_and_stays_revoked(
    rollout: Rollout, capsys: pytest.CaptureFixture[str]
) -> None:
    """With --all every waiting task is tried in turn; one whose paths a new live claim took
    meanwhile is refused (exit 0 since others came back) and is still waiting."""
    rollout.issue("billing-v2", ["src/billing/**"])
    capsys.readouterr()
    code, doc = _reissue(rollout, capsys, "--all")
    assert code == 0
    outcomes = {o["taskId"]: o for o in doc["outcomes"]}  # type: ignore[attr-defined]
    assert "overlaps a live claim" in outcomes["billing"]["refused"]
    assert {t for t, o in outcomes.items() if "refused" not in o} == {"auth", "docs"}
    assert doc["waiting"] == ["billing"]
    code, doc = _reissue(rollout, capsys, "--task", "billing")
    assert code == 1  # nothing came back: every one tried was refused
    with rollout.open() as canonical:
        claim = canonical.claim("billing")
        assert claim is not None and claim.view.state == "revoked"


def test_reissue_names_unknown_tasks_and_waits_for_a_pause(
    rollout: Rollout, capsys: pytest.CaptureFixture[str]
) -> None:
    """A task not revoked by a policy change is a usage error; a pause refuses the run."""
    assert main(["contract", "reissue", "--repo", str(rollout.repo), "--task", "nope"]) == 2
    assert "nope" in capsys.readouterr().err
    with rollout.open() as canonical:
        set_pause(canonical, "paused", "incident 3", "rm")
    assert main(["contract", "reissue", "--repo", str(rollout.repo), "--task", "docs"]) == 1
    assert "incident 3" in capsys.readouterr().err
    with rollout.open() as canonical:
        claim = canonical.claim("docs")
        assert claim is not None and claim.view.state == "revoked"
