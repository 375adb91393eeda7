"""Canonical repositories whose work tree has the target checked out — a fleet's main
checkout — for the tests of keeping such a checkout in step (issue #22, W 5)."""

from __future__ import annotations

from pathlib import Path

from integrator.records.prepare import prepare
from tests.canon import Canon
from tests.gitutil import commit_files, git, make_repo

FILES = {
    "billing/invoice.py": "invoice = 1\n",
    "docs/index.md": "# docs\n",
    "README.md": "readme\n",
}


def main_checkout(
    tmp_path: Path, *, keep: bool | None = True, policy: str | None = None, name: str = "canon"
) -> Canon:
    """A non-bare repository on main with its files checked out and a clean index; prepared
    with `update_checkout=keep` (None: not prepared at all)."""
    path = make_repo(tmp_path / name)
    commit_files(path, FILES, "base", ref="refs/heads/main")
    git("reset", "-q", "--hard", cwd=path)
    if keep is not None:
        prepare(path, target="main", policy_text=policy, update_checkout=keep)
    return Canon(path)


def linked_checkout(tmp_path: Path, *, keep: bool | None = True) -> tuple[Canon, Path]:
    """A bare canonical repository with a linked worktree `wt` that has main checked out."""
    path = make_repo(tmp_path / "canon.git", bare=True)
    commit_files(path, FILES, "base", ref="refs/heads/main")
    worktree = tmp_path / "wt"
    git("worktree", "add", "-q", str(worktree), "main", cwd=path)
    if keep is not None:
        prepare(path, target="main", update_checkout=keep)
    return Canon(path), worktree


def status(work_tree: Path) -> str:
    """`git status --porcelain` there: empty when index and files are exactly HEAD's."""
    return git("status", "--porcelain", cwd=work_tree)


def in_step(work_tree: Path, rev: str = "refs/heads/main") -> bool:
    """Whether the work tree's HEAD is `rev`'s commit, its index `rev`'s tree and its files
    the index's."""
    head = git("rev-parse", "HEAD", cwd=work_tree) == git("rev-parse", rev, cwd=work_tree)
    return head and status(work_tree) == ""
