"""Validation folders left behind by a promoter that died, found and removed.

Every run checks the head's tree out into `integrator-validation-*` in the scratch folder
(the system's temporary folder by default) and removes it when the run ends. A promoter
killed by SIGKILL, or a host that lost power, leaves its folders there: a 100,000-file
checkout each. Each folder therefore names its owner in `owner` — the boot, the process id
and the process's start time (`/proc/<pid>/stat`, so a reused pid is not mistaken for the
owner) — and a promoter starting up removes every folder of a process that is gone.

The scratch folder is shared (`/tmp`): only real folders (never a link) owned by this
user, with an owner file that is a regular file naming a process that no longer runs, are
removed. A folder without an owner file is left alone unless it is a day old (one made by
a run that has not written its owner yet, or by another program).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
import time
from pathlib import Path

PREFIX = "integrator-validation-"
OWNER_FILE = "owner"
UNOWNED_AGE_S = 24 * 3600
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def _boot() -> str:
    try:
        return _BOOT_ID.read_text().strip()
    except OSError:
        return "-"


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot, None when it does not run."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    fields = data.rpartition(b")")[2].split()
    return fields[19].decode() if len(fields) > 19 else None


def owner_line(pid: int | None = None) -> str:
    pid = os.getpid() if pid is None else pid
    return f"{_boot()} {pid} {_start_time(pid) or '-'}\n"


def mark(root: Path) -> None:
    """Name this process as the owner of a fresh validation folder."""
    (root / OWNER_FILE).write_text(owner_line())


def _alive(line: str) -> bool:
    parts = line.split()
    if len(parts) != 3 or not parts[1].isdigit():
        return False  # not an owner line we wrote: nobody we know holds it
    boot, pid, started = parts
    if boot != _boot():
        return False  # written before the last boot
    return _start_time(int(pid)) == started


def _owner_of(folder: Path) -> str | None:
    """The owner file's line; None when there is none (or it is not a small regular file)."""
    try:
        fd = os.open(folder / OWNER_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > 256:
            return None
        return os.read(fd, 256).decode("ascii", "replace")
    finally:
        os.close(fd)


def abandoned(scratch: Path | None = None, *, now: float | None = None) -> list[Path]:
    """The validation folders in `scratch` whose owner is gone (see the module's text)."""
    where = Path(scratch or tempfile.gettempdir())
    now = time.time() if now is None else now
    found = []
    try:
        names = os.listdir(where)
    except OSError:
        return []
    for name in names:
        if not name.startswith(PREFIX):
            continue
        folder = where / name
        try:
            info = os.lstat(folder)
        except OSError:
            continue
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            continue  # a link, a file, or someone else's
        line = _owner_of(folder)
        if line is None:
            if now - info.st_mtime > UNOWNED_AGE_S:
                found.append(folder)
            continue
        if not _alive(line):
            found.append(folder)
    return sorted(found)


def sweep(scratch: Path | None = None) -> list[Path]:
    """Remove the abandoned validation folders; returns those removed."""
    removed = []
    for folder in abandoned(scratch):
        with contextlib.suppress(OSError):
            remove_folder(folder)
            removed.append(folder)
    return removed


def make_writable(path: str) -> None:
    """Let `path` and its folder be removed. chmod follows links, and the command (agents'
    code) may have left one pointing anywhere the promoter can write: links are skipped."""
    with contextlib.suppress(OSError):
        for target in (os.path.dirname(path), path):
            if not stat.S_ISLNK(os.lstat(target).st_mode):
                os.chmod(target, 0o700)


def remove_folder(root: Path) -> None:
    """Remove the scratch folder even where the command made parts of it read-only."""

    def writable(func: object, path: str, exc: object) -> None:
        make_writable(path)
        with contextlib.suppress(OSError):
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)

    shutil.rmtree(root, onerror=writable)
