"""The cheap merge paths give exactly the trees `git merge-tree --write-tree` gives.

Randomized, seeded histories: a base tree, commits on the queue's side since base, and a
candidate's edits. Whatever strategy integrator picks (`fast`, `per-path`, `merge-tree`),
a clean result must be the tree git computes for the same merge base, and git's conflicts
must never come out clean.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pygit2

from integrator.landing.merge import merge_onto_head
from integrator.plumbing import git as igit
from tests.gitutil import Spec, commit_files, make_repo

FOLDERS = ["a", "a/b", "c", "d/e/f", "g"]


def _lines(rng: random.Random, n: int) -> str:
    return "".join(f"l{rng.randrange(1000)}\n" for _ in range(n))


def _edit_text(rng: random.Random, text: str) -> str:
    lines = text.splitlines(keepends=True)
    i = rng.randrange(len(lines) + 1)
    if lines and rng.random() < 0.5:
        lines[min(i, len(lines) - 1)] = f"edit{rng.randrange(1000)}\n"
    else:
        lines.insert(i, f"ins{rng.randrange(1000)}\n")
    return "".join(lines)


def _random_edits(rng: random.Random, tree: dict[str, str], shared: bool) -> dict[str, Spec]:
    edits: dict[str, Spec] = {}
    paths = sorted(tree)
    for _ in range(rng.randrange(1, 5)):
        action = rng.random()
        if action < 0.4 and paths:
            p = rng.choice(paths)
            edits[p] = _edit_text(rng, tree[p])
        elif action < 0.55 and paths:
            edits[rng.choice(paths)] = None
        elif action < 0.7 and paths:
            p = rng.choice(paths)
            target = f"{rng.choice(FOLDERS)}/r{rng.randrange(50)}.txt"
            if target not in tree:
                edits[p] = None
                edits[target] = tree[p] if rng.random() < 0.5 else _edit_text(rng, tree[p])
        elif action < 0.8 and paths:
            p = rng.choice(paths)
            edits[p] = (tree[p], "x")
        else:
            edits[f"{rng.choice(FOLDERS)}/n{rng.randrange(100)}.txt"] = _lines(rng, 5)
    if shared:
        edits["CHANGELOG"] = tree["CHANGELOG"] + f"entry {rng.randrange(10**6)}\n"
    return edits


def _apply(tree: dict[str, str], edits: dict[str, Spec]) -> dict[str, str]:
    out = dict(tree)
    for path, spec in edits.items():
        if spec is None:
            out.pop(path, None)
        elif isinstance(spec, tuple):
            out[path] = str(spec[0])
        else:
            out[path] = str(spec)
    return out


def _oracle(
    repo: pygit2.Repository, base: pygit2.Commit, head: pygit2.Commit, cand: pygit2.Commit
) -> str | None:
    sig = pygit2.Signature("t", "t@example.invalid", 0, 0)
    ours = repo.create_commit(None, sig, sig, "o", head.tree.id, [base.id])
    theirs = repo.create_commit(None, sig, sig, "t", cand.tree.id, [base.id])
    result = igit.merge_tree(repo.path, str(ours), str(theirs))
    return result.tree


def test_cheap_paths_match_git_merge_tree(tmp_path: Path) -> None:
    """Over 120 random histories every clean result equals git's, and conflicts stay conflicts."""
    repo_path = make_repo(tmp_path / "repo")
    repo = pygit2.Repository(str(repo_path))
    # Union merges for the shared file, where git reads attributes in a canonical repository.
    (repo_path / ".git" / "info").mkdir(exist_ok=True)
    (repo_path / ".git" / "info" / "attributes").write_text("CHANGELOG merge=union\n")
    strategies: Counter[str] = Counter()
    mismatches = []
    for seed in range(120):
        rng = random.Random(seed)
        shared = seed % 3 == 0
        tree = {
            f"{rng.choice(FOLDERS)}/f{i}.txt": _lines(rng, 12) for i in range(rng.randrange(3, 12))
        }
        tree["CHANGELOG"] = "start\n"
        base = commit_files(repo_path, tree, "base", parent=None, ref=None)
        head_tree = tree
        head = base
        for _ in range(rng.randrange(1, 4)):
            edits = _random_edits(rng, head_tree, shared)
            head = commit_files(repo_path, edits, "head", parent=head, ref=None)
            head_tree = _apply(head_tree, edits)
        cand = commit_files(
            repo_path, _random_edits(rng, tree, shared), "cand", parent=base, ref=None
        )
        b, h, c = (repo[x].peel(pygit2.Commit) for x in (base, head, cand))
        outcome = merge_onto_head(repo, base_commit=b, head_commit=h, candidate_commit=c)
        expected = _oracle(repo, b, h, c)
        strategies[outcome.strategy] += 1
        if outcome.tree != expected:
            mismatches.append((seed, outcome.strategy, outcome.tree, expected))
    assert mismatches == [], (len(mismatches), Counter(m[1] for m in mismatches), mismatches[:8])
    # The test must exercise the cheap paths, not only the fallback.
    assert strategies["fast"] >= 15, strategies
    assert strategies["per-path"] >= 10, strategies
    assert strategies["merge-tree"] >= 10, strategies
