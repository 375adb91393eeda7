"""The end-to-end suite is collected by `make e2e` (marker `e2e`) and skipped by `make test`."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e


def test_install_script_is_executable() -> None:
    """`make e2e` starts with tests/e2e/install.sh, which must be runnable."""
    script = Path(__file__).with_name("install.sh")
    assert script.is_file() and script.stat().st_mode & 0o111
