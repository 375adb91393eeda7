"""The parsed-tree cache is bounded by the entries it holds, not by the trees: a folder that
grows by one file per landing (the root of a repository where each task adds a folder) is
parsed again at every landing, each copy larger than the last."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pygit2
import pytest

from integrator.fence import trees
from integrator.fence.trees import TreeReader


def _growing_trees(path: Path, count: int) -> list[pygit2.Oid]:
    """`count` trees, the i-th holding i + 1 files (each one more than the one before)."""
    repo = pygit2.init_repository(str(path), bare=True)
    blob = repo.create_blob(b"x\n")
    out = []
    builder = repo.TreeBuilder()
    for i in range(count):
        builder.insert(f"s{i:04d}.txt", blob, pygit2.enums.FileMode.BLOB)
        out.append(builder.write())
    return out


def test_the_cache_holds_at_most_its_entries_and_keeps_the_newest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(trees, "CACHE_ENTRIES", 500)
    oids = _growing_trees(tmp_path / "r.git", 120)  # 7,260 entries in all
    reader = TreeReader(pygit2.Repository(str(tmp_path / "r.git")))
    for oid in oids:
        entries = reader.entries(oid.raw)
        assert 0 < reader.cache.held <= 500
        # What is read is what git lists, cached or not (git is the oracle).
        listed = subprocess.run(
            ["git", "ls-tree", "-z", str(oid)], cwd=tmp_path / "r.git",
            capture_output=True, check=True,
        ).stdout.split(b"\0")  # fmt: skip
        assert sorted(name for _, name, _ in entries) == sorted(
            line.split(b"\t", 1)[1] for line in listed if line
        )
    # The newest trees stayed (the least recently used leave first): the last four fit.
    assert all(oid.raw in reader.cache for oid in oids[-4:])
    assert oids[0].raw not in reader.cache


def test_a_tree_read_again_is_the_last_to_leave(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The base tree every candidate of a batch starts from stays while others pass by."""
    monkeypatch.setattr(trees, "CACHE_ENTRIES", 100)
    oids = _growing_trees(tmp_path / "r.git", 40)
    parsed: list[bytes] = []

    def unwritten(oid: bytes) -> bytes | None:  # no pending objects: records each parse
        parsed.append(oid)
        return None

    reader = TreeReader(pygit2.Repository(str(tmp_path / "r.git")), unwritten)
    base = oids[19]  # 20 entries
    reader.entries(base.raw)
    for oid in oids[:15]:  # 120 entries pass through, the base read between each
        reader.entries(oid.raw)
        reader.entries(base.raw)
    assert parsed.count(base.raw) == 1  # parsed once, never evicted
    assert oids[0].raw not in reader.cache


def test_a_tree_larger_than_the_bound_is_still_read_and_kept_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(trees, "CACHE_ENTRIES", 10)
    oids = _growing_trees(tmp_path / "r.git", 30)
    reader = TreeReader(pygit2.Repository(str(tmp_path / "r.git")))
    reader.entries(oids[3].raw)
    assert len(reader.entries(oids[29].raw)) == 30
    assert len(reader.cache) == 1 and oids[29].raw in reader.cache and reader.cache.held == 30
