"""Git as the drills see it: a pinned environment, plain `git` processes, agent commits.

The drills read the recorded history with `git` processes (never with integrator's own
readers), so a figure cannot inherit a bug of the code it measures. Agents' commits are
written with pygit2 because they are the drill's input, not its subject.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pygit2

# Identities pinned and the machine's git configuration ignored, for the drills' own git
# processes and for every integrator process they start.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Drill Agent",
    "GIT_AUTHOR_EMAIL": "agent@drills.invalid",
    "GIT_COMMITTER_NAME": "Drill Agent",
    "GIT_COMMITTER_EMAIL": "agent@drills.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "LC_ALL": "C",
}
ZERO = "0" * 40
QUEUE = "refs/integrator/queue/main"
MAIN = "refs/heads/main"
POLICY = "refs/integrator/policy"

# A file's content, or (content, kind) with kind "x" executable, "l" symlink (content is
# the target), "g" gitlink (content is the submodule commit id). None deletes the path.
Spec = str | bytes | tuple[str | bytes, str] | None
_MODES = {"f": 0o100644, "x": 0o100755, "l": 0o120000, "g": 0o160000}


def environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of every process a drill starts: no fault armed unless asked."""
    env = {k: v for k, v in os.environ.items() if k != "INTEGRATOR_FAULT"}
    for key in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        env.pop(key, None)
    env.update(GIT_ENV)
    env.update(extra or {})
    return env


def git(*args: str, cwd: Path, check: bool = True) -> str:
    """Run git; a failure raises with git's own message (the drill reports it)."""
    proc = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, env=environment(), check=False
    )
    if check and proc.returncode != 0:
        raise RuntimeError(
            f"git {' '.join(args)} in {cwd} failed ({proc.returncode}): "
            f"{proc.stderr.decode('utf-8', 'replace').strip()}"
        )
    return proc.stdout.decode("utf-8", "surrogateescape").rstrip("\n")


def rev(repo: Path, name: str) -> str | None:
    """The object a ref or revision names, or None when it does not resolve."""
    out = git("rev-parse", "--verify", "-q", name, cwd=repo, check=False)
    return out.strip() or None


def make_commit(repo: Path, files: Mapping[str, Spec], *, parent: str | None, message: str) -> str:
    """Write a commit applying `files` on top of `parent` (no ref, no work tree touched)."""
    r = pygit2.Repository(str(repo))
    index = pygit2.Index()
    parents: list[pygit2.Oid] = []
    if parent is not None:
        commit = r.revparse_single(parent).peel(pygit2.Commit)
        index.read_tree(commit.tree)
        parents.append(commit.id)
    for path, spec in files.items():
        if spec is None:
            index.remove(path)
            continue
        content, kind = spec if isinstance(spec, tuple) else (spec, "f")
        data = content.encode() if isinstance(content, str) else content
        oid = pygit2.Oid(hex=data.decode()) if kind == "g" else r.create_blob(data)
        index.add(pygit2.IndexEntry(path, oid, pygit2.enums.FileMode(_MODES[kind])))
    tree = index.write_tree(r)
    sig = pygit2.Signature(GIT_ENV["GIT_AUTHOR_NAME"], GIT_ENV["GIT_AUTHOR_EMAIL"])
    return str(r.create_commit(None, sig, sig, message, tree, parents))


def message(repo: Path, commit: str) -> str:
    return git("log", "-1", "--format=%B", commit, cwd=repo)


def parents(repo: Path, commit: str) -> list[str]:
    return git("rev-list", "--parents", "-n", "1", commit, cwd=repo).split()[1:]


def first_parent_chain(repo: Path, tip: str | None, stop: str | None) -> list[str]:
    """Commits from `stop` (exclusive) to `tip` along first parents, oldest first."""
    if tip is None or tip == stop:
        return []
    spec = f"{stop}..{tip}" if stop else tip
    out = git("rev-list", "--first-parent", "--reverse", spec, cwd=repo)
    return out.split()


def reflog(repo: Path, ref: str) -> list[tuple[str, str]]:
    """(old, new) of every recorded update of `ref`, oldest first (logAllRefUpdates=always)."""
    path = Path(git("rev-parse", "--git-common-dir", cwd=repo))
    if not path.is_absolute():
        path = repo / path
    log = path / "logs" / ref
    if not log.exists():
        return []
    out = []
    for line in log.read_text("utf-8", "replace").splitlines():
        fields = line.split(" ", 2)
        if len(fields) >= 2:
            out.append((fields[0], fields[1]))
    return out


def git_dir(repo: Path) -> Path:
    path = Path(git("rev-parse", "--git-common-dir", cwd=repo))
    return path if path.is_absolute() else repo / path


def synthetic(repo: Path, tree_of: str, base: str) -> str:
    """A commit holding `tree_of`'s tree with `base` as its only parent (a merge input)."""
    tree = git("rev-parse", f"{tree_of}^{{tree}}", cwd=repo)
    return git("commit-tree", tree, "-p", base, "-m", "drill merge input", cwd=repo)


def merge_tree(repo: Path, base: str, ours: str, theirs: str) -> tuple[bool, str | None]:
    """(clean, tree) of `git merge-tree --write-tree` over `ours` and `theirs` onto `base`.

    git 2.39 has no `--merge-base`, so both sides become synthetic commits whose only
    parent is `base`; git then finds exactly that merge base.
    """
    left = synthetic(repo, ours, base)
    right = synthetic(repo, theirs, base)
    proc = subprocess.run(
        ["git", "merge-tree", "--write-tree", "--name-only", "--no-messages", left, right],
        cwd=repo,
        capture_output=True,
        env=environment(),
        check=False,
    )
    lines = proc.stdout.decode("utf-8", "surrogateescape").splitlines()
    if not lines or len(lines[0]) not in (40, 64):
        raise RuntimeError(f"git merge-tree wrote no tree: {proc.stderr.decode().strip()}")
    return proc.returncode == 0, lines[0] if proc.returncode == 0 else None
