"""Correctness alongside speed: every landed tree must be what `git merge-tree` gives.

For each staging commit on the queue (parent = the queue head it landed on, candidate
named by its `Integrator-Candidate` trailer) the expected tree is
`git merge-tree --write-tree <parent> <candidate>`: the candidate descends from its base,
the parent from the same base, so git picks that base as the merge base, exactly as the
plain pipeline does. All merges of one run go through one `git merge-tree --stdin`.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pygit2

from integrator.documents.trailers import TRAILER_CANDIDATE, trailers
from integrator.plumbing import git


@dataclass(frozen=True)
class Landing:
    """One landed commit: the head it landed on, the candidate, and the tree it wrote."""

    parent: str
    candidate: str
    tree: str


@dataclass
class Verdict:
    """What the check found; `ok` only when every landing matched and there was one."""

    checked: int = 0
    mismatches: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.checked > 0 and not self.mismatches


def queue_landings(repo_path: Path, head: str, stop: str) -> list[Landing]:
    """The staging commits from `stop` (exclusive) to `head`, oldest first."""
    repo = pygit2.Repository(str(repo_path))
    out: list[Landing] = []
    oid = head
    while oid != stop:
        commit = repo[oid]
        assert isinstance(commit, pygit2.Commit)
        if len(commit.parent_ids) != 1:
            raise RuntimeError(f"{oid} is not a staging commit (parents: {commit.parent_ids})")
        candidate = trailers(commit.message).get(TRAILER_CANDIDATE)
        if candidate is None:
            raise RuntimeError(f"{oid} has no {TRAILER_CANDIDATE} trailer")
        parent = str(commit.parent_ids[0])
        out.append(Landing(parent, candidate, str(commit.tree_id)))
        oid = parent
    out.reverse()
    return out


def merge_tree_many(repo_path: Path, pairs: list[tuple[str, str]]) -> list[str | None]:
    """`git merge-tree --write-tree --stdin` over (ours, theirs) pairs: tree, or None if conflicted.

    Each clean result is `1 NUL <tree> NUL NUL`. A conflicted one carries a list of entries
    whose end cannot be told from the next result without parsing messages, so everything
    from the first conflict on is reported as None (a failed check either way).
    """
    if not pairs:
        return []
    body = "".join(f"{a} {b}\n" for a, b in pairs).encode()
    proc = subprocess.run(
        ["git", "merge-tree", "--write-tree", "--stdin"],
        cwd=repo_path,
        input=body,
        capture_output=True,
        env=git.git_env(),
        check=False,
    )
    tokens = proc.stdout.split(b"\0")
    out: list[str | None] = []
    pos = 0
    while len(out) < len(pairs) and pos + 2 < len(tokens):
        status, tree, gap = tokens[pos : pos + 3]
        if status != b"1" or gap != b"":
            break
        out.append(tree.decode())
        pos += 3
    out.extend([None] * (len(pairs) - len(out)))
    return out


def check_landings(repo_path: Path, landings: list[Landing]) -> Verdict:
    """Compare each landed tree with git merge-tree's for the same two commits."""
    expected = merge_tree_many(repo_path, [(x.parent, x.candidate) for x in landings])
    verdict = Verdict(checked=len(landings))
    for i, (landing, tree) in enumerate(zip(landings, expected, strict=True)):
        if tree is None:
            verdict.mismatches.append(f"landing {i}: git merge-tree reports a conflict")
        elif tree != landing.tree:
            verdict.mismatches.append(
                f"landing {i} (candidate {landing.candidate[:12]}): tree {landing.tree[:12]}, "
                f"git merge-tree gives {tree[:12]}"
            )
    return verdict


def same_sequence(ours: list[Landing], theirs: list[str]) -> list[str]:
    """Differences between the trees integrator landed and the plain pipeline's, in order."""
    problems: list[str] = []
    if len(ours) != len(theirs):
        problems.append(f"integrator landed {len(ours)} candidates, the pipeline {len(theirs)}")
    for i, (landing, tree) in enumerate(zip(ours, theirs, strict=False)):
        if landing.tree != tree:
            problems.append(f"landing {i}: integrator {landing.tree[:12]}, pipeline {tree[:12]}")
    return problems
