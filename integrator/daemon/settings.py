"""The daemon's settings: what the `[serve]` table of the configuration file may set
(`integrator serve --config FILE`, else the file found as integrator/configfile.py says).

SIGHUP reads the file again; unknown tables, unknown keys and wrong types are refused,
naming them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from integrator.configfile import read
from integrator.errors import ConfigurationError
from integrator.limits import BUNDLE_BYTES


@dataclass(frozen=True)
class Settings:
    """What `--config FILE` ([serve] table) may set; SIGHUP reads the file again."""

    poll: float = 2.0
    watch: bool = True
    batch_size: int = 64
    batch_seconds: float = 0.25
    bundle_max_bytes: int = BUNDLE_BYTES
    log_level: str = "info"
    max_backoff: float = 30.0
    mirror_timeout: float = 0.5  # SQLite busy timeout; read at start only
    # Worker processes evaluating candidates beside the daemon's own (read at start only):
    # 0 evaluates in the daemon (the default: on two cores workers did not pay, see
    # docs/bench.md); -1 picks one fewer than the cores available, at most 4.
    evaluation_workers: int = 0
    # Seconds this host's clock may be behind the server's (or other hosts' records) before
    # it refuses to judge leases (daemon/clock_check.py); remote mode only.
    max_clock_skew: float = 300.0


def load_settings(path: Path | None, base: Settings) -> Settings:
    """`base` overridden by the `[serve]` table of a TOML file (keys in kebab-case)."""
    if path is None:
        return base
    return settings_from(path, read(path).get("serve", {}), base)


def settings_from(path: Path, table: dict[str, Any], base: Settings) -> Settings:
    """`base` overridden by the `[serve]` table `table` of the file at `path`."""
    known = {f.name.replace("_", "-"): f for f in fields(Settings)}
    changes: dict[str, Any] = {}
    for key, value in table.items():
        field = known.get(key)
        if field is None:
            raise ConfigurationError(f"{path}: unknown setting serve.{key}; known: {sorted(known)}")
        kind = type(getattr(base, field.name))
        ok = isinstance(value, kind) or (kind is float and type(value) is int)
        if not ok or (kind is not bool and isinstance(value, bool)):
            raise ConfigurationError(f"{path}: serve.{key} must be of type {kind.__name__}")
        changes[field.name] = kind(value)
    settings = replace(base, **changes)
    if settings.poll <= 0 or settings.batch_size < 1 or settings.batch_seconds < 0:
        raise ConfigurationError(f"{path}: poll and batch-size must be positive")
    if not 0 < settings.max_clock_skew <= 86400:
        raise ConfigurationError(f"{path}: serve.max-clock-skew must be 1 to 86400 seconds")
    if not -1 <= settings.evaluation_workers <= 64:
        raise ConfigurationError(f"{path}: serve.evaluation-workers must be -1 (auto) to 64")
    return settings


def resolve_settings(
    config: Path | None,
    *,
    poll: float | None = None,
    watch: bool = True,
    evaluation_workers: int | None = None,
    intake: bool = False,
) -> Settings:
    """Defaults, then the config file, then what the command line says (`poll`, `watch`,
    `evaluation_workers`; a daemon with an intake and no config file polls every second)."""
    settings = load_settings(config, Settings())
    if poll is not None:
        if poll <= 0:
            raise ConfigurationError("--poll must be positive")
        settings = replace(settings, poll=poll)
    elif intake and config is None:
        settings = replace(settings, poll=1.0)
    if not watch:
        settings = replace(settings, watch=False)
    if evaluation_workers is not None:
        if not -1 <= evaluation_workers <= 64:
            raise ConfigurationError("--evaluation-workers must be -1 (auto) to 64")
        settings = replace(settings, evaluation_workers=evaluation_workers)
    return settings
