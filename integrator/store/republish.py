"""Verdicts to publish again on the intake, asked by anyone who changed one.

A verdict published on the intake must follow the submission's later life: an ejection
refiles it FENCED, a release manager's approval on the review page refiles it ACCEPTED.
Whoever refiles it (the daemon's promoter, the page, `integrator review approve`) asks
here; the daemon serving the intake publishes what is asked at its next drain and only
then forgets the request. One empty file per submission id in the spool's
`intake-republish/` folder: creating and renaming a file are atomic, so processes that ask
at the same time never lose each other's request (a shared list rewritten by each would).
The daemon *takes* a request (renames it to `<id>.taken`) before it reads the verdict, and
removes the taken file once the verdict is out: a request asked while it publishes is a new
file, published at the next drain, never forgotten with the one taken.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from integrator.files import atomic_write
from integrator.store.spool import ID_RE

ORIGIN_FILE = "intake.json"  # in a submission's folder when it was taken from the intake
FOLDER = "intake-republish"  # in the spool: one empty file per verdict to publish again
LEGACY_FILE = "intake-republish.json"  # the list earlier versions kept; read once, then gone
TAKEN = ".taken"  # a request the daemon took, removed once published
MOST = 10_000  # requests read at one drain (the rest wait for the next)

__all__ = [
    "FOLDER", "LEGACY_FILE", "ORIGIN_FILE", "ask", "done", "from_intake", "take", "waiting",
]  # fmt: skip


def from_intake(folder: Path) -> bool:
    """Whether the submission filed at `folder` came through an intake (its verdict was
    published there, so a change of verdict must be published too)."""
    return (folder / ORIGIN_FILE).is_file()


def ask(spool_root: Path, sid: str) -> None:
    """Ask for `sid`'s verdict to be published again (idempotent, durable once returned)."""
    if not ID_RE.fullmatch(sid):
        raise ValueError(f"not a submission id: {sid!r}")
    folder = spool_root / FOLDER
    folder.mkdir(mode=0o755, exist_ok=True)
    atomic_write(folder / sid, b"")


def waiting(spool_root: Path) -> list[str]:
    """The ids waiting to be published again (asked or taken and not yet out), oldest id
    first. Names that are not requests (nothing integrator wrote) are ignored."""
    _adopt_legacy(spool_root)
    try:
        with os.scandir(spool_root / FOLDER) as entries:
            names = {e.name.removesuffix(TAKEN) for e in entries}
    except FileNotFoundError:
        return []
    return sorted(n for n in names if ID_RE.fullmatch(n))[:MOST]


def take(spool_root: Path, sid: str) -> None:
    """Take `sid`'s request before reading the verdict to publish: an ask after this is a
    new request. Taking a request already taken (an earlier drain failed) is a no-op."""
    folder = spool_root / FOLDER
    with contextlib.suppress(FileNotFoundError):
        os.rename(folder / sid, folder / f"{sid}{TAKEN}")


def done(spool_root: Path, sid: str) -> None:
    """Forget `sid`'s taken request: its verdict is out (a request asked since stays)."""
    if ID_RE.fullmatch(sid):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(spool_root / FOLDER / f"{sid}{TAKEN}")


def _adopt_legacy(spool_root: Path) -> None:
    """Turn the list an earlier version kept into requests, then remove it."""
    path = spool_root / LEGACY_FILE
    try:
        with open(path, "rb") as fh:
            listed = json.loads(fh.read(1 << 20) or b"[]")
    except FileNotFoundError:
        return
    except (OSError, ValueError):
        listed = []
    for sid in listed if isinstance(listed, list) else []:
        if isinstance(sid, str) and ID_RE.fullmatch(sid):
            ask(spool_root, sid)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
