"""Attempt key files: where they are kept, written 0600, read only when nobody else may.

The coordinator's key store is `<git dir>/integrator/attempt-keys/<task>/<attempt>.<generation>.json`
in the repository that issued the contract — inside the git directory, so never in a tree
git tracks — with folders 0700 and files 0600. Issuing puts the new key there; the
coordinator hands it to the agent (`contract issue --key-out`; `task claim` binds it into
the agent's worktree), and `integrator submit` finds it there when the agent works in that
repository or one of its worktrees.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from integrator.documents.attempt_key import AttemptKey, AttemptKeyError, parse_key
from integrator.errors import ConfigurationError
from integrator.files import NotPrivate, atomic_write, read_private
from integrator.refnames import refname_problem

STORE = Path("integrator") / "attempt-keys"  # under a repository's (common) git dir
KEY_FILE_BYTES = 4096


def key_name(task_id: str, attempt_id: str, generation: int) -> Path:
    for what, value in (("task id", task_id), ("attempt id", attempt_id)):
        problem = refname_problem(value)
        if problem:
            raise ConfigurationError(f"{what} {value!r} cannot name a key file: it {problem}")
    return Path(task_id) / f"{attempt_id}.{generation}.json"


def store_of(git_dir: Path) -> Path:
    return git_dir / STORE


def _private_dir(path: Path) -> None:
    """Make `path` (and the store folders above it) as 0700 folders; refuse a link."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise ConfigurationError(f"{path} is not a folder")
    if info.st_mode & 0o077:
        os.chmod(path, 0o700)


def write_key(path: Path, key: AttemptKey) -> Path:
    """Write `key` to `path` (0600, atomically, never through a link at its name) in a
    folder that exists."""
    atomic_write(path, key.to_bytes(), mode=0o600)
    return path


def read_key_file(path: Path) -> AttemptKey:
    """The key in `path`; ConfigurationError when it is not a private key file of ours:
    a link, not a regular file, readable by group or others, or not a key document."""
    try:
        data = read_private(path, KEY_FILE_BYTES + 1, follow=False)
    except NotPrivate as err:
        if err.why == "type":
            raise ConfigurationError(f"attempt key {path} is not a regular file") from err
        if err.why == "mode":
            raise ConfigurationError(
                f"attempt key {path} is readable by others (mode {err.mode:o}); keys must be "
                "mode 0600 (chmod 600 it, and ask for a new key if others read it)"
            ) from err
        raise ConfigurationError(f"cannot open attempt key {path}: {err.strerror}") from err
    try:
        return parse_key(data)
    except AttemptKeyError as err:
        raise ConfigurationError(f"attempt key {path}: {err}") from err


@dataclass(frozen=True)
class KeyStore:
    """The key store of one repository (its common git dir)."""

    root: Path

    def path(self, task_id: str, attempt_id: str, generation: int) -> Path:
        return self.root / key_name(task_id, attempt_id, generation)

    def save(self, key: AttemptKey) -> Path:
        path = self.path(key.task_id, key.attempt_id, key.generation)
        _private_dir(self.root)
        _private_dir(path.parent)
        return write_key(path, key)

    def load(self, task_id: str, attempt_id: str, generation: int) -> AttemptKey | None:
        path = self.path(task_id, attempt_id, generation)
        if not os.path.lexists(path):
            return None
        return read_key_file(path)
