"""The scoped promoter's view of the queue: each landing's scopes, each scope's results by
the number of its landings a head holds, and the cache keys they are found by.

A scope's result at a head is keyed by the scope's projection of the head's tree: a digest
of every (path, blob) the scope's suite depends on (its own paths and the paths in no
scope). Landings of other scopes leave it unchanged, so a result found at one head holds at
every head with the same landings of that scope — before a reorder and after it, before a
rebuild for another scope's culprit and after it — and is read back from the result cache.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import pygit2

from integrator.documents.policy import Validation
from integrator.documents.promotion import ValidationResult
from integrator.promotion.scopes import ScopeMap, positions
from integrator.promotion.state import QueueState
from integrator.promotion.validate import provisional
from integrator.records import validation_cache, validations
from integrator.records.canonical import Canonical

MEMO_ENTRIES = 10_000  # entries of each table one promoter remembers (it needs its pending heads)


@dataclass
class Memo:
    """What one promoter remembers between rounds: landings' scopes, trees' projections."""

    members: dict[str, frozenset[str]] = field(default_factory=dict)
    projections: dict[str, dict[str, str]] = field(default_factory=dict)
    # Provisional failures by cache key (the cache keeps finals only): found again at
    # another head of the same projection (new landings of other scopes, a reorder).
    provisional: dict[str, tuple[str, ValidationResult]] = field(default_factory=dict)

    def trim(self) -> None:
        for table in (self.members, self.projections, self.provisional):
            if len(table) > MEMO_ENTRIES:
                table.clear()


@dataclass
class ScopedView:
    """Every scope's results for the unpromoted landings."""

    state: QueueState
    names: tuple[str, ...]
    members: list[frozenset[str]]
    results: dict[str, dict[int, bool]]
    found: dict[str, dict[int, tuple[str, ValidationResult]]]
    keys: dict[str, dict[int, str]]
    hits: list[tuple[str, str]] = field(default_factory=list)  # (head, scope) from the cache

    def count(self, scope: str, head: int) -> int:
        return sum(1 for found in self.members[:head] if scope in found)

    def key_at(self, scope: str, head: int) -> str:
        return self.keys[scope][self.count(scope, head)]

    def head_of(self, scope: str, count: int) -> int:
        """The newest queue head holding exactly `count` of the scope's landings."""
        mine = positions(self.members, scope)
        return mine[count] - 1 if count < len(mine) else len(self.members)

    def commits_for(self, head: int) -> list[str]:
        """The result commits promoting to `head` rests on (one per scope it touches)."""
        out = []
        for scope in self.names:
            count = self.count(scope, head)
            if count and count in self.found[scope]:
                out.append(self.found[scope][count][0])
        return out


def changed_paths(repo: pygit2.Repository, commit: pygit2.Commit) -> set[str]:
    """The paths a queue commit changed against its first parent."""
    if not commit.parents:
        return set()
    diff = commit.parents[0].tree.diff_to_tree(commit.tree)
    out: set[str] = set()
    for delta in diff.deltas:
        out.add(delta.old_file.path)
        out.add(delta.new_file.path)
    return out


def projections(repo: pygit2.Repository, tree: pygit2.Tree, scopes: ScopeMap) -> dict[str, str]:
    """Each scope's projection digest of `tree`."""
    hashes = {name: hashlib.sha256() for name in scopes.names}
    stack: list[tuple[str, pygit2.Tree]] = [("", tree)]
    while stack:
        prefix, node = stack.pop()
        for entry in node:
            path = prefix + (entry.name or "")
            if entry.type_str == "tree":
                sub = repo[entry.id]
                assert isinstance(sub, pygit2.Tree)
                stack.append((path + "/", sub))
                continue
            line = f"{path}\0{entry.filemode:o}\0{entry.id}\n".encode("utf-8", "surrogateescape")
            for name in scopes.of_path(path):
                hashes[name].update(line)
    return {name: h.hexdigest() for name, h in hashes.items()}


def read_view(
    canonical: Canonical, state: QueueState, config: Validation, scopes: ScopeMap, memo: Memo
) -> ScopedView:
    """The scoped view of `state` (results from each head's chain, then the cache)."""
    memo.trim()
    repo = canonical.repo
    members: list[frozenset[str]] = []
    for landing in state.landings:
        found = memo.members.get(landing.staging)
        if found is None:
            found = scopes.of_paths(changed_paths(repo, canonical.commit(landing.staging)))
            memo.members[landing.staging] = found
        members.append(found)
    view = ScopedView(state, scopes.names, members, {}, {}, {})
    ejected = validation_cache.last_ejections(canonical, state.target)
    for scope in scopes.names:
        mine = positions(members, scope)
        command = config.command_of(scope)
        results: dict[int, bool] = {}
        found_here: dict[int, tuple[str, ValidationResult]] = {}
        keys: dict[int, str] = {}
        for j in range(len(mine) + 1):
            head = mine[j - 1] if j else 0
            tree = canonical.commit(state.head(head)).tree
            digests = memo.projections.get(str(tree.id))
            if digests is None:
                digests = projections(repo, tree, scopes)
                memo.projections[str(tree.id)] = digests
            keys[j] = validation_cache.key_of(digests[scope], scope, command, config.toolchain)
            if j == 0:
                continue
            at = mine[j] - 1 if j < len(mine) else len(members)
            hit = validations.latest(canonical, state.target, state.head(at), scope)
            if hit is None or not (hit[1].final or provisional(hit[1], config)):
                hit = validation_cache.lookup(
                    canonical,
                    state.target,
                    keys[j],
                    fails_after=ejected.get(scope, validation_cache.NEVER),
                )
                if hit is not None:
                    view.hits.append((state.head(at), scope))
            if hit is None or not (hit[1].final or provisional(hit[1], config)):
                hit = memo.provisional.get(keys[j])
                if hit is not None and hit[1].at <= ejected.get(scope, validation_cache.NEVER):
                    hit = None  # recorded before the scope's newest ejection
            elif provisional(hit[1], config):
                memo.provisional[keys[j]] = hit
            if hit is not None:
                found_here[j] = hit
                results[j] = hit[1].status == "pass"
        view.results[scope] = results
        view.found[scope] = found_here
        view.keys[scope] = keys
    return view
