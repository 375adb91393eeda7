"""Writing files so that readers see the old content or the new, never a torn file.

Every file integrator writes whole goes through here: a private temporary name beside the
target (pid and random, so two writers never share one), the data, an optional fsync,
one `rename()`, and an fsync of the folder when the write must survive a power cut.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path


def fsync_dir(path: str | Path) -> None:
    """Make a folder's entries (a rename into it) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file(path: str | Path, data: bytes, *, sync: bool, mode: int = 0o644) -> None:
    """Write `data` to `path` (created or truncated), fsyncing it when `sync`."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


def temporary_name(path: Path, prefix: str = ".") -> Path:
    """A private name beside `path` for a file about to be renamed onto it."""
    return path.with_name(f"{prefix}{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")


def atomic_write(
    path: Path, data: bytes, *, sync: bool = True, mode: int = 0o644, prefix: str = "."
) -> None:
    """Replace `path` with `data` in one rename; `sync` makes it durable (file and folder).

    `prefix` starts the temporary name: git's object folders clean up `tmp_` files that
    a crash leaves behind, so packs use that.
    """
    tmp = temporary_name(path, prefix)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if sync:
        fsync_dir(path.parent)


def read_at_most(fd: int, limit: int) -> bytes:
    """Up to `limit` bytes from an open file (a reader that never trusts the file's size)."""
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = os.read(fd, min(1 << 16, limit - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


class NotPrivate(Exception):
    """A file that may not hold a secret: `why` is `open` (with `strerror`), `type` (not a
    regular file) or `mode` (group or others may read it; `mode` holds its bits)."""

    def __init__(self, why: str, *, strerror: str = "", mode: int = 0) -> None:
        super().__init__(why)
        self.why = why
        self.strerror = strerror
        self.mode = mode


def read_private(path: Path, limit: int, *, follow: bool = True) -> bytes:
    """Up to `limit` bytes of a secret's file: a regular file only its owner may read
    (`mode & 0o077 == 0`), checked on the descriptor that is read; never blocked on a pipe
    planted at its name; a link at its name refused unless `follow`. NotPrivate otherwise."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as err:
        raise NotPrivate("open", strerror=err.strerror or str(err)) from err
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotPrivate("type")
        if info.st_mode & 0o077:
            raise NotPrivate("mode", mode=stat.S_IMODE(info.st_mode))
        return read_at_most(fd, limit)
    except OSError as err:
        raise NotPrivate("open", strerror=err.strerror or str(err)) from err
    finally:
        os.close(fd)
