"""The system soak's own parts (drills/d_soak.py), without running it: its duration, and
that the drill runs only when named."""

from __future__ import annotations

import pytest

from drills.catalog import ordered
from drills.d_soak import duration


def test_a_duration_is_seconds_or_has_a_unit() -> None:
    assert duration("120") == 120.0
    assert duration("90s") == 90.0
    assert duration(" 30m ") == 1800.0
    assert duration("1.5h") == 5400.0
    for bad in ("", "m", "-5", "10d", "1e3", None):
        with pytest.raises(ValueError, match="not a duration"):
            duration(bad)


def test_the_soak_runs_only_when_named() -> None:
    alone = {d.name for d in ordered() if d.alone}
    assert alone == {"soak-system"}
    assert not {d.name for d in ordered() if d.full_only}  # the team drill is in every run
