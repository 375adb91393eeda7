"""The configuration file: which one is in effect, its tables, and the defaults it gives.

One file is in effect, the first found of:

1. `--config FILE` (commands that take it: `serve`, `config show`);
2. `$INTEGRATOR_CONFIG`;
3. `<git dir>/integrator/config.toml` of the repository named by `--repo`, else of the one
   the current folder is in (for a bare repository its own folder; for a work tree the
   common git dir, so every worktree of one repository reads the same file);
4. `$XDG_CONFIG_HOME/integrator/config.toml` (default `~/.config/integrator/config.toml`).

A file in the work tree (`.integrator.toml`) is deliberately not read: it would travel with
every branch and every agent's commit, and a candidate could change the daemon's settings.

Tables: `[defaults]` (`repo`, `spool`: the canonical repository and the spool the commands
use when `--repo` / `--spool` are not given; relative paths are relative to the file) and
`[serve]` (the daemon's settings, daemon/settings.py). The environment (`INTEGRATOR_REPO`,
`INTEGRATOR_SPOOL`) overrides the file; the command line overrides both. An unknown table or
key is an error that names it (exit 2), never ignored.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from integrator.errors import ConfigurationError
from integrator.limits import INPUT_BYTES

FILE_NAME = "config.toml"
TABLES = ("defaults", "serve")
DEFAULT_KEYS = ("repo", "spool")
ENV_CONFIG = "INTEGRATOR_CONFIG"
ENV_OF = {"repo": "INTEGRATOR_REPO", "spool": "INTEGRATOR_SPOOL"}


class Value(NamedTuple):
    """One effective setting and where it came from (`default`, a file, `$VARIABLE`)."""

    value: object
    source: str


class Config(NamedTuple):
    """The file in effect (None when there is none), its tables, and how it was found.
    (A `NamedTuple`, not a dataclass: every command reads it, and `dataclasses` costs
    start-up; its tables are never changed in place.)"""

    path: Path | None
    found_by: str
    tables: Mapping[str, dict[str, Any]] = {}

    def table(self, name: str) -> dict[str, Any]:
        return dict(self.tables.get(name, {}))

    def default(self, key: str, env: Mapping[str, str] | None = None) -> Value | None:
        """`[defaults] key`, overridden by its environment variable; None when neither
        says anything."""
        env = os.environ if env is None else env
        variable = ENV_OF[key]
        if env.get(variable):
            return Value(Path(env[variable]).absolute(), f"${variable}")
        if key in self.tables.get("defaults", {}):
            assert self.path is not None  # a table comes from a file
            return Value(self.tables["defaults"][key], str(self.path))
        return None


def git_dir_of(start: Path) -> Path | None:
    """The (common) git dir of the repository `start` is in, found by walking up as git
    does, without opening it; None outside any repository."""
    here = start.absolute()
    for folder in (here, *here.parents):
        dotgit = folder / ".git"
        if dotgit.is_dir():
            return _common(dotgit)
        if dotgit.is_file():
            try:
                text = dotgit.read_text("utf-8", errors="replace").strip()
            except OSError:
                return None
            if text.startswith("gitdir:"):
                return _common((folder / text[len("gitdir:") :].strip()).resolve())
            return None
        if (
            (folder / "HEAD").is_file()
            and (folder / "objects").is_dir()
            and (folder / "refs").is_dir()
        ):
            return folder  # a bare repository
    return None


def _common(git_dir: Path) -> Path:
    """A linked worktree's git dir names the common one in `commondir`."""
    try:
        pointer = (git_dir / "commondir").read_text("utf-8").strip()
    except OSError:
        return git_dir
    return (git_dir / pointer).resolve()


def user_file(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or "~").expanduser() / ".config")
    return Path(base) / "integrator" / FILE_NAME


def discover(
    explicit: Path | None = None,
    repo: Path | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> tuple[Path | None, str]:
    """The file in effect and how it was found (see the module's docstring)."""
    env = os.environ if env is None else env
    if explicit is not None:
        return explicit, "--config"
    if env.get(ENV_CONFIG):
        return Path(env[ENV_CONFIG]), f"${ENV_CONFIG}"
    start = repo if repo is not None else (cwd or Path.cwd())
    git_dir = git_dir_of(start)
    if git_dir is not None and (git_dir / "integrator" / FILE_NAME).is_file():
        return git_dir / "integrator" / FILE_NAME, "the repository"
    user = user_file(env)
    if user.is_file():
        return user, "$XDG_CONFIG_HOME" if env.get("XDG_CONFIG_HOME") else "~/.config"
    return None, "none found"


def parse(path: Path, data: bytes) -> dict[str, dict[str, Any]]:
    """The tables of a configuration file; ConfigurationError naming what is wrong (an
    unknown table or `[defaults]` key, a value of the wrong type, bad TOML)."""
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise ConfigurationError(f"cannot read configuration {path}: {err}") from err
    tables: dict[str, dict[str, Any]] = {}
    for name, table in doc.items():
        if name not in TABLES:
            raise ConfigurationError(
                f"{path}: unknown table [{name}] (or a key outside a table); known tables: "
                + ", ".join(f"[{t}]" for t in TABLES)
            )
        if not isinstance(table, dict):
            raise ConfigurationError(f"{path}: {name} must be a table ([{name}])")
        tables[name] = table
    for key, value in tables.get("defaults", {}).items():
        if key not in DEFAULT_KEYS:
            raise ConfigurationError(
                f"{path}: unknown setting defaults.{key}; known: {', '.join(DEFAULT_KEYS)}"
            )
        if not isinstance(value, str) or not value:
            raise ConfigurationError(f"{path}: defaults.{key} must be a path (a string)")
        tables["defaults"][key] = Path(os.path.normpath((path.parent / value).absolute()))
    return tables


def read(path: Path) -> dict[str, dict[str, Any]]:
    """`parse` of the file at `path`, read up to `INPUT_BYTES`."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(INPUT_BYTES + 1)
    except OSError as err:
        raise ConfigurationError(
            f"cannot read configuration {path}: {err.strerror or err}"
        ) from err
    if len(data) > INPUT_BYTES:
        raise ConfigurationError(f"{path} is more than the limit of {INPUT_BYTES:,} bytes")
    return parse(path, data)


def load(
    explicit: Path | None = None,
    repo: Path | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Config:
    """The configuration in effect: discovered, read and checked."""
    path, found_by = discover(explicit, repo, env, cwd)
    if path is None:
        return Config(None, found_by)
    return Config(path, found_by, read(path))


def apply_defaults(
    args: Any, wanted: Mapping[str, str], env: Mapping[str, str] | None = None
) -> None:
    """Fill the arguments named in `wanted` (`repo`, `spool`) that the command line left
    None from the environment or the configuration file. `wanted[name]` says what happens
    when neither gives one: `required` (a usage error naming all three), `here` (the current
    folder), `optional` (stays None). The file read is kept in `args.config_in_effect`."""
    from integrator.errors import UsageError

    missing = [name for name in wanted if getattr(args, name, None) is None]
    if not missing:
        return
    env = os.environ if env is None else env
    explicit = getattr(args, "config", None)
    repo = getattr(args, "repo", None) or env.get(ENV_OF["repo"]) or None
    given = explicit if isinstance(explicit, Path) else None
    config = load(given, Path(repo) if repo else None, env)
    args.config_in_effect = config
    for name in missing:
        found = config.default(name, env)
        if found is not None:
            setattr(args, name, found.value)
        elif wanted[name] == "here":
            setattr(args, name, ".")
        elif wanted[name] == "required":
            flag = "--repo PATH" if name == "repo" else "--spool DIR"
            raise UsageError(
                f"{flag} is required here: give it, set ${ENV_OF[name]}, or set "
                f"[defaults] {name} in the configuration file (integrator config show)"
            )
