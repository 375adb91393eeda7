"""`contract reissue` reissues only what a policy change revoked.

It used to decide that from the free-text revoke reason, which an agent chooses when it
releases its own task (`task release T --reason "policy changed to generation 9"`): the
claim came back live for the same holder. A policy change now records its own event
(`policy-revoke`) in the claim, and reissue requires it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from integrator.cli import main
from integrator.records.claims import Claims
from tests.rollout_world import make_rollout


def test_reissue_refuses_a_claim_no_policy_change_revoked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = make_rollout(tmp_path)
    world.issue("auth", ["src/auth/**"])
    with world.open() as canonical:
        # what Fleet.release(task, reason=<agent text>) does with the agent's --reason
        Claims(canonical).revoke("auth", "policy changed to generation 9; released by agent")
    capsys.readouterr()
    code = main(["contract", "reissue", "--repo", str(world.repo), "--json", "--all"])
    doc = json.loads(capsys.readouterr().out)
    with world.open() as canonical:
        claim = canonical.claim("auth")
        assert claim is not None
        # no policy change ever revoked it: it must stay revoked and nothing be reissued
        assert claim.view.state == "revoked", doc
    assert doc["outcomes"] == [] and code == 0
