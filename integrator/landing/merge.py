"""Merging a candidate onto the queue head, with cost that follows the change.

The merge is three-way at the level of trees, with the contract's base as the merge base,
and descends only where both sides changed something: a folder the queue left as it was
in the base is taken from the candidate whole (its tree object is reused, nothing is
written), and a folder the candidate left alone is taken from the queue head. Ownership
partitioning makes that the common case, so a candidate lands by rewriting only the few
small folders on the way from the root to what it changed.

Where both sides changed the same regular file in place, the file is merged with libgit2
on one-entry trees, honouring a `merge=union` attribute set where git reads attributes for
a bare repository (`$GIT_DIR/info/attributes`). Anything else both sides touched — a file
one side deleted (git may have paired it into a rename), a folder that appeared or
vanished (git's directory-rename detection), symlinks, submodules, mode changes, content
conflicts — goes to `git merge-tree --write-tree` over two synthetic commits whose only
common ancestor is the base (git 2.39 has no `--merge-base`). A randomized test checks that
the trees the cheap path writes are exactly `git merge-tree`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import pygit2

from integrator.documents.policy import Policy
from integrator.fence.diff import MODE_TREE
from integrator.fence.trees import Record, TreeReader, changed_leaves
from integrator.paths import PathMatcher, literal_prefix
from integrator.plumbing import git
from integrator.plumbing.packs import ObjectBuffer, flush_loose, tree_bytes

PathEntry = tuple[pygit2.Oid, int] | None  # what a tree holds at a path: (id, mode)
_TREE = b"40000"
_FILES = (b"100644", b"100755")


@dataclass(frozen=True)
class MergeOutcome:
    tree: str | None
    strategy: str  # "trivial", "fast", "per-path" or "merge-tree"
    conflicts: tuple[str, ...] = ()
    merged_files: tuple[str, ...] = field(default=())


def entry_at(tree: pygit2.Tree, path: str) -> PathEntry:
    try:
        obj = tree[path]
    except KeyError:
        return None
    return (obj.id, obj.filemode)


class _Fallback(Exception):
    """Both sides touched something the tree-level merge leaves to git."""


class _TreeMerge:
    """Three-way merge of tree objects, writing only folders both sides changed."""

    def __init__(self, repo: pygit2.Repository, reader: TreeReader, objects: ObjectBuffer) -> None:
        self.repo = repo
        self.reader = reader
        self.objects = objects
        self.merged_files: list[str] = []

    def tree(self, base: bytes | None, head: bytes, cand: bytes, prefix: str) -> bytes:
        if head == base:
            return cand
        if cand == base:
            return head
        if base is None or head == cand:
            # Only reached at the root (`entry` settles these cases below it): a candidate
            # equal to the head, or no common tree. Let git decide.
            raise _Fallback(prefix or "/")
        b = self.reader.records(base)
        h = self.reader.records(head)
        c = self.reader.records(cand)
        merged = dict(h)
        changed = False
        for name in sorted(h.keys() | c.keys() | b.keys()):
            eb, eh, ec = b.get(name), h.get(name), c.get(name)
            if ec == eb:
                continue  # the candidate left it alone: the head's entry stands
            result = self.entry(name, eb, eh, ec, prefix)
            if result == eh:
                continue
            if result is None:
                del merged[name]
            else:
                merged[name] = result
            changed = True
        if not changed:
            return head
        if not merged:
            raise _Fallback(prefix or "/")  # a folder emptied by the merge: git drops it
        return self.objects.add("tree", tree_bytes(merged))

    def entry(
        self,
        name: bytes,
        eb: Record | None,
        eh: Record | None,
        ec: Record | None,
        prefix: str,
    ) -> Record | None:
        if eh == eb:
            return ec  # the queue left it alone: the candidate's entry, subtree and all
        if ec == eb:
            return eh
        path = prefix + name.decode("utf-8", "surrogateescape")
        if eb is None or eh is None or ec is None:
            raise _Fallback(path)  # added on both sides, or deleted on one: renames
        if eh == ec:
            return eh  # the same change in place on both sides
        if eb[0] == eh[0] == ec[0] == _TREE:
            return (_TREE, self.tree(eb[1], eh[1], ec[1], path + "/"))
        if eb[0] == eh[0] == ec[0] and eb[0] in _FILES:
            merged = _merge_file(self.repo, path, eb, eh, ec)
            if merged is None:
                raise _Fallback(path)
            self.merged_files.append(path)
            return (eb[0], merged)
        raise _Fallback(path)


def _merge_file(
    repo: pygit2.Repository, path: str, base: Record, ours: Record, theirs: Record
) -> bytes | None:
    """Merge one regular file; the merged blob's raw id, or None on conflict."""
    favor = pygit2.enums.MergeFavor.NORMAL
    # The attributes git itself would use for this merge: $GIT_DIR/info/attributes, the
    # global and system files, a checked-out .gitattributes. `git merge-tree` (2.39) does
    # not read .gitattributes from the commits being merged, so neither do we.
    attr = repo.get_attr(path, "merge")
    if attr == "union":
        favor = pygit2.enums.MergeFavor.UNION
    elif attr not in (None, True):
        return None  # a custom merge driver: let git decide

    def one(record: Record) -> pygit2.Tree:
        builder = repo.TreeBuilder()
        builder.insert("f", pygit2.Oid(raw=record[1]), int(record[0], 8))
        tree = repo[builder.write()]
        assert isinstance(tree, pygit2.Tree)
        return tree

    index = repo.merge_trees(one(base), one(ours), one(theirs), favor=favor)
    if index.conflicts is not None:
        return None
    return bytes(index["f"].id.raw)


def _synthetic(repo: pygit2.Repository, tree: pygit2.Oid, base_commit: pygit2.Oid) -> str:
    sig = pygit2.Signature("integrator", "integrator@localhost", 0, 0)
    return str(repo.create_commit(None, sig, sig, "merge input\n", tree, [base_commit]))


def merge_onto_head(
    repo: pygit2.Repository,
    *,
    base_commit: pygit2.Commit,
    head_commit: pygit2.Commit,
    candidate_commit: pygit2.Commit,
    head_tree: bytes | None = None,
    reader: TreeReader | None = None,
    objects: ObjectBuffer | None = None,
) -> MergeOutcome:
    """The merged tree of the candidate onto the queue head, base as the merge base.

    `head_tree` (a raw id, maybe still pending in `objects`) overrides the head commit's
    tree: a batch merges onto staging commits it has not written yet. New trees go to
    `objects` (flushed as one pack here when the caller gives none).
    """
    base = base_commit.tree_id
    head = pygit2.Oid(raw=head_tree) if head_tree is not None else head_commit.tree_id
    candidate = candidate_commit.tree_id
    if head == base:
        return MergeOutcome(str(candidate), "trivial")
    own = objects is None
    buffer = objects if objects is not None else ObjectBuffer(repo)
    merge = _TreeMerge(repo, reader or TreeReader(repo, buffer.read), buffer)
    try:
        tree = merge.tree(base.raw, head.raw, candidate.raw, "")
    except _Fallback:
        # git reads from disk; partial trees of the abandoned attempt go along unreferenced.
        buffer.flush()
    else:
        if own:
            flush_loose(buffer)
        strategy = "per-path" if merge.merged_files else "fast"
        return MergeOutcome(
            str(pygit2.Oid(raw=tree)), strategy, merged_files=tuple(merge.merged_files)
        )
    ours = _synthetic(repo, head, base_commit.id)
    theirs = _synthetic(repo, candidate, base_commit.id)
    result = git.merge_tree(repo.path, ours, theirs)
    return MergeOutcome(result.tree, "merge-tree", result.conflicts)


def resources_touched_since_base(
    repo: pygit2.Repository,
    policy: Policy,
    base: pygit2.Tree,
    head: pygit2.Tree,
    resources: Iterable[str],
) -> dict[str, list[str]]:
    """For each resource, the paths mapped to it that the queue changed since base.

    Only the folders under each rule's literal prefix are compared, so the cost follows
    the resource's scope, not the drift of the queue.
    """
    out: dict[str, list[str]] = {}
    wanted = set(resources)
    for rule, matcher in policy.resource_matchers:
        templated = "{path}" in rule.resource
        for resource in wanted:
            if templated:
                prefix, _, suffix = rule.resource.partition("{path}")
                if not (resource.startswith(prefix) and resource.endswith(suffix)):
                    continue
                path = resource[len(prefix) : len(resource) - len(suffix) or None]
                if matcher.covers(path) and entry_at(head, path) != entry_at(base, path):
                    out.setdefault(resource, []).append(path)
            elif rule.resource == resource:
                changed = _changed_under(repo, base, head, rule.paths, matcher)
                if changed:
                    out.setdefault(resource, []).extend(changed)
    for resource in wanted:
        if resource.startswith("submodule:"):
            path = resource.removeprefix("submodule:")
            if entry_at(head, path) != entry_at(base, path):
                out.setdefault(resource, []).append(path)
    return out


def _changed_under(
    repo: pygit2.Repository,
    base: pygit2.Tree,
    head: pygit2.Tree,
    patterns: Sequence[str],
    matcher: PathMatcher,
) -> list[str]:
    found: list[str] = []
    for prefix in dict.fromkeys(literal_prefix(p) for p in patterns):
        b = _subtree(repo, base, prefix)
        h = _subtree(repo, head, prefix)
        if b is not None and h is not None and b.id == h.id:
            continue
        if b is None and h is None:
            eb, eh = entry_at(base, prefix), entry_at(head, prefix)
            if eb != eh and matcher.covers(prefix):
                found.append(prefix)
            continue
        lead = f"{prefix}/" if prefix else ""
        for old, new in changed_leaves(repo, b, h, lead):
            leaf = new or old
            if leaf is not None and matcher.covers(leaf.path):
                found.append(leaf.path)
    return found


def _subtree(repo: pygit2.Repository, tree: pygit2.Tree, prefix: str) -> pygit2.Tree | None:
    if not prefix:
        return tree
    entry = entry_at(tree, prefix)
    if entry is None or entry[1] != MODE_TREE:
        return None
    obj = repo[entry[0]]
    assert isinstance(obj, pygit2.Tree)
    return obj
