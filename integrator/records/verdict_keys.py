"""A repository's verdict keys: the private key its daemon signs published verdicts with
(`integrator.verdictKeyFile`) and the public keys it trusts (`integrator.trustedVerdictKey`,
plus `$INTEGRATOR_VERDICT_KEYS` for readers without a config of their own)."""

from __future__ import annotations

import os
from pathlib import Path

import pygit2

from integrator.documents.attempt_key import AttemptKeyError
from integrator.documents.verdict_key import (
    KEY_FILE_BYTES,
    KEY_FILE_CONFIG,
    TRUSTED_CONFIG,
    TRUSTED_ENV,
    VerdictKey,
    new_verdict_key,
    parse_verdict_key,
    trusted_keys,
)
from integrator.errors import ConfigurationError
from integrator.files import NotPrivate, atomic_write, read_private

__all__ = ["daemon_key", "make_key_file", "trusted", "trusted_in"]


def _values(config: pygit2.Config, name: str) -> list[str]:
    try:
        return [str(v) for v in config.get_multivar(name)]
    except (KeyError, pygit2.GitError):
        return []


def read_key_file(path: Path) -> VerdictKey:
    try:
        return parse_verdict_key(read_private(path, KEY_FILE_BYTES + 1, follow=False))
    except NotPrivate as err:
        raise ConfigurationError(f"the verdict key {path}: {err}") from err
    except AttemptKeyError as err:
        raise ConfigurationError(f"the verdict key {path} is not one: {err}") from err


def daemon_key(repo: pygit2.Repository) -> VerdictKey | None:
    """The key this repository's daemon signs verdicts with; None when none is set."""
    files = _values(repo.config, KEY_FILE_CONFIG)
    return read_key_file(Path(files[-1])) if files else None


def trusted(repo: pygit2.Repository) -> frozenset[str]:
    """The verdict keys this repository trusts: its config's, the environment's, and its
    own daemon key's public half."""
    keys = trusted_in(_values(repo.config, TRUSTED_CONFIG))
    own = daemon_key(repo)
    return keys | {own.public} if own is not None else keys


def trusted_in(values: list[str]) -> frozenset[str]:
    """`values` and `$INTEGRATOR_VERDICT_KEYS`, as trusted public keys."""
    return trusted_keys([*values, os.environ.get(TRUSTED_ENV, "")])


def make_key_file(path: Path) -> VerdictKey:
    """The verdict key at `path`, made there (mode 0600) when there is none yet."""
    if path.exists() or path.is_symlink():
        return read_key_file(path)
    key = new_verdict_key()
    atomic_write(path, key.to_bytes(), mode=0o600)
    return key


def configure(repo: Path, key_file: Path | None, trust: list[str]) -> list[str]:
    """Set up verdict signing in `repo`: its daemon's key (`key_file`, made there when
    absent) and public keys to trust; what was done, one line each."""
    from integrator.plumbing.git import run_git

    done: list[str] = []
    opened = pygit2.Repository(str(repo))
    try:
        have = set(_values(opened.config, TRUSTED_CONFIG))
    finally:
        opened.free()
    bad = [k for k in trust if k not in trusted_keys([k])]
    if bad:
        raise ConfigurationError(f"not a verdict key (ed25519:<base64 of 32 bytes>): {bad[0]!r}")
    if key_file is not None:
        path = key_file.resolve()
        key = make_key_file(path)
        run_git(["config", KEY_FILE_CONFIG, str(path)], git_dir=repo)
        done.append(f"verdicts published here are signed with {path} (public {key.public})")
        trust = [*trust, key.public]
    for public in dict.fromkeys(trust):
        if public not in have:
            run_git(["config", "--add", TRUSTED_CONFIG, public], git_dir=repo)
            have.add(public)
            done.append(f"trusts verdict key {public}")
    return done
