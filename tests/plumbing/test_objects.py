"""Objects written in packs are exactly the objects git would have written."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pygit2

from integrator.plumbing.packs import (
    ObjectBuffer,
    Repacker,
    commit_bytes,
    flush_loose,
    maybe_repack,
    object_id,
    tree_bytes,
)
from tests.gitutil import git, make_repo


def test_ids_match_git_hash_object(tmp_path: Path) -> None:
    """object_id agrees with `git hash-object` for a blob."""
    repo = make_repo(tmp_path / "r")
    data = b"hello\n" * 50
    assert object_id("blob", data).hex() == git("hash-object", "--stdin", cwd=repo, input=data)


def test_flushed_pack_is_readable_by_git_and_libgit2(tmp_path: Path) -> None:
    """A flushed pack passes `git fsck`, `git verify-pack`, and libgit2 reads every object."""
    path = make_repo(tmp_path / "r")
    repo = pygit2.Repository(str(path))
    buffer = ObjectBuffer(repo)
    big = bytes(range(256)) * 300  # several kB: a multi-byte pack header
    blob = buffer.add("blob", big)
    small = buffer.add("blob", b"x\n")
    inner = buffer.add("tree", tree_bytes({b"b.txt": (b"100644", small)}))
    root = buffer.add(
        "tree",
        tree_bytes(
            {b"a": (b"40000", inner), b"a.txt": (b"100644", blob), b"run": (b"100755", small)}
        ),
    )
    sig = pygit2.Signature("A U Thor", "a@example.invalid", 1_700_000_000, 120)
    commit = buffer.add("commit", commit_bytes(root, [], sig, sig, "packed\n\nbody\n"))
    assert buffer.read(blob) == big
    pack = buffer.flush()
    assert pack is not None
    assert buffer.pending == {}
    git("update-ref", "refs/heads/main", commit.hex(), cwd=path)
    git("fsck", "--strict", "--no-dangling", cwd=path)
    git("verify-pack", str(pack.with_suffix(".idx")), cwd=path)
    blob_out = subprocess.run(
        ["git", "cat-file", "blob", f"{commit.hex()}:a.txt"],
        cwd=path,
        capture_output=True,
        check=True,
    )
    assert blob_out.stdout == big
    listing = git("ls-tree", "-r", commit.hex(), cwd=path)
    assert "100755 blob" in listing
    assert "a/b.txt" in listing
    fresh = pygit2.Repository(str(path))
    loaded = fresh[pygit2.Oid(raw=commit)]
    assert isinstance(loaded, pygit2.Commit)
    assert loaded.author.offset == 120
    assert loaded.message == "packed\n\nbody\n"
    # The same commit built by pygit2 has the same id: the bytes are canonical.
    same = fresh.create_commit(None, sig, sig, "packed\n\nbody\n", pygit2.Oid(raw=root), [])
    assert same.raw == commit


def test_loose_flush_writes_the_same_ids(tmp_path: Path) -> None:
    """flush_loose writes each pending object where libgit2 finds it, under the same id."""
    path = make_repo(tmp_path / "r")
    repo = pygit2.Repository(str(path))
    buffer = ObjectBuffer(repo)
    oid = buffer.add("blob", b"loose\n")
    flush_loose(buffer)
    assert buffer.pending == {}
    assert git("cat-file", "-t", oid.hex(), cwd=path) == "blob"
    assert list((path / ".git" / "objects" / "pack").glob("*.pack")) == []


def test_many_small_packs_are_merged(tmp_path: Path) -> None:
    """Past the threshold, maybe_repack merges small packs and every object stays readable."""
    path = make_repo(tmp_path / "r")
    repo = pygit2.Repository(str(path))
    oids = []
    for i in range(12):
        buffer = ObjectBuffer(repo)
        oids.append(buffer.add("blob", f"object {i}\n".encode()))
        buffer.flush()
    packs = path / ".git" / "objects" / "pack"
    assert len(list(packs.glob("*.idx"))) == 12
    assert not maybe_repack(repo, threshold=20)
    assert maybe_repack(repo, threshold=10)
    assert len(list(packs.glob("*.idx"))) < 12
    for oid in oids:
        assert git("cat-file", "-t", oid.hex(), cwd=path) == "blob"


def _packs(repo: pygit2.Repository, count: int, tag: str) -> list[bytes]:
    oids = []
    for i in range(count):
        buffer = ObjectBuffer(repo)
        oids.append(buffer.add("blob", f"{tag} {i}\n".encode()))
        buffer.flush()
    return oids


def test_background_repack_runs_beside_writers(tmp_path: Path) -> None:
    """The daemon's repacker only starts a child; packs written meanwhile survive it."""
    path = make_repo(tmp_path / "r")
    repo = pygit2.Repository(str(path))
    packs = path / ".git" / "objects" / "pack"
    before = _packs(repo, 12, "before")
    repacker = Repacker(background=True, threshold=10)
    assert repacker.poke(repo)
    child = repacker.child
    assert child is not None and repacker.started == 1
    assert not repacker.poke(repo)  # one child at a time, whatever the count
    during = _packs(repo, 3, "during")  # the landing goes on while git repacks
    child.wait()
    assert not repacker.poke(repo)  # reaps it: 15 packs became fewer than the threshold
    assert repacker.child is None and repacker.failed == 0
    assert len(list(packs.glob("*.idx"))) <= 10
    for oid in before + during:
        assert git("cat-file", "-t", oid.hex(), cwd=path) == "blob"
        assert pygit2.Oid(raw=oid) in repo  # libgit2 after its reopen
    assert git("fsck", "--no-dangling", cwd=path) == ""


def test_inline_repacker_and_a_failed_child(tmp_path: Path) -> None:
    """Inline, poke repacks before returning; a child that fails is counted, packs kept."""
    path = make_repo(tmp_path / "r")
    repo = pygit2.Repository(str(path))
    packs = path / ".git" / "objects" / "pack"
    oids = _packs(repo, 12, "x")
    inline = Repacker(background=False, threshold=10)
    assert inline.poke(repo) and inline.child is None
    assert len(list(packs.glob("*.idx"))) < 12
    _packs(repo, 12, "y")
    count = len(list(packs.glob("*.idx")))
    broken = Repacker(background=True, threshold=10)
    (path / ".git" / "config").write_text("not a config\n")  # git refuses to start
    assert broken.poke(repo)
    broken.close(repo)
    assert broken.failed == 1 and broken.child is None
    assert len(list(packs.glob("*.idx"))) == count
    for oid in oids:
        assert pygit2.Oid(raw=oid) in repo
