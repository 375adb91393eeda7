"""Committing only a task's owned paths in a shared checkout (`integrator commit`).

File partitioning does not partition `.git/`. Every commit runs under one
repository-wide lock and takes only the task's owned paths (never `git add -A`). Unowned
changes in the working tree are left alone and reported; committing only owned paths
selects content, it does not undo a write outside the task (the guard does that).

In a repository prepared with `integrator init` the commit is a *candidate*: its parent is
the contract's base commit and its tree is that base plus the task's owned changes, built
in a private index. No ref moves, and neither the checkout's HEAD nor its index changes:
the canonical branch moves only when the gate lands the candidate, and each task's
candidate holds its own changes only, whatever other tasks committed. Elsewhere (a plain
repository, no queue) the task's paths are committed onto HEAD, refusing when something
the task does not own is already staged — that belongs to someone else's commit.
"""

from __future__ import annotations

import contextlib
import fcntl
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from integrator import paths
from integrator.documents.contract import OwnershipContract
from integrator.errors import ClaimConflictError, UsageError
from integrator.fleet.guard import staged_paths
from integrator.fleet.planner import expand_writeset
from integrator.fleet.taskqueue import Queue
from integrator.fleet.tasks import load_task
from integrator.plumbing import git
from integrator.records.canonical import Canonical

LOCK_NAME = "integrator-commit.lock"


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
    base: str | None = None  # a candidate's parent (the contract's base); None: onto HEAD


def _message(task_id: str, message: str | None) -> str:
    text = (message or f"{task_id}: changes of task {task_id}").rstrip()
    return f"{text}\n\nTask: {task_id}\n"


def commit_task(root: Path, task_id: str, message: str | None = None) -> CommitResult:
    """Commit the task's owned changes; see the module docstring."""
    with Canonical(root) as canonical:
        gated = canonical.initialized
        claim = canonical.claim(task_id) if gated else None
    if gated:
        if claim is None or claim.view.state != "live":
            state = "no claim" if claim is None else f"a {claim.view.state} claim"
            raise UsageError(
                f"task {task_id} has {state} here; in a repository with an integration queue "
                "a commit is a candidate for the task's live contract: claim the task first "
                "(integrator task claim --in-place)"
            )
        return _candidate(root, task_id, claim.contract, message)
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
        # Naming the paths (--only) keeps out anything staged behind our back since the check.
        git.run_git(
            ["--literal-pathspecs", "commit", "-q", "-m", _message(task_id, message),
             "--pathspec-from-file=-", "--pathspec-file-nul"],
            cwd=root,
            input="".join(p + "\0" for p in staged).encode("utf-8", "surrogateescape"),
        )  # fmt: skip
        head = git.run_git(["rev-parse", "HEAD"], cwd=root).stdout.decode().strip()
        return CommitResult(task_id, head, tuple(staged), others, owner)


def _candidate(
    root: Path, task_id: str, contract: OwnershipContract, message: str | None
) -> CommitResult:
    """The contract's base plus the task's owned working-tree changes, as a new commit."""
    matcher = contract.matcher()
    owner = f"contract generation {contract.ownership_generation}"
    base = contract.base_commit

    def owned(path: str) -> bool:
        return paths.unsafe_reason(path) is None and matcher.covers(path)

    with repository_lock(root), tempfile.TemporaryDirectory(prefix="integrator-commit-") as tmp:
        index = Path(tmp) / "index"
        git.run_git(["read-tree", base], cwd=root, index_file=index)
        # Every file of the base and every file of the working tree git would track.
        listed = git.run_git(
            ["ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            index_file=index,
        )
        names = listed.stdout.decode("utf-8", "surrogateescape").split("\0")
        mine = sorted({name for name in names if name and owned(name)})
        if mine:
            git.run_git(
                ["--literal-pathspecs", "add", "-A", "--pathspec-from-file=-",
                 "--pathspec-file-nul"],
                cwd=root,
                input="".join(p + "\0" for p in mine).encode("utf-8", "surrogateescape"),
                index_file=index,
            )  # fmt: skip
        changed = git.run_git(
            ["diff-index", "--cached", "-z", "--name-only", "--no-renames", base],
            cwd=root,
            index_file=index,
        )
        staged = tuple(
            p for p in changed.stdout.decode("utf-8", "surrogateescape").split("\0") if p
        )
        tree = git.run_git(["write-tree"], cwd=root, index_file=index).stdout.decode().strip()
    others = tuple(p for p in changed_paths(root) if not owned(p) and not p.startswith(".agents/"))
    if not staged:
        return CommitResult(task_id, None, (), others, owner, base)
    made = git.run_git(
        ["commit-tree", tree, "-p", base, "-F", "-"],
        cwd=root,
        input=_message(task_id, message).encode("utf-8"),
    )
    return CommitResult(task_id, made.stdout.decode().strip(), staged, others, owner, base)
