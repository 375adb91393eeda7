"""Reading what a submitter put in its folder, as hostile input.

The submitter's folder stays the submitter's after the daemon claims it: it may hold
links, folders or pipes, change under the daemon, or hold files the daemon may not read.
Every read here opens the folder and then the file without following links, accepts
regular files only, checks the size before reading, and turns whatever its producer got
wrong into a UsageError (that submission's rejection), keeping InfrastructureError for the
host's own trouble.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from integrator.errors import InfrastructureError, UsageError
from integrator.files import read_at_most

# Errors opening a submission's own file that are its producer's doing, not the host's.
_PRODUCER_ERRORS = frozenset((errno.ELOOP, errno.EACCES, errno.EPERM, errno.ENXIO, errno.EISDIR))


def _producer_fault(err: OSError) -> bool:
    return err.errno in _PRODUCER_ERRORS


def open_submitted(folder: Path, name: str) -> tuple[int, os.stat_result]:
    """An fd on a regular file of the submitter's folder, opened without following links
    (the folder's own link either); UsageError for anything its producer got wrong."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        folder_fd = os.open(folder, flags | os.O_DIRECTORY)
    except FileNotFoundError as err:
        raise UsageError("the submission folder is gone") from err
    except OSError as err:
        if _producer_fault(err) or err.errno == errno.ENOTDIR:
            raise UsageError(f"the submission folder cannot be read: {err.strerror}") from err
        raise InfrastructureError(f"cannot open {folder}: {err}") from err
    try:
        fd = os.open(name, flags | os.O_NONBLOCK, dir_fd=folder_fd)
    except FileNotFoundError as err:
        raise UsageError(f"the submission folder has no {name}") from err
    except OSError as err:
        if _producer_fault(err):
            raise UsageError(f"{name} cannot be read: {err.strerror}") from err
        raise InfrastructureError(f"cannot read {folder}/{name}: {err}") from err
    finally:
        os.close(folder_fd)
    try:
        info = os.fstat(fd)
    except OSError as err:
        os.close(fd)
        raise InfrastructureError(f"cannot stat {folder}/{name}: {err}") from err
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise UsageError(f"{name} is not a regular file")
    return fd, info


def read_submitted(folder: Path, name: str, limit: int) -> bytes:
    """A regular file of the submitter's folder, of at most `limit` bytes (checked before
    reading); UsageError when it is a link, a folder, a pipe, unreadable or too big."""
    fd, info = open_submitted(folder, name)
    try:
        if info.st_size > limit:
            raise UsageError(f"{name} is {info.st_size} bytes, more than the limit of {limit}")
        data = read_at_most(fd, limit + 1)
    except OSError as err:
        raise InfrastructureError(f"cannot read {folder}/{name}: {err}") from err
    finally:
        os.close(fd)
    if len(data) > limit:
        raise UsageError(f"{name} grew past the limit of {limit} bytes")
    return data


def copy_submitted(folder: Path, name: str, destination: Path, limit: int) -> int:
    """Copy a regular file of the submitter's folder into `destination` (a file of the
    daemon's own), at most `limit` bytes; returns its size. Same refusals as
    `read_submitted`: git then reads the daemon's copy, never the submitter's path."""
    fd, info = open_submitted(folder, name)
    try:
        if info.st_size > limit:
            raise UsageError(f"the bundle is {info.st_size} bytes, more than the limit of {limit}")
        out = os.open(
            destination, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
        copied = 0
        try:
            while copied <= limit:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    break
                copied += len(chunk)
                view = memoryview(chunk)
                while view:
                    view = view[os.write(out, view) :]
        finally:
            os.close(out)
    except OSError as err:
        raise InfrastructureError(f"cannot copy {folder}/{name}: {err}") from err
    finally:
        os.close(fd)
    if copied > limit:
        raise UsageError(f"the bundle grew past the limit of {limit} bytes")
    return copied


def read_at_most_path(path: Path, limit: int) -> bytes:
    """Up to `limit` bytes of a file of the daemon's own (links refused all the same)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        return read_at_most(fd, limit)
    finally:
        os.close(fd)
