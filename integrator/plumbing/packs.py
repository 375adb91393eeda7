"""Writing git objects in packs instead of one file each.

libgit2 writes every object as its own loose file (a temporary file, zlib, a rename), and
a landing writes about a dozen: rebuilt folder trees, the staging commit, the consumed
claim. On a busy disk that file churn, not the computation, is most of a landing's cost.
`ObjectBuffer` hashes objects in memory (the ids are git's: SHA-1 over `<type> <size>\\0`
and the content) and `flush` writes them as one pack with its version-2 index, the format
`git index-pack` produces; libgit2 and git find a new pack on their next lookup. Flushes
write without fsync: a landing's `git.sync_objects` (one syncfs) runs before its ref
transaction, so no ref ever names an object that is not on disk.
"""

from __future__ import annotations

import hashlib
import os
import struct
import zlib
from pathlib import Path

import pygit2
import structlog

from integrator.caches import Bounded
from integrator.errors import IntegratorError
from integrator.files import atomic_write
from integrator.plumbing.git import GitProcess, common_dir, open_git, run_git

log = structlog.get_logger("integrator.packs")

_TYPES = {"commit": 1, "tree": 2, "blob": 3}
RECENT_BYTES = 8 * 1024 * 1024  # raw trees of the last flushes kept readable from memory
_TREE_MODE = b"40000"


def object_id(kind: str, data: bytes) -> bytes:
    """git's id of an object: SHA-1 over `<type> <size>\\0<content>` (raw 20 bytes)."""
    return hashlib.sha1(b"%s %d\x00" % (kind.encode(), len(data)) + data).digest()


def tree_bytes(entries: dict[bytes, tuple[bytes, bytes]]) -> bytes:
    """The raw tree for {name: (octal mode, raw id)}, in git's order (folders sort as `name/`)."""

    def key(name: bytes) -> bytes:
        return name + b"/" if entries[name][0] == _TREE_MODE else name

    return b"".join(
        entries[name][0] + b" " + name + b"\x00" + entries[name][1]
        for name in sorted(entries, key=key)
    )


def _signature(sig: pygit2.Signature) -> bytes:
    offset = sig.offset
    sign = "-" if offset < 0 else "+"
    offset = abs(offset)
    return b"%s <%s> %d %s%02d%02d" % (
        sig.raw_name,
        sig.raw_email,
        sig.time,
        sign.encode(),
        offset // 60,
        offset % 60,
    )


def commit_bytes(
    tree: bytes,
    parents: list[bytes],
    author: pygit2.Signature,
    committer: pygit2.Signature,
    message: str,
) -> bytes:
    """The raw commit object git would write for these fields (UTF-8 message)."""
    lines = [b"tree " + tree.hex().encode()]
    lines.extend(b"parent " + p.hex().encode() for p in parents)
    lines.append(b"author " + _signature(author))
    lines.append(b"committer " + _signature(committer))
    return b"\n".join(lines) + b"\n\n" + message.encode("utf-8")


def _pack_header(kind: int, size: int) -> bytes:
    first = (kind << 4) | (size & 0x0F)
    size >>= 4
    out = bytearray()
    while size:
        out.append(first | 0x80)
        first = size & 0x7F
        size >>= 7
    out.append(first)
    return bytes(out)


class ObjectBuffer:
    """Objects hashed in memory, readable at once, written to the repository as one pack."""

    def __init__(self, repo: pygit2.Repository) -> None:
        self.repo = repo
        self.pending: dict[bytes, tuple[str, bytes]] = {}
        # Recently flushed trees stay readable from memory: the next landing of a batch
        # reads the trees this one wrote, and a miss makes libgit2 rescan the pack folder.
        # Bounded by their bytes: a root tree grows by an entry per landing.
        self.recent: Bounded[bytes, bytes] = Bounded(RECENT_BYTES, cost=len)
        self.packs_written = 0
        self.objects_written = 0

    def add(self, kind: str, data: bytes) -> bytes:
        """Store an object and return its raw id.

        No existence check against the repository: for a new object that lookup misses,
        and every miss rescans the pack folder. An object written twice is harmless.
        """
        oid = object_id(kind, data)
        if oid not in self.pending:
            self.pending[oid] = (kind, data)
        return oid

    def read(self, oid: bytes) -> bytes | None:
        """The content of a pending or recently flushed object, else None."""
        found = self.pending.get(oid)
        if found is not None:
            return found[1]
        return self.recent.get(oid)

    def flush(self) -> Path | None:
        """Write every pending object into one pack (and its index); None if nothing pends."""
        if not self.pending:
            return None
        folder = common_dir(self.repo) / "objects" / "pack"
        folder.mkdir(parents=True, exist_ok=True)
        body = bytearray(b"PACK" + struct.pack(">II", 2, len(self.pending)))
        index: list[tuple[bytes, int, int]] = []  # (oid, crc32, offset)
        for oid, (kind, data) in self.pending.items():
            offset = len(body)
            record = _pack_header(_TYPES[kind], len(data)) + zlib.compress(data, 1)
            body += record
            index.append((oid, zlib.crc32(record), offset))
        if len(body) >= 2**31:
            raise ValueError("pack too large for 32-bit offsets")  # never, at batch sizes
        checksum = hashlib.sha1(body).digest()
        body += checksum
        index.sort()
        fanout = [0] * 256
        for oid, _, _ in index:
            fanout[oid[0]] += 1
        total = 0
        for i in range(256):
            total += fanout[i]
            fanout[i] = total
        idx = bytearray(b"\xfftOc" + struct.pack(">I", 2))
        idx += struct.pack(">256I", *fanout)
        idx += b"".join(oid for oid, _, _ in index)
        idx += b"".join(struct.pack(">I", crc) for _, crc, _ in index)
        idx += b"".join(struct.pack(">I", off) for _, _, off in index)
        idx += checksum
        idx += hashlib.sha1(idx).digest()
        name = f"pack-{checksum.hex()}"
        _write(folder / f"{name}.pack", bytes(body))
        # The index last: readers find packs through their .idx files.
        _write(folder / f"{name}.idx", bytes(idx))
        self.objects_written += len(self.pending)
        self.packs_written += 1
        for oid, (kind, data) in self.pending.items():
            if kind == "tree":
                self.recent.put(oid, data)
        self.pending.clear()
        return folder / f"{name}.pack"


_ODB_TYPES = {
    "commit": pygit2.enums.ObjectType.COMMIT,
    "tree": pygit2.enums.ObjectType.TREE,
    "blob": pygit2.enums.ObjectType.BLOB,
}


def flush_loose(buffer: ObjectBuffer) -> None:
    """Write the pending objects as loose files (for one-off writes: a pack each would pile up)."""
    for oid, (kind, data) in buffer.pending.items():
        written = buffer.repo.odb.write(_ODB_TYPES[kind], data)
        assert written.raw == oid
    buffer.objects_written += len(buffer.pending)
    buffer.pending.clear()


# After this many packs, `git repack --geometric=2` merges the small ones: a daemon writes
# one or two per batch, and every object lookup that misses scans them all.
REPACK_THRESHOLD = 64
REPACK_ARGS = ("repack", "-d", "-q", "--geometric=2", "--no-write-bitmap-index")


def pack_count(repo: pygit2.Repository) -> int | None:
    """How many packs the object store holds (None: the folder cannot be read)."""
    folder = common_dir(repo) / "objects" / "pack"
    try:
        return sum(1 for name in os.listdir(folder) if name.endswith(".idx"))
    except OSError:
        return None


def maybe_repack(repo: pygit2.Repository, threshold: int = REPACK_THRESHOLD) -> bool:
    """Merge small packs when there are more than `threshold` (cost follows their size)."""
    count = pack_count(repo)
    if count is None or count <= threshold:
        return False
    run_git(list(REPACK_ARGS), cwd=repo.path)
    # libgit2 keeps the packs it had open, deleted or not: one file handle (and its disk
    # space) per merged pack, until a long-running daemon runs out. Let it reopen them.
    repo.free()
    return True


class Repacker:
    """Merges small packs in a child `git repack` while the caller goes on landing.

    A repack's cost follows the size of what it merges, up to hundreds of milliseconds on a
    large repository: inside a landing, that was the worst latency a candidate saw. Here
    `poke` only counts packs and starts the child; a later `poke` (on the same thread, between
    landings) reaps it and lets libgit2 reopen the packs. git repacks alongside writers by
    design: `--geometric` rolls up only the packs it listed when it started, so packs written
    meanwhile stay, and a pack is deleted only after the one holding its objects is in place.
    `background=False` repacks inline (one-shot commands that exit right after).
    """

    def __init__(self, *, background: bool, threshold: int = REPACK_THRESHOLD) -> None:
        self.background = background
        self.threshold = threshold
        self.child: GitProcess | None = None
        self.started = 0  # repacks started (inline ones included)
        self.failed = 0  # repacks that exited non-zero (the packs stay as they were)

    def poke(self, repo: pygit2.Repository) -> bool:
        """Reap a finished repack; start one if there are too many packs. True: one started."""
        if self.child is not None:
            code = self.child.poll()
            if code is None:
                return False
            self._reaped(repo, code)
        if not self.background:
            started = maybe_repack(repo, self.threshold)
            self.started += started
            return started
        count = pack_count(repo)
        if count is None or count <= self.threshold:
            return False
        try:
            self.child = open_git(REPACK_ARGS, cwd=repo.path, pipes=False)
        except IntegratorError as err:  # no git, or it cannot start: the packs stay
            log.warning("repack.unstarted", error=str(err))
            return False
        self.started += 1
        return True

    def close(self, repo: pygit2.Repository | None = None, timeout: float = 60.0) -> None:
        """Wait for a running repack (at shutdown), so no child outlives its daemon's care."""
        if self.child is None:
            return
        code = self.child.wait(timeout)
        if code is None:
            log.warning("repack.abandoned", pid=self.child.pid)  # git finishes it alone
            self.child = None
            return
        if repo is not None:
            self._reaped(repo, code)
        self.child = None

    def _reaped(self, repo: pygit2.Repository, code: int) -> None:
        self.child = None
        if code != 0:
            self.failed += 1
            log.warning("repack.failed", exit=code)
        repo.free()  # see maybe_repack


def _write(path: Path, data: bytes) -> None:
    # A private temporary name: two integrators may write a pack of identical content.
    atomic_write(path, data, sync=False, mode=0o444, prefix="tmp_")
