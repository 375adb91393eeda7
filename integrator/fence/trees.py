"""Raw tree objects: parsed, validated as git writes them, and walked where ids differ.

The recomputed diff (`diff.py`), the tree merge (`merge.py`) and the collision check read
trees only through here, so every tree the fence interprets has passed the same checks
git fsck makes, and an unchanged subtree is never opened.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import pygit2

from integrator.caches import Bounded
from integrator.limits import MAX_TREE_BYTES, MAX_TREE_DEPTH


@dataclass(frozen=True, slots=True)
class Leaf:
    path: str
    oid: pygit2.Oid
    mode: int


# Raw tree records: "<octal mode> <name>\0<20-byte id>". Parsing the raw object in one
# regular-expression pass is several times cheaper than iterating pygit2 tree entries,
# whose `filemode` builds an enum member per access.
_RECORD = re.compile(rb"([0-7]+) ([^\x00]*)\x00(.{20})", re.DOTALL)
# What git itself writes and fsck accepts: the five modes spelled as git spells them (git
# *reads* `040000`, `120644` or `170000` loosely as a tree, a symlink or a gitlink, so an
# exact-byte comparison elsewhere would miss them), and a name that is one non-empty path
# component other than `.` and `..`.
_TREE = re.compile(
    rb"(?:(?:40000|100644|100664|100755|120000|160000) (?!\.\.?\x00)[^\x00/]+\x00.{20})*",
    re.DOTALL,
)
# The one id of a tree without entries: git's index cannot hold an empty folder, so no tree
# git writes has one as an entry, and the walk (which follows files) would not see it.
_EMPTY_TREE = bytes.fromhex("4b825dc642cb6eb9a060e54bf8d69288fbee4904")
TREE_MODE = b"40000"
# Parsed trees kept, counted by their entries (~320 bytes each parsed: ~8 MB in all; a
# batch's hot set is its base trees along the changed paths, a few thousand entries). A
# count of trees bounded nothing: a folder that grows by one file per landing is parsed
# again at every landing, each copy larger (a soak's daemon held 800 root trees, 55 MB).
CACHE_ENTRIES = 25_000

Record = tuple[bytes, bytes]  # (mode, raw id)
Entry = tuple[bytes, bytes, bytes]  # (mode, name, raw id), as the regular expression yields


class MalformedTree(Exception):
    """A tree object git would not write: odd modes or names, duplicates, wrong order."""

    def __init__(self, oid: pygit2.Oid, why: str) -> None:
        super().__init__(f"tree {oid} {why}")
        self.oid = oid


def _tree_problem(data: bytes, found: list[Entry], names: list[bytes], unique: int) -> str | None:
    """Why a raw tree is not one git writes (git fsck's tree checks), or None."""
    if _TREE.fullmatch(data) is None:
        return (
            "has malformed entries (a mode git does not write, such as 040000 or 120644; an "
            "empty, '.', '..' or slash-holding name; or bytes no entry explains)"
        )
    if unique != len(found):
        return "has duplicate entry names"
    # A folder entry's record starts "40000 " (no other mode ends in those bytes): without
    # one anywhere in the bytes, the checks on folder entries have nothing to look at.
    folders = _FOLDER_MARK in data
    if (
        folders
        and _EMPTY_TREE in data
        and any(mode == TREE_MODE and raw == _EMPTY_TREE for mode, _, raw in found)
    ):
        return "has an empty folder entry (git never writes one)"
    # git orders entries by name, a tree's name compared as if it ended in '/'.
    keys = [n + b"/" if m == TREE_MODE else n for m, n, _ in found] if folders else names
    if keys != sorted(keys):
        return "is not sorted the way git sorts tree entries"
    return None


_FOLDER_MARK = TREE_MODE + b" "
_name = operator.itemgetter(1)
_record = operator.itemgetter(0, 2)


class TreeReader:
    """Parses raw tree objects, caching by id (trees are immutable)."""

    def __init__(
        self, repo: pygit2.Repository, pending: Callable[[bytes], bytes | None] | None = None
    ) -> None:
        self.repo = repo
        self.pending = pending  # objects hashed but not yet written (objects.ObjectBuffer.read)
        self.cache: Bounded[bytes, tuple[frozenset[Entry], dict[bytes, Record]]] = Bounded(
            CACHE_ENTRIES, cost=lambda parsed: len(parsed[0])
        )  # parsed trees by id, counted by their entries

    def _parsed(self, oid: bytes) -> tuple[frozenset[Entry], dict[bytes, Record]]:
        cached = self.cache.get(oid)
        if cached is None:
            data = self.pending(oid) if self.pending is not None else None
            if data is None:
                kind, size = self.repo.odb.read_header(pygit2.Oid(raw=oid))
                if kind != pygit2.enums.ObjectType.TREE:
                    raise MalformedTree(
                        pygit2.Oid(raw=oid), "is not a tree (a folder entry names it)"
                    )
                if size > MAX_TREE_BYTES:  # checked before the object is read
                    raise MalformedTree(
                        pygit2.Oid(raw=oid), f"is {size} bytes, more than {MAX_TREE_BYTES}"
                    )
                data = self.repo.odb.read(pygit2.Oid(raw=oid))[1]
            found = _RECORD.findall(data)
            names = list(map(_name, found))
            by_name: dict[bytes, Record] = dict(zip(names, map(_record, found), strict=True))
            # A tree git itself would not write could hide a change from the walk, or land
            # something a checkout reads differently: refuse to interpret it.
            problem = _tree_problem(data, found, names, len(by_name))
            if problem is not None:
                raise MalformedTree(pygit2.Oid(raw=oid), problem)
            cached = self.cache.put(oid, (frozenset(found), by_name))
        return cached

    def entries(self, oid: bytes | None) -> frozenset[Entry]:
        return self._parsed(oid)[0] if oid is not None else frozenset()

    def records(self, oid: bytes | None) -> Mapping[bytes, Record]:
        """Name → (mode, raw id), shared and cached (hence read-only)."""
        return self._parsed(oid)[1] if oid is not None else {}

    def folder(self, root: bytes, path: str) -> bytes | None:
        """The raw id of the folder at `path` (slash-separated, "" for the root) in the tree
        `root`, or None when there is no folder there. Reads only the trees on the way."""
        oid = root
        for name in path.split("/") if path else ():
            record = self.records(oid).get(name.encode("utf-8", "surrogateescape"))
            if record is None or record[0] != TREE_MODE:
                return None
            oid = record[1]
        return oid


def name_of(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def _leaf(path: str, record: Record) -> Leaf:
    return Leaf(path, pygit2.Oid(raw=record[1]), int(record[0], 8))


@dataclass(frozen=True, slots=True)
class _Descend:
    """A walk level's request to walk a folder below it before going on."""

    level: Iterator[_Step]
    oid: bytes
    path: str


_Step = tuple[Leaf | None, Leaf | None] | Leaf | _Descend


def _walk(top: Iterator[_Step]) -> Iterator[_Step]:
    """Drive nested walk levels with an explicit stack, in the order recursion would give:
    depth costs no Python stack, and a tree deeper than MAX_TREE_DEPTH is refused."""
    stack = [top]
    while stack:
        try:
            step = next(stack[-1])
        except StopIteration:
            stack.pop()
            continue
        if isinstance(step, _Descend):
            if len(stack) > MAX_TREE_DEPTH:
                raise MalformedTree(
                    pygit2.Oid(raw=step.oid),
                    f"at {step.path!r} is more than {MAX_TREE_DEPTH} folders deep",
                )
            stack.append(step.level)
        else:
            yield step


def _leaves_level(
    reader: TreeReader, oid: bytes, prefix: str, side: int | None = None
) -> Iterator[_Step]:
    """The leaves below a folder, in path order: bare (`side` None), or as one side of a
    change pair (0: a leaf that went, 1: one that came)."""
    for name, record in sorted(reader.records(oid).items()):
        path = f"{prefix}{name_of(name)}"
        if record[0] == TREE_MODE:
            below = _leaves_level(reader, record[1], path + "/", side)
            yield _Descend(below, record[1], path)
        else:
            leaf = _leaf(path, record)
            yield leaf if side is None else ((leaf, None) if side == 0 else (None, leaf))


def _raw(tree: pygit2.Tree | bytes | None) -> bytes | None:
    return tree if tree is None or isinstance(tree, bytes) else tree.id.raw


# (folder path, old id, new id) → whether the walk may skip that pair of folders.
Prune = Callable[[str, bytes, bytes], bool]


def changed_leaves(
    repo: pygit2.Repository | TreeReader,
    old: pygit2.Tree | bytes | None,
    new: pygit2.Tree | bytes | None,
    prefix: str = "",
    *,
    prune: Prune | None = None,
) -> Iterator[tuple[Leaf | None, Leaf | None]]:
    """Yield (old, new) leaf pairs that differ, skipping subtrees with equal OIDs.

    Trees are given as objects or raw ids (a raw id may be pending in the reader's buffer).
    `prune` may skip a pair of differing folders too (the caller knows their difference).
    """
    reader = repo if isinstance(repo, TreeReader) else TreeReader(repo)
    for step in _walk(_changed(reader, _raw(old), _raw(new), prefix, prune)):
        assert isinstance(step, tuple)
        yield step


def _changed(
    reader: TreeReader,
    old: bytes | None,
    new: bytes | None,
    prefix: str,
    prune: Prune | None = None,
) -> Iterator[_Step]:
    if old == new:
        return
    a = reader.entries(old)
    b = reader.entries(new)
    # Unchanged entries are equal records: the symmetric difference is exactly the change.
    only_a = {name: (mode, raw) for mode, name, raw in a - b}
    only_b = {name: (mode, raw) for mode, name, raw in b - a}
    for name in sorted(only_a.keys() | only_b.keys()):
        ra = only_a.get(name)
        rb = only_b.get(name)
        path = f"{prefix}{name_of(name)}"
        a_tree = ra is not None and ra[0] == TREE_MODE
        b_tree = rb is not None and rb[0] == TREE_MODE
        if a_tree or b_tree:
            # A file replaced by a folder (or back): the leaf side is a separate change.
            if ra is not None and not a_tree:
                yield _leaf(path, ra), None
            if a_tree and not b_tree:
                assert ra is not None
                yield _Descend(_leaves_level(reader, ra[1], path + "/", 0), ra[1], path)
            elif b_tree and not a_tree:
                assert rb is not None
                yield _Descend(_leaves_level(reader, rb[1], path + "/", 1), rb[1], path)
            else:
                assert ra is not None and rb is not None
                if prune is None or not prune(path, ra[1], rb[1]):
                    below = _changed(reader, ra[1], rb[1], path + "/", prune)
                    yield _Descend(below, rb[1], path)
            if rb is not None and not b_tree:
                yield None, _leaf(path, rb)
            continue
        yield (
            _leaf(path, ra) if ra is not None else None,
            _leaf(path, rb) if rb is not None else None,
        )
