"""The recomputed diff: base tree → candidate tree, walked so that cost follows the change.

`pygit2.Repository.diff` walks the whole tree (O(repository)); this walk descends only
into subtrees whose OIDs differ, so a 10-file change in a 100,000-file tree reads a few
dozen tree objects. Renames are detected afterwards on the changed set only, to name them
in verdicts: coverage never depends on them (a rename is a deletion of the old path and an
addition of the new one, and both ends must be owned either way).

Besides the changes, the walk gathers the facts the pure gate needs and cannot read itself:
symlink targets, sibling names for collision checks, and blob sizes for the patch size.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

import pygit2

from integrator import paths
from integrator.fence.trees import (
    TREE_MODE,
    Leaf,
    MalformedTree,
    Record,
    TreeReader,
    changed_leaves,
    name_of,
)
from integrator.limits import CANDIDATES, COMMON_LINE, MAX_CHANGES
from integrator.plumbing import git

MODE_TREE = 0o040000
MODE_BLOB = 0o100644
MODE_EXEC = 0o100755
MODE_LINK = 0o120000
MODE_GITLINK = 0o160000


class Status(StrEnum):
    ADDED = "A"
    DELETED = "D"
    MODIFIED = "M"
    RENAMED = "R"
    TYPECHANGE = "T"


def kind_of(mode: int | None) -> str:
    if mode is None:
        return "absent"
    if mode == MODE_LINK:
        return "symlink"
    if mode == MODE_GITLINK:
        return "submodule"
    if mode == MODE_TREE:
        return "tree"
    return "file"


@dataclass(frozen=True, slots=True)
class Change:
    """One changed leaf (file, symlink or gitlink) between base and candidate."""

    status: Status
    old_path: str | None
    new_path: str | None
    old_mode: int | None
    new_mode: int | None
    old_oid: str | None
    new_oid: str | None
    similarity: int | None = None

    @property
    def path(self) -> str:
        """The path a reader knows the change by (the new end when there is one)."""
        return self.new_path or self.old_path or ""

    @property
    def paths(self) -> tuple[str, ...]:
        """Every path the change writes: both ends of a rename, the one path otherwise."""
        ends = [p for p in (self.old_path, self.new_path) if p is not None]
        return tuple(dict.fromkeys(ends))

    @property
    def mode_changed(self) -> bool:
        return (
            self.old_mode is not None
            and self.new_mode is not None
            and self.old_mode != self.new_mode
        )

    @property
    def touches_gitlink(self) -> bool:
        return bool(self.gitlink_ends)

    @property
    def gitlink_ends(self) -> tuple[str, ...]:
        """The paths where a gitlink was or is: both ends when a gitlink moved."""
        ends = [
            path
            for path, mode in ((self.old_path, self.old_mode), (self.new_path, self.new_mode))
            if path is not None and mode == MODE_GITLINK
        ]
        return tuple(dict.fromkeys(ends))

    def wire(self) -> dict[str, object]:
        return {
            "status": self.status.value,
            "oldPath": self.old_path,
            "newPath": self.new_path,
            "oldMode": f"{self.old_mode:06o}" if self.old_mode is not None else None,
            "newMode": f"{self.new_mode:06o}" if self.new_mode is not None else None,
            "oldOid": self.old_oid,
            "newOid": self.new_oid,
            "similarity": self.similarity,
        }


@dataclass(frozen=True, slots=True)
class Collision:
    kind: str  # "case" or "unicode"
    path: str
    other: str


@dataclass(frozen=True)
class RecomputedDiff:
    """Everything the gate needs to decide on a candidate's change, gathered by one walk."""

    changes: tuple[Change, ...]
    patch_bytes: int
    symlink_targets: dict[str, bytes] = field(default_factory=dict)
    collisions: tuple[Collision, ...] = ()
    non_nfc: tuple[str, ...] = ()
    # Submodules whose `.gitmodules` settings (url, branch, path…) the change alters; None
    # when a version of `.gitmodules` could not be read as git config.
    reconfigured: tuple[str, ...] | None = ()

    @property
    def added_paths(self) -> list[str]:
        return [
            c.new_path for c in self.changes if c.new_path is not None and c.old_path != c.new_path
        ]

    @property
    def all_paths(self) -> list[str]:
        return [p for c in self.changes for p in c.paths]


def _size(repo: pygit2.Repository, oid: pygit2.Oid, mode: int) -> int:
    if mode == MODE_GITLINK:
        return 0
    kind, size = repo.odb.read_header(oid)
    if kind != pygit2.enums.ObjectType.BLOB:
        # A file or link entry naming a tree (or a commit): git fsck rejects it, checkouts fail.
        raise MalformedTree(oid, "is named by a file entry but is not a blob")
    return int(size)


class TooManyChanges(Exception):
    """The candidate changes more paths than MAX_CHANGES (the walk stopped there)."""


def _line_counts(repo: pygit2.Repository, oid: pygit2.Oid) -> dict[bytes, int]:
    blob = repo[oid]
    if not isinstance(blob, pygit2.Blob):
        raise MalformedTree(oid, "is named by a file entry but is not a blob")
    counts: dict[bytes, int] = {}
    for line in blob.data.splitlines():
        counts[line] = counts.get(line, 0) + 1
    return counts


def _exact_renames(
    deleted: list[Leaf], added: list[Leaf]
) -> tuple[list[tuple[Leaf, Leaf, int]], list[Leaf], list[Leaf]]:
    """Deleted and added leaves with one id (and kind) paired; and the rest of each."""
    pairs: list[tuple[Leaf, Leaf, int]] = []
    by_oid: dict[tuple[pygit2.Oid, int], list[Leaf]] = {}
    for leaf in added:
        by_oid.setdefault((leaf.oid, _kind_mode(leaf.mode)), []).append(leaf)
    used_new: set[str] = set()
    rest_deleted: list[Leaf] = []
    for leaf in deleted:
        same = by_oid.get((leaf.oid, _kind_mode(leaf.mode)))
        if same:
            target = same.pop(0)
            used_new.add(target.path)
            pairs.append((leaf, target, 100))
        else:
            rest_deleted.append(leaf)
    return pairs, rest_deleted, [leaf for leaf in added if leaf.path not in used_new]


def _similar_renames(
    repo: pygit2.Repository,
    deleted: list[Leaf],
    added: list[Leaf],
    rename_limit: int,
    threshold: int = 50,
) -> list[tuple[Leaf, Leaf, int]]:
    """Inexact renames among regular files, named by the share of lines two blobs have.

    Each blob is read once. Candidate pairs are found through the lines they share, with
    an index of the deleted files' lines: a line in more than COMMON_LINE deleted files is
    no clue (it identifies none of them), and each added file keeps its CANDIDATES best
    clues; only those pairs get the full score (the share of all lines they have in
    common). So the work grows with the lines, not with deleted × added. At most
    `rename_limit` files on either side, as git's own limit.
    """
    files_deleted = [leaf for leaf in deleted if _kind_mode(leaf.mode) == MODE_BLOB]
    files_added = [leaf for leaf in added if _kind_mode(leaf.mode) == MODE_BLOB]
    if not files_deleted or not files_added:
        return []
    if max(len(files_deleted), len(files_added)) > rename_limit:
        return []
    gone = [_line_counts(repo, leaf.oid) for leaf in files_deleted]
    gone_sizes = [sum(c.values()) for c in gone]
    index: dict[bytes, list[int]] = {}
    for i, counts in enumerate(gone):
        for line in counts:
            index.setdefault(line, []).append(i)
    scored: list[tuple[int, int, int]] = []
    for j, leaf in enumerate(files_added):
        counts = _line_counts(repo, leaf.oid)
        size = sum(counts.values())
        clues: dict[int, int] = {}
        for line in counts:
            holders = index.get(line)
            if holders is not None and len(holders) <= COMMON_LINE:
                for i in holders:
                    clues[i] = clues.get(i, 0) + 1
        best = sorted(clues, key=lambda i: (-clues[i], i))[:CANDIDATES]
        for i in best:
            theirs = gone[i]
            common = sum(min(n, theirs.get(line, 0)) for line, n in counts.items())
            scored.append(((100 * common) // max(gone_sizes[i], size, 1), i, j))
    scored.sort(reverse=True)
    pairs: list[tuple[Leaf, Leaf, int]] = []
    taken_d: set[int] = set()
    taken_a: set[int] = set()
    for score, i, j in scored:
        if score < threshold:
            break
        if i in taken_d or j in taken_a:
            continue
        taken_d.add(i)
        taken_a.add(j)
        pairs.append((files_deleted[i], files_added[j], score))
    return pairs


def _kind_mode(mode: int) -> int:
    # Regular and executable files rename into each other; symlinks and gitlinks do not.
    return MODE_BLOB if mode in (MODE_BLOB, MODE_EXEC) else mode


def recompute(
    repo: pygit2.Repository,
    base_tree: pygit2.Tree | bytes,
    candidate_tree: pygit2.Tree | bytes,
    *,
    rename_limit: int = 1000,
    reader: TreeReader | None = None,
    patch_limit: int | None = None,
) -> RecomputedDiff:
    """Recompute base → candidate and gather the facts the gate decides on.

    TooManyChanges when more than MAX_CHANGES paths change. The patch size is known once
    exact renames are paired (an inexact rename counts both blobs, as a deletion and an
    addition would): with `patch_limit`, a change already larger than it skips naming
    inexact renames, which would read every blob.
    """
    changes, deleted, added, patch_bytes = _walk(repo, reader, base_tree, candidate_tree)
    pairs, rest_deleted, rest_added = _exact_renames(deleted, added)
    patch_bytes += sum(_size(repo, leaf.oid, leaf.mode) for leaf in (*rest_deleted, *rest_added))
    if patch_limit is None or patch_bytes <= patch_limit:
        pairs += _similar_renames(repo, rest_deleted, rest_added, rename_limit)
    paired = {d.path for d, _, _ in pairs} | {a.path for _, a, _ in pairs}
    for d, a, score in pairs:
        changes.append(
            Change(Status.RENAMED, d.path, a.path, d.mode, a.mode, str(d.oid), str(a.oid), score)
        )
    changes.extend(
        Change(Status.DELETED, leaf.path, None, leaf.mode, None, str(leaf.oid), None)
        for leaf in deleted
        if leaf.path not in paired
    )
    changes.extend(
        Change(Status.ADDED, None, leaf.path, None, leaf.mode, None, str(leaf.oid))
        for leaf in added
        if leaf.path not in paired
    )
    changes.sort(key=lambda c: (c.path, c.old_path or ""))
    targets = symlink_targets(repo, changes)
    new_paths = [c.new_path for c in changes if c.new_path is not None and c.new_path != c.old_path]
    collisions = find_collisions(reader or repo, candidate_tree, new_paths)
    non_nfc = tuple(p for p in new_paths if unicodedata.normalize("NFC", p) != p)
    reconfigured = _reconfigured(repo, changes)
    return RecomputedDiff(
        tuple(changes), patch_bytes, targets, tuple(collisions), non_nfc, reconfigured
    )


def _walk(
    repo: pygit2.Repository,
    reader: TreeReader | None,
    base_tree: pygit2.Tree | bytes,
    candidate_tree: pygit2.Tree | bytes,
) -> tuple[list[Change], list[Leaf], list[Leaf], int]:
    """(changes in place, deleted leaves, added leaves, bytes of the changes in place)."""
    changes: list[Change] = []
    deleted: list[Leaf] = []
    added: list[Leaf] = []
    patch_bytes = 0
    walk = changed_leaves(reader or repo, base_tree, candidate_tree)
    for count, (old, new) in enumerate(walk, 1):
        if count > MAX_CHANGES:
            raise TooManyChanges(f"the candidate changes more than {MAX_CHANGES} paths")
        if old is not None and new is not None:
            status = Status.MODIFIED
            if kind_of(old.mode) != kind_of(new.mode):
                status = Status.TYPECHANGE
            changes.append(
                Change(status, old.path, new.path, old.mode, new.mode, str(old.oid), str(new.oid))
            )
            if old.oid != new.oid:
                patch_bytes += _size(repo, old.oid, old.mode) + _size(repo, new.oid, new.mode)
        elif old is not None:
            deleted.append(old)
        elif new is not None:
            added.append(new)
    return changes, deleted, added, patch_bytes


GITMODULES = ".gitmodules"


def gitmodules(repo: pygit2.Repository, oid: str) -> dict[str, dict[str, str]] | None:
    """`submodule.<name>.<key>` settings of a `.gitmodules` blob (name → key → value),
    read by git's own config parser (escapes, case, repeated keys: the last wins, as
    for git); None when git cannot read it."""
    pairs = git.config_blob(repo.path, oid)
    if pairs is None:
        return None
    out: dict[str, dict[str, str]] = {}
    for key, value in pairs:
        section, _, rest = key.partition(".")
        name, dot, variable = rest.rpartition(".")
        if section != "submodule" or not dot:
            continue
        out.setdefault(name, {})[variable] = value
    return out


def _reconfigured(repo: pygit2.Repository, changes: Iterable[Change]) -> tuple[str, ...] | None:
    """Paths of the submodules a change to the root `.gitmodules` re-points or re-homes."""
    old_blob = new_blob = None
    for change in changes:
        if change.old_path == GITMODULES and change.old_oid:
            old_blob = change.old_oid
        if change.new_path == GITMODULES and change.new_oid:
            new_blob = change.new_oid
    if old_blob is None and new_blob is None:
        return ()
    before = gitmodules(repo, old_blob) if old_blob else {}
    after = gitmodules(repo, new_blob) if new_blob else {}
    if before is None or after is None:
        return None
    touched: list[str] = []
    for name in sorted(before.keys() | after.keys()):
        if before.get(name) != after.get(name):
            for entries in (before.get(name), after.get(name)):
                if entries is not None:
                    touched.append(entries.get("path", name))
    return tuple(dict.fromkeys(touched))


def symlink_targets(repo: pygit2.Repository, changes: Iterable[Change]) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for change in changes:
        if change.new_mode == MODE_LINK and change.new_path and change.new_oid:
            blob = repo[change.new_oid]
            if not isinstance(blob, pygit2.Blob):
                raise MalformedTree(blob.id, "is named by a symlink entry but is not a blob")
            out[change.new_path] = blob.data
    return out


def _plain(name: str) -> str:
    """NFC without the code points HFS+ ignores: the name as a macOS checkout stores it."""
    return paths.HFS_IGNORABLE.sub("", unicodedata.normalize("NFC", name))


def fold(name: str) -> str:
    """What two names must not share in one folder: equal here means one file on a
    case-insensitive (or HFS+) checkout."""
    return _plain(name).casefold()


def find_collisions(
    trees: pygit2.Repository | TreeReader,
    tree: pygit2.Tree | bytes,
    new_paths: Iterable[str],
    *,
    checked: bytes | None = None,
) -> list[Collision]:
    """Paths among `new_paths` that collide with another entry of `tree`.

    Only the folders on each new path are read, so the cost follows the change. Two names
    that are equal after NFC are a Unicode collision; equal after NFC and case folding, a
    case collision. `checked` is a tree already found free of collisions for the same
    paths: a folder that is the very same tree there is not read again.
    """
    reader = trees if isinstance(trees, TreeReader) else TreeReader(trees)
    root = tree if isinstance(tree, bytes) else tree.id.raw
    listing: dict[str, tuple[dict[str, list[str]], Mapping[bytes, Record]] | None] = {}
    found: dict[tuple[str, str], Collision] = {}

    def folder_records(folder: str) -> Mapping[bytes, Record] | None:
        if folder == "":
            return reader.records(root)
        parent, _, name = folder.rpartition("/")
        above = siblings(parent)
        if above is None:
            return None
        record = above[1].get(name.encode("utf-8", "surrogateescape"))
        if record is None or record[0] != TREE_MODE:
            return None
        return reader.records(record[1])

    def siblings(folder: str) -> tuple[dict[str, list[str]], Mapping[bytes, Record]] | None:
        if folder not in listing:
            records = folder_records(folder)
            if records is None:
                listing[folder] = None
            else:
                groups: dict[str, list[str]] = {}
                for raw in records:
                    name = name_of(raw)
                    groups.setdefault(fold(name), []).append(name)
                listing[folder] = (groups, records)
        return listing[folder]

    def proven(folder: str) -> bool:
        if checked is None:
            return False
        if folder not in same:
            here = reader.folder(root, folder)
            same[folder] = here is not None and here == reader.folder(checked, folder)
        return same[folder]

    same: dict[str, bool] = {}
    for path in new_paths:
        parts = path.split("/")
        for depth, name in enumerate(parts):
            folder = "/".join(parts[:depth])
            if proven(folder):
                continue
            level = siblings(folder)
            if level is None:
                break
            for other in level[0].get(fold(name), []):
                if other == name:
                    continue
                here = f"{folder}/{name}" if folder else name
                there = f"{folder}/{other}" if folder else other
                kind = "unicode" if _plain(other) == _plain(name) else "case"
                key = tuple(sorted((here, there)))
                found.setdefault((key[0], key[1]), Collision(kind, here, there))
    return list(found.values())
