"""A repository's signing keys, of two kinds: verdict keys (the private key its daemon
signs published verdicts with, `integrator.verdictKeyFile`, and the public keys it trusts,
`integrator.trustedVerdictKey` plus `$INTEGRATOR_VERDICT_KEYS` for readers without a
config of their own) and authority keys (the same for the commits of claims, the policy
and controls: `integrator.authorityKeyFile`, `integrator.trustedAuthorityKey`,
`$INTEGRATOR_AUTHORITY_KEYS`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pygit2

from integrator.documents import authority_key, verdict_key
from integrator.documents.attempt_key import AttemptKeyError
from integrator.documents.verdict_key import KEY_FILE_BYTES, VerdictKey, trusted_keys
from integrator.errors import ConfigurationError
from integrator.files import NotPrivate, atomic_write, read_private

__all__ = ["AUTHORITY", "VERDICT", "KeyKind", "daemon_key", "make_key_file", "trusted",
           "trusted_in"]  # fmt: skip


@dataclass(frozen=True)
class KeyKind:
    """Where a kind of signing key is configured, and how its file reads."""

    label: str  # "a verdict key", "an authority key"
    key_file_config: str
    trusted_config: str
    trusted_env: str
    parse: Callable[[bytes], VerdictKey]
    new: Callable[[], VerdictKey]


VERDICT = KeyKind(
    "a verdict key", verdict_key.KEY_FILE_CONFIG, verdict_key.TRUSTED_CONFIG,
    verdict_key.TRUSTED_ENV, verdict_key.parse_verdict_key, verdict_key.new_verdict_key,
)  # fmt: skip
AUTHORITY = KeyKind(
    "an authority key", authority_key.KEY_FILE_CONFIG, authority_key.TRUSTED_CONFIG,
    authority_key.TRUSTED_ENV, authority_key.parse_authority_key,
    authority_key.new_authority_key,
)  # fmt: skip


def _values(config: pygit2.Config, name: str) -> list[str]:
    try:
        return [str(v) for v in config.get_multivar(name)]
    except (KeyError, pygit2.GitError):
        return []


def read_key_file(path: Path, kind: KeyKind = VERDICT) -> VerdictKey:
    try:
        return kind.parse(read_private(path, KEY_FILE_BYTES + 1, follow=False))
    except NotPrivate as err:
        raise ConfigurationError(f"{kind.label} {path}: {err}") from err
    except AttemptKeyError as err:
        raise ConfigurationError(f"{kind.label} {path} is not one: {err}") from err


def daemon_key(repo: pygit2.Repository, kind: KeyKind = VERDICT) -> VerdictKey | None:
    """The key of `kind` this repository signs with; None when none is set."""
    files = _values(repo.config, kind.key_file_config)
    return read_key_file(Path(files[-1]), kind) if files else None


def trusted(repo: pygit2.Repository, kind: KeyKind = VERDICT) -> frozenset[str]:
    """The keys of `kind` this repository trusts: its config's, the environment's, and its
    own key's public half."""
    keys = trusted_in(_values(repo.config, kind.trusted_config), kind)
    own = daemon_key(repo, kind)
    return keys | {own.public} if own is not None else keys


def trusted_in(values: list[str], kind: KeyKind = VERDICT) -> frozenset[str]:
    """`values` and the kind's environment variable, as trusted public keys."""
    return trusted_keys([*values, os.environ.get(kind.trusted_env, "")])


def make_key_file(path: Path, kind: KeyKind = VERDICT) -> VerdictKey:
    """The key at `path`, made there (mode 0600) when there is none yet."""
    if path.exists() or path.is_symlink():
        return read_key_file(path, kind)
    key = kind.new()
    atomic_write(path, key.to_bytes(), mode=0o600)
    return key


def configure(
    repo: Path, key_file: Path | None, trust: list[str], kind: KeyKind = VERDICT
) -> list[str]:
    """Set up signing of `kind` in `repo`: its own key (`key_file`, made there when
    absent) and public keys to trust; what was done, one line each."""
    from integrator.plumbing.git import run_git

    done: list[str] = []
    opened = pygit2.Repository(str(repo))
    try:
        have = set(_values(opened.config, kind.trusted_config))
    finally:
        opened.free()
    bad = [k for k in trust if k not in trusted_keys([k])]
    if bad:
        raise ConfigurationError(f"not {kind.label} (ed25519:<base64 of 32 bytes>): {bad[0]!r}")
    if key_file is not None:
        path = key_file.resolve()
        key = make_key_file(path, kind)
        run_git(["config", kind.key_file_config, str(path)], git_dir=repo)
        what = "verdicts published here" if kind is VERDICT else "authority records written here"
        done.append(f"{what} are signed with {path} (public {key.public})")
        trust = [*trust, key.public]
    for public in dict.fromkeys(trust):
        if public not in have:
            run_git(["config", "--add", kind.trusted_config, public], git_dir=repo)
            have.add(public)
            done.append(f"trusts {kind.label.split(' ', 1)[1]} {public}")
    return done
