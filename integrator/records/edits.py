"""What a workspace, or a candidate's history, already edited: the facts behind refusing
"edit first, claim afterwards".

An expansion request names its workspace's tree and HEAD; `written_already` says whether
either already changes a path the request would add. A grant records the head it
inspected; `edits_before_grants` lists the commits of a candidate that changed granted
paths without building on that head.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pygit2

from integrator.documents.claim import Grant
from integrator.documents.contract import OwnershipContract
from integrator.documents.expansion import ExpansionRequest
from integrator.fence.trees import MalformedTree, TreeReader, changed_leaves
from integrator.limits import MAX_HISTORY
from integrator.paths import PathMatcher, quote_path
from integrator.plumbing import git
from integrator.records.canonical import Canonical


def history_between(
    repo: pygit2.Repository, base: str, head: str, limit: int = MAX_HISTORY
) -> list[pygit2.Commit] | None:
    """Commits reachable from `head` and not from `base`, newest first; None when `head`
    does not descend from `base` or there are more than `limit`."""
    if head != base and not repo.descendant_of(pygit2.Oid(hex=head), pygit2.Oid(hex=base)):
        return None
    walker = repo.walk(pygit2.Oid(hex=head), pygit2.enums.SortMode.TOPOLOGICAL)
    walker.hide(pygit2.Oid(hex=base))
    out: list[pygit2.Commit] = []
    for commit in walker:
        out.append(commit)
        if len(out) > limit:
            return None
    return out


def _touched(reader: TreeReader, before: bytes, after: bytes) -> Iterator[str]:
    for old, new in changed_leaves(reader, before, after):
        for leaf in (old, new):
            if leaf is not None:
                yield leaf.path


def _commit_touches(reader: TreeReader, commit: pygit2.Commit) -> Iterator[str]:
    """Paths a commit changed against its first parent (a root commit: all it holds)."""
    parent = commit.parents[0].tree_id.raw if commit.parents else None
    for old, new in changed_leaves(reader, parent, commit.tree_id.raw):
        for leaf in (old, new):
            if leaf is not None:
                yield leaf.path


def _workspace_problem(repo: pygit2.Repository, request: ExpansionRequest) -> str | None:
    if request.workspace_tree is None:
        return (
            "the request names no workspaceTree, so integrator cannot verify that the "
            "workspace has not written the paths it asks for (build the request with "
            "`integrator contract request-expansion`)"
        )
    if git.object_kind(repo, request.workspace_tree) != "tree":
        return f"the workspace tree {request.workspace_tree} is not in the canonical repository"
    head = request.workspace_head
    if head is not None and git.object_kind(repo, head) != "commit":
        return f"the workspace head {head} is not in the canonical repository"
    return None


def written_already(
    canonical: Canonical, contract: OwnershipContract, request: ExpansionRequest
) -> str | None:
    """Why the workspace may already have written what `request` asks for, or None.

    Edit first and ask afterwards is refused: the request must name the workspace's whole
    current state (its tree, untracked files included) and its HEAD, and neither that tree
    nor any commit from the contract's base to that HEAD may change a path the request
    adds to the contract.
    """
    repo = canonical.repo
    problem = _workspace_problem(repo, request)
    if problem is not None or request.workspace_tree is None:
        return problem
    added = [p for p in request.add_paths if p not in contract.paths]
    if not added:
        return None
    new, owned = PathMatcher.of(added), contract.matcher()
    reader = TreeReader(repo)
    base = canonical.commit(contract.base_commit)
    try:
        seen = list(_touched(reader, base.tree_id.raw, bytes.fromhex(request.workspace_tree)))
        head = request.workspace_head
        if head is not None:
            commits = history_between(repo, contract.base_commit, head)
            if commits is None:
                return (
                    f"the workspace head {head} does not descend from the contract's base "
                    f"(or more than {MAX_HISTORY} commits lie between)"
                )
            for commit in commits:
                seen.extend(_commit_touches(reader, commit))
    except MalformedTree as err:
        return f"the workspace cannot be read as git writes trees: {err}"
    found = [p for p in dict.fromkeys(seen) if new.covers(p) and not owned.covers(p)]
    if not found:
        return None
    shown = ", ".join(quote_path(p) for p in found[:10])
    return (
        f"the workspace has already changed {shown}, which the request asks to add: "
        "editing first and claiming afterwards is refused (revert those changes, then ask)"
    )


def edits_before_grants(
    repo: pygit2.Repository, base: str, candidate: str, grants: Sequence[Grant]
) -> list[tuple[str, str, Grant]] | None:
    """(commit, path, grant) for each commit of base..candidate that changed a path a grant
    added without descending from the head the grant inspected; None when the history is
    longer than MAX_HISTORY (nothing can be said)."""
    heads = [g for g in grants if g.head is not None and g.paths]
    if not heads:
        return []
    commits = history_between(repo, base, candidate)
    if commits is None:
        return None
    reader = TreeReader(repo)
    matchers = [(g, PathMatcher.of(g.paths)) for g in heads]
    out: list[tuple[str, str, Grant]] = []
    for commit in commits:
        oid = str(commit.id)
        touched = list(_commit_touches(reader, commit))
        for grant, matcher in matchers:
            assert grant.head is not None
            after = oid != grant.head and repo.descendant_of(commit.id, pygit2.Oid(hex=grant.head))
            if after:
                continue
            out.extend((oid, p, grant) for p in touched if matcher.covers(p))
    return out
