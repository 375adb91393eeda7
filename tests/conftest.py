from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.daemon_world import world
from tests.gitutil import GIT_ENV
from tests.remote_world import remote

# Fixtures for every module: a canonical repository with a spool (world), and a canonical
# repository with an intake on a real git daemon (remote).
__all__ = ["remote", "world"]


@pytest.fixture(autouse=True)
def _pinned_git_env() -> Iterator[None]:
    """Pin git identities and dates and ignore the machine's git configuration."""
    saved = {k: os.environ.get(k) for k in GIT_ENV}
    os.environ.update(GIT_ENV)
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
