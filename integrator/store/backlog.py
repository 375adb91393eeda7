"""The mirror's backlog: records not yet copied into the registry, durable in the spool.

One file per batch, `<time>-<random>-n<count>.jsonl`, written tmp + fsync + rename; a file
is deleted only after its records are committed in the registry.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Sequence
from pathlib import Path

import structlog
from pydantic import ValidationError

from integrator.errors import InfrastructureError
from integrator.files import fsync_dir, write_file
from integrator.store.entries import MirrorRecord, record_line

log = structlog.get_logger("integrator.mirror")


class Backlog:
    """Records not yet mirrored, as files `<time>-<random>-n<count>.jsonl` in one folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def append(self, records: Sequence[MirrorRecord], *, sync: bool = True) -> Path | None:
        """Durably add `records` as one file (before the spool moves that they describe)."""
        if not records:
            return None
        name = f"{time.time_ns():020d}-{secrets.token_hex(4)}-n{len(records)}.jsonl"
        data = b"".join(record_line(r) for r in records)
        tmp = self.folder / f".{name}.tmp"
        try:
            write_file(tmp, data, sync=sync)
            path = self.folder / name
            tmp.rename(path)
            if sync:
                fsync_dir(self.folder)
        except OSError as err:
            raise InfrastructureError(f"cannot write the mirror backlog: {err}") from err
        return path

    def files(self) -> list[Path]:
        try:
            with os.scandir(self.folder) as it:
                names = sorted(e.name for e in it if e.name.endswith(".jsonl"))
        except FileNotFoundError:
            return []
        return [self.folder / n for n in names if not n.startswith(".")]

    def depth(self) -> int:
        """Records waiting (read from the file names, so a scrape costs one listing)."""
        total = 0
        for path in self.files():
            _, _, count = path.stem.rpartition("-n")
            total += int(count) if count.isdigit() else 1
        return total

    def lag_seconds(self, now: float | None = None) -> float:
        """Age of the oldest record waiting, 0 when the mirror is caught up."""
        files = self.files()
        if not files:
            return 0.0
        stamp = files[0].name.split("-", 1)[0]
        born = int(stamp) / 1e9 if stamp.isdigit() else files[0].stat().st_mtime
        return max(0.0, (now if now is not None else time.time()) - born)

    def read(self, path: Path) -> list[MirrorRecord]:
        try:
            lines = path.read_bytes().splitlines()
            return [MirrorRecord.model_validate_json(line) for line in lines if line.strip()]
        except ValidationError:
            # Only complete files are renamed in, so this is damage from outside: keep the
            # file for a person and go on with the rest.
            path.rename(path.with_name(path.name + ".bad"))
            log.error("mirror.backlog_unreadable", file=path.name)
            return []
