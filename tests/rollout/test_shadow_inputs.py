"""`integrator shadow` refuses malformed input as a usage error (exit 2).

A missing or non-UTF-8 --policy file and an unbalanced quote in --command reached the
last-resort handler (exit 4, "unexpected error").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from integrator.cli import main
from integrator.errors import EXIT_USAGE
from tests.rollout_world import make_rollout


@pytest.mark.parametrize("case", ["missing-policy", "binary-policy", "unbalanced-command"])
def test_shadow_refuses_malformed_inputs_as_usage_errors(tmp_path: Path, case: str) -> None:
    world = make_rollout(tmp_path)
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b"\xff\xfe not utf-8")
    args = {
        "missing-policy": ["--policy", str(tmp_path / "missing.toml")],
        "binary-policy": ["--policy", str(bad)],
        "unbalanced-command": ["--command", "'/opt/integrator shadow --decide -"],
    }[case]
    assert main(["shadow", "--repo", str(world.repo), *args]) == EXIT_USAGE
