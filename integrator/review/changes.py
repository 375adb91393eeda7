"""A held candidate's changes as a reviewer sees them: each changed path, its modes, the
violations that name it, its blobs' weight and (when they weigh little enough) its patch.

One tree diff per call, and work linear in files + violations: the violations are indexed
by path once, and the weight comes from object headers, so a caller can ask for patches
only under a limit without diffing twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pygit2

from integrator.documents.verdict import Violation
from integrator.plumbing import git
from integrator.records.canonical import Canonical

NO_PATCHES = -1  # a patch limit no diff is under: paths, statuses, modes and weights only


@dataclass(frozen=True)
class FileDiff:
    path: str
    old_path: str | None
    status: str
    patch: str
    violations: list[Violation]
    old_mode: int = 0  # 0: the path did not exist on that side
    new_mode: int = 0
    size: int = 0  # old + new blob bytes, read from object headers (what a patch would show)


@dataclass(frozen=True)
class Changes:
    base: str | None  # the base the diff was taken from (None: the empty tree)
    files: list[FileDiff]
    weight: int  # blob bytes of every changed path, both sides
    with_patches: bool  # the files carry their patches (else `patch` is empty)


def by_path(violations: Sequence[Violation]) -> dict[str, list[tuple[int, Violation]]]:
    """Each path's violations with their place in the verdict, in one pass."""
    found: dict[str, list[tuple[int, Violation]]] = {}
    for place, v in enumerate(violations):
        if v.path is not None:
            found.setdefault(v.path, []).append((place, v))
    return found


def naming(index: dict[str, list[tuple[int, Violation]]], path: str, old: str) -> list[Violation]:
    """The violations that name either end of a change, in the verdict's order."""
    named = index.get(path, [])
    if old != path and old in index:
        named = sorted([*named, *index[old]], key=lambda pair: pair[0])
    return [v for _, v in named]


def changes(
    canonical: Canonical,
    candidate: str,
    base: object,
    violations: Sequence[Violation],
    *,
    patch_limit: int | None = None,
) -> Changes:
    """The diff from `base` (else the candidate's first parent, else the empty tree) to
    `candidate`; patches are made only when the changed blobs weigh at most `patch_limit`
    bytes (None: always), from the same diff."""
    repo = canonical.repo
    if not git.has_object(repo, candidate):
        return Changes(None, [], 0, False)
    cand = canonical.commit(candidate)
    if not isinstance(base, str) or not git.has_object(repo, base):
        # The base is missing (e.g. BASE_MISSING): show what the candidate itself did.
        base = str(cand.parent_ids[0]) if cand.parent_ids else None
    if base is not None:
        found = canonical.commit(base).tree.diff_to_tree(cand.tree)
    else:
        found = cand.tree.diff_to_tree(swap=True)  # a root commit: everything is added
    found.find_similar()
    deltas = list(found.deltas)
    sizes = [_blob_size(repo, d.old_file) + _blob_size(repo, d.new_file) for d in deltas]
    weight = sum(sizes)
    with_patches = bool(deltas) and (patch_limit is None or weight <= patch_limit)
    index = by_path(violations)
    files = []
    for place, (delta, size) in enumerate(zip(deltas, sizes, strict=True)):
        path, old = delta.new_file.path, delta.old_file.path
        patch = found[place] if with_patches else None
        files.append(
            FileDiff(
                path,
                old if old != path else None,
                delta.status_char(),
                (patch.text or "") if patch is not None else "",
                naming(index, path, old),
                delta.old_file.mode,
                delta.new_file.mode,
                size,
            )
        )
    return Changes(base, files, weight, with_patches)


def _blob_size(repo: pygit2.Repository, side: pygit2.DiffFile) -> int:
    """A side's blob size from its object header (0 for an absent side or a gitlink)."""
    if side.mode in (0, 0o160000) or side.id.raw == bytes(20):
        return 0
    try:
        return int(repo.odb.read_header(side.id)[1])
    except (KeyError, pygit2.GitError):
        return 0
