"""`integrator commit --task ID` — commit only a task's owned paths in a shared checkout.

Seed 000: file partitioning does not partition `.git/`. Every staging and commit runs under
one repository-wide lock, stages only the task's owned paths (never `git add -A`), and
refuses when something it does not own is already staged — that belongs to someone else's
commit. Unowned changes in the working tree are left alone and reported; committing only
owned paths selects content, it does not undo a write outside the task (the guard does that).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from integrator import git, paths
from integrator.errors import ClaimConflictError, UsageError
from integrator.guard import staged_paths
from integrator.planner import expand_writeset
from integrator.queue import Queue
from integrator.repository import Canonical
from integrator.tasks import load_task
from integrator.workspace import worktree_root

LOCK_NAME = "integrator-commit.lock"


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "commit",
        help="commit only a task's owned paths, serialized under one repository-wide lock",
        description=(
            "For fleets sharing one checkout: stage and commit only the paths task ID owns "
            "(its live contract, else its claimed task file's write set). Refuses when "
            "unowned changes are staged; leaves unowned working-tree changes untouched."
        ),
    )
    parser.add_argument("--task", required=True, metavar="ID")
    parser.add_argument("-m", "--message", metavar="MSG", help="commit message")
    parser.add_argument("--repo", type=Path, default=Path(), metavar="PATH")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(func=run)


def owned_matcher(root: Path, task_id: str) -> tuple[paths.PathMatcher, str]:
    """What task `task_id` owns: its live contract, else its claimed task file's write set."""
    with Canonical(root) as canonical:
        claim = canonical.claim(task_id)
        if claim is not None and claim.view.state == "live":
            return claim.contract.matcher(), f"contract generation {claim.view.generation}"
        policy = canonical.policy_state().policy
    queue = Queue.find(root)
    try:
        entry = queue.find_claimed(task_id)
    except UsageError as err:
        raise UsageError(
            f"task {task_id} has no live claim and is not claimed in the queue; claim it first"
        ) from err
    writeset = expand_writeset(load_task(entry.path), policy)
    if not writeset.patterns:
        raise UsageError(f"task {task_id} owns no paths (lock mode none); it commits nothing")
    return paths.PathMatcher.of(writeset.patterns), f"task file {entry.path.name}"


@contextlib.contextmanager
def repository_lock(root: Path) -> Iterator[None]:
    """One lock per repository (in the shared git dir) around index and commit work."""
    proc = git.run_git(["rev-parse", "--path-format=absolute", "--git-common-dir"], cwd=root)
    with open(Path(proc.stdout.decode().strip()) / LOCK_NAME, "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def changed_paths(root: Path) -> list[str]:
    """Every path that differs from HEAD in index or working tree, untracked included."""
    proc = git.run_git(
        ["status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames"], cwd=root
    )
    entries = proc.stdout.decode("utf-8", "surrogateescape").split("\0")
    return [e[3:] for e in entries if len(e) > 3]


@dataclass(frozen=True)
class CommitResult:
    task: str
    commit: str | None
    paths: tuple[str, ...]
    left_alone: tuple[str, ...]
    owner: str


def commit_task(root: Path, task_id: str, message: str | None = None) -> CommitResult:
    """Stage and commit the task's owned changes; see the module docstring."""
    matcher, owner = owned_matcher(root, task_id)

    def owned(path: str) -> bool:
        return paths.unsafe_reason(path) is None and matcher.covers(path)

    with repository_lock(root):
        foreign = [p for p in staged_paths(root) if not owned(p)]
        if foreign:
            raise ClaimConflictError(
                f"refusing to commit for task {task_id}: paths it does not own are staged "
                f"({', '.join(foreign)}); unstage them with `git restore --staged -- PATH` "
                "(they belong to another task's commit)"
            )
        changed = changed_paths(root)
        mine = [p for p in changed if owned(p)]
        # The queue's own files (.agents/) are not anybody's work; leave them out of the report.
        others = tuple(p for p in changed if not owned(p) and not p.startswith(".agents/"))
        if mine:
            listing = "".join(p + "\0" for p in mine).encode("utf-8", "surrogateescape")
            git.run_git(
                ["--literal-pathspecs", "add", "--pathspec-from-file=-", "--pathspec-file-nul"],
                cwd=root,
                input=listing,
            )
        staged = [p for p in staged_paths(root) if owned(p)]
        if not staged:
            return CommitResult(task_id, None, (), others, owner)
        text = (message or f"{task_id}: changes of task {task_id}").rstrip()
        # Naming the paths (--only) keeps out anything staged behind our back since the check.
        git.run_git(
            ["--literal-pathspecs", "commit", "-q", "-m", f"{text}\n\nTask: {task_id}\n",
             "--pathspec-from-file=-", "--pathspec-file-nul"],
            cwd=root,
            input="".join(p + "\0" for p in staged).encode("utf-8", "surrogateescape"),
        )  # fmt: skip
        head = git.run_git(["rev-parse", "HEAD"], cwd=root).stdout.decode().strip()
        return CommitResult(task_id, head, tuple(staged), others, owner)


def run(args: argparse.Namespace) -> int:
    result = commit_task(worktree_root(args.repo), args.task, args.message)
    if args.json:
        print(
            json.dumps(
                {
                    "task": result.task,
                    "commit": result.commit,
                    "paths": list(result.paths),
                    "leftAlone": list(result.left_alone),
                    "ownedBy": result.owner,
                },
                indent=2,
            )
        )
        return 0
    if result.commit is None:
        print(f"nothing to commit for task {result.task}")
    else:
        print(f"committed {result.commit[:12]} for task {result.task}: {', '.join(result.paths)}")
    if result.left_alone:
        print(f"left {len(result.left_alone)} changes outside task {result.task} untouched")
    return 0
