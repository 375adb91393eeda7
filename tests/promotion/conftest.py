from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.promotion_world import PromotionWorld, promotion_world


@pytest.fixture
def promotion(tmp_path: Path) -> Iterator[PromotionWorld]:
    """A canonical repository with a validation script and a spool (processes killed after)."""
    yield from promotion_world(tmp_path)
