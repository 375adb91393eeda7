"""Merging a candidate onto the queue head, with cost that follows the change.

Ownership partitioning makes a candidate usually disjoint from what landed since its
base. Then the result is the queue head's tree with the candidate's changes applied, and
only the folders on the changed paths are rebuilt (`fast`). Where both sides changed the
same regular files and nothing else interferes, those files are merged one by one with
libgit2 on one-entry trees (`per-path`, honouring a `merge=union` attribute set where
git reads it for a bare repository: `$GIT_DIR/info/attributes`). Anything
else (renames on the head's side, directories appearing or vanishing on both sides,
symlinks, submodules, conflicts) goes to `git merge-tree --write-tree` over two synthetic
commits whose only common ancestor is the base (`merge-tree`), because git 2.39 has no
`--merge-base`. The fast paths are tested to give the trees `git merge-tree` gives.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import pygit2

from integrator import git
from integrator.diff import MODE_BLOB, MODE_EXEC, MODE_TREE, Change, changed_leaves
from integrator.paths import PathMatcher, literal_prefix
from integrator.policy import Policy

Entry = tuple[pygit2.Oid, int] | None


@dataclass(frozen=True)
class MergeOutcome:
    tree: str | None
    strategy: str  # "trivial", "fast", "per-path" or "merge-tree"
    conflicts: tuple[str, ...] = ()
    both_touched: tuple[str, ...] = field(default=())

    @property
    def clean(self) -> bool:
        return self.tree is not None


def entry_at(tree: pygit2.Tree, path: str) -> Entry:
    try:
        obj = tree[path]
    except KeyError:
        return None
    return (obj.id, obj.filemode)


def _ancestors(path: str) -> Iterable[str]:
    parts = path.split("/")
    for depth in range(1, len(parts)):
        yield "/".join(parts[:depth])


def _present(entry: Entry) -> bool:
    return entry is not None


def plan_merge(
    base: pygit2.Tree, head: pygit2.Tree, candidate: pygit2.Tree, changes: Sequence[Change]
) -> tuple[list[str], bool]:
    """(paths both sides changed, whether the cheap paths are safe at all)."""
    both: list[str] = []
    for change in changes:
        for path in change.paths:
            if entry_at(head, path) != entry_at(base, path):
                both.append(path)
    folders = {d for change in changes for p in change.paths for d in _ancestors(p)}
    for folder in folders:
        b = entry_at(base, folder)
        h = entry_at(head, folder)
        c = entry_at(candidate, folder)
        if b in (h, c):
            continue
        # Both sides changed this folder and one made it appear or vanish: git's
        # directory-rename detection may move files, so let git decide.
        if _present(b) != _present(h) or _present(b) != _present(c):
            return both, False
        if h is not None and h[1] != MODE_TREE:
            return both, False
    return both, True


class _Edits:
    """Leaf edits grouped by folder, applied bottom-up with TreeBuilder."""

    def __init__(self) -> None:
        self.children: dict[str, _Edits] = {}
        self.leaves: dict[str, Entry] = {}

    def put(self, path: str, entry: Entry) -> None:
        head, _, rest = path.partition("/")
        if rest:
            self.children.setdefault(head, _Edits()).put(rest, entry)
        else:
            self.leaves[head] = entry

    def apply(self, repo: pygit2.Repository, tree: pygit2.Tree | None) -> pygit2.Oid | None:
        builder = repo.TreeBuilder(tree) if tree is not None else repo.TreeBuilder()
        for name, entry in self.leaves.items():
            if entry is None:
                if builder.get(name) is not None:
                    builder.remove(name)
            else:
                builder.insert(name, entry[0], entry[1])
        for name, edits in self.children.items():
            existing = builder.get(name)
            sub: pygit2.Tree | None = None
            if existing is not None:
                if existing.filemode != MODE_TREE:
                    raise _NotSimple(name)
                obj = repo[existing.id]
                assert isinstance(obj, pygit2.Tree)
                sub = obj
            new = edits.apply(repo, sub)
            if new is None:
                if existing is not None:
                    builder.remove(name)
            else:
                builder.insert(name, new, MODE_TREE)
        if len(builder) == 0:
            return None
        return builder.write()


class _NotSimple(Exception):
    """A file stands where a folder is needed: not a case for the cheap paths."""


def _merge_file(
    repo: pygit2.Repository,
    path: str,
    base: Entry,
    ours: Entry,
    theirs: Entry,
) -> pygit2.Oid | None:
    """Merge one regular file; the merged blob, or None on conflict."""
    assert base is not None and ours is not None and theirs is not None
    favor = pygit2.enums.MergeFavor.NORMAL
    # The attributes git itself would use for this merge: $GIT_DIR/info/attributes, the
    # global and system files, a checked-out .gitattributes. `git merge-tree` (2.39) does
    # not read .gitattributes from the commits being merged, so neither do we.
    attr = repo.get_attr(path, "merge")
    if attr == "union":
        favor = pygit2.enums.MergeFavor.UNION
    elif attr not in (None, True):
        return None  # a custom merge driver: let git decide

    def one(entry: tuple[pygit2.Oid, int]) -> pygit2.Tree:
        builder = repo.TreeBuilder()
        builder.insert("f", entry[0], entry[1])
        tree = repo[builder.write()]
        assert isinstance(tree, pygit2.Tree)
        return tree

    index = repo.merge_trees(one(base), one(ours), one(theirs), favor=favor)
    if index.conflicts is not None:
        return None
    return index["f"].id


def _synthetic(repo: pygit2.Repository, tree: pygit2.Oid, base_commit: pygit2.Oid) -> str:
    sig = pygit2.Signature("integrator", "integrator@localhost", 0, 0)
    return str(repo.create_commit(None, sig, sig, "merge input\n", tree, [base_commit]))


def merge_onto_head(
    repo: pygit2.Repository,
    *,
    base_commit: pygit2.Commit,
    head_commit: pygit2.Commit,
    candidate_commit: pygit2.Commit,
    changes: Sequence[Change],
) -> MergeOutcome:
    """The merged tree of the candidate onto the queue head, base as the merge base."""
    base = base_commit.tree
    head = head_commit.tree
    candidate = candidate_commit.tree
    if head.id == base.id:
        return MergeOutcome(str(candidate.id), "trivial")
    both, simple = plan_merge(base, head, candidate, changes)
    if simple:
        edits = _Edits()
        for change in changes:
            if change.old_path is not None and change.old_path != change.new_path:
                edits.put(change.old_path, None)
        for change in changes:
            if change.new_path is not None:
                edits.put(change.new_path, entry_at(candidate, change.new_path))
        per_path = True
        for path in dict.fromkeys(both):
            b, h, c = entry_at(base, path), entry_at(head, path), entry_at(candidate, path)
            # Only a file both sides modified in place is merged here. A side that deleted
            # it may have renamed it (git pairs renames and may report rename/delete or
            # rename/rename), so anything else goes to git.
            if not all(e is not None and e[1] in (MODE_BLOB, MODE_EXEC) for e in (b, h, c)):
                per_path = False
                break
            assert b is not None and h is not None and c is not None
            if not (b[1] == h[1] == c[1]):
                per_path = False
                break
            if h == c:
                continue
            merged = _merge_file(repo, path, b, h, c)
            if merged is None:
                per_path = False
                break
            edits.put(path, (merged, c[1]))
        if per_path:
            try:
                tree = edits.apply(repo, head)
            except _NotSimple:
                tree = None
            else:
                if tree is None:
                    tree = repo.TreeBuilder().write()
                return MergeOutcome(str(tree), "per-path" if both else "fast", (), tuple(both))
    ours = _synthetic(repo, head.id, base_commit.id)
    theirs = _synthetic(repo, candidate.id, base_commit.id)
    result = git.merge_tree(repo.path, ours, theirs)
    return MergeOutcome(result.tree, "merge-tree", result.conflicts, tuple(both))


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
                path = leaf.path
                found.append(path)
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
