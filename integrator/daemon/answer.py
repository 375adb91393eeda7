"""The daemon answers `integrator status` (the overview) over a Unix socket in its spool.

Reading the overview needs the promotion state, the signed claims and the held candidates,
with the models and the repository library that read them: about half a second of imports
before a few milliseconds of work. A daemon has them loaded, so while it serves a spool it
listens on `<spool>/overview.sock` and answers one request, `overview\\n`, with the overview
document (integrator/daemon/overview.py, the same `gather` and `document` the command would
run), computed at most every `FRESH` seconds. `status` asks first and reads the repository
itself when no daemon answers; either way the text is drawn from that one document.

Who may ask is the file system's answer: the socket is made mode 0600 (0660 when the spool
is group-writable, as a spool shared by a team is) in a folder of its own before it is
renamed into place, and it
is only made by the daemon holding the spool's lock, after recovery. Who answered is the
kernel's: the command reads the peer's credentials (`SO_PEERCRED`) and takes an answer only
from a process of the user who owns the spool folder, and only for the repository it asked
about. A socket, a file or a link planted under that name is never followed, unlinked or
trusted (the daemon then does not answer; the command reads for itself).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from integrator.limits import OVERVIEW_ANSWER_BYTES

SOCKET_NAME = "overview.sock"
REQUEST = b"overview\n"
FRESH = 0.5  # seconds an answer is reused for: a `status --watch` storm costs one gather
ASK_TIMEOUT = 2.0  # seconds the command waits for the daemon before reading for itself
_SUN_PATH = 100  # bytes of a socket path bound directly (the kernel's limit is 107)
_PEERCRED = struct.Struct("3i")  # pid, uid, gid


def _address(folder_fd: int, path: Path) -> str:
    """The address to bind or connect to: the path, or, when it is longer than a socket
    address may be, the same name through the folder's descriptor in /proc."""
    if len(os.fsencode(path)) <= _SUN_PATH:
        return str(path)
    return f"/proc/self/fd/{folder_fd}/{path.name}"


def _folder(root: Path) -> int:
    return os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


class OverviewServer:
    """The daemon's side: a thread that answers `status` until `stop`."""

    def __init__(self, root: Path, answer: Callable[[], bytes], *, log: Any = None) -> None:
        self.root = root
        self.path = root / SOCKET_NAME
        self._answer = answer
        self._log = log
        self._sock: socket.socket | None = None
        self._inode: int | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._cached: tuple[float, bytes] | None = None
        self.answered = 0

    def start(self) -> bool:
        """Listen; False (and the daemon goes on without it) when the socket cannot be
        made or something that is not a socket holds its name."""
        try:
            self._sock = self._bind()
        except OSError as err:
            self._note("overview.unavailable", error=f"{self.path}: {err.strerror or err}")
            return False
        if self._sock is None:
            return False
        self._thread = threading.Thread(target=self._serve, name="overview", daemon=True)
        self._thread.start()
        return True

    def _bind(self) -> socket.socket | None:
        try:
            there = os.lstat(self.path)
        except FileNotFoundError:
            there = None
        if there is not None and not stat.S_ISSOCK(there.st_mode):
            self._note("overview.unavailable", error=f"{self.path} is not a socket; left alone")
            return None
        mode = 0o660 if os.lstat(self.root).st_mode & stat.S_IWGRP else 0o600
        # Made and given its mode inside a folder only this process can write, so nobody
        # can swap the name between the bind and the chmod; then renamed into place.
        import secrets  # the daemon's side only: `status` need not load hashlib

        private = self.root / f".{SOCKET_NAME}.{os.getpid()}.{secrets.token_hex(4)}"
        os.mkdir(private, 0o700)
        folder = _folder(private)
        draft = private / SOCKET_NAME
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
        try:
            sock.bind(_address(folder, draft))
            os.chmod(draft, mode)
            os.rename(draft, self.path)  # replaces a dead daemon's socket
            self._inode = os.lstat(self.path).st_ino
            sock.listen(16)
            sock.settimeout(0.5)
        except OSError:
            sock.close()
            raise
        finally:
            os.close(folder)
            with contextlib.suppress(OSError):
                os.unlink(draft)
            with contextlib.suppress(OSError):
                os.rmdir(private)
        return sock

    def _serve(self) -> None:
        assert self._sock is not None
        while not self._stopping.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed by `stop`
            with conn:
                try:
                    self._one(conn)
                except Exception as err:
                    self._note("overview.failed", error=f"{type(err).__name__}: {err}")

    def _one(self, conn: socket.socket) -> None:
        conn.settimeout(1.0)
        request = b""
        while len(request) < len(REQUEST) and not request.endswith(b"\n"):
            chunk = conn.recv(len(REQUEST) - len(request))
            if not chunk:
                break
            request += chunk
        if request != REQUEST:
            return
        moment = time.monotonic()
        if self._cached is None or moment - self._cached[0] > FRESH:
            self._cached = (moment, self._answer())
        conn.sendall(self._cached[1])
        self.answered += 1

    def stop(self) -> None:
        self._stopping.set()
        if self._sock is not None:
            self._sock.close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            if self._inode is not None and os.lstat(self.path).st_ino == self._inode:
                os.unlink(self.path)  # ours still: the next command reads for itself
        except OSError:
            pass

    def _note(self, event: str, **fields: object) -> None:
        if self._log is not None:
            self._log.warning(event, **fields)


def ask(root: Path, repo: Path | None, timeout: float = ASK_TIMEOUT) -> dict[str, Any] | None:
    """The overview document from the daemon serving the spool at `root`, for `repo`;
    None (read it yourself) when no daemon answers, or one that is not the spool owner's,
    or it answers for another repository, late, or with more than `OVERVIEW_ANSWER_BYTES`."""
    path = root / SOCKET_NAME
    try:
        owner = os.lstat(root).st_uid
        there = os.lstat(path)
        if not stat.S_ISSOCK(there.st_mode) or there.st_uid != owner:
            return None
        folder = _folder(root)
        try:
            data = _exchange(_address(folder, path), owner, timeout)
        finally:
            os.close(folder)
        doc = json.loads(data) if data is not None else None
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("repo"), str):
        return None
    if repo is not None and os.path.realpath(doc["repo"]) != os.path.realpath(repo):
        return None
    return doc


def _exchange(address: str, owner: int, timeout: float) -> bytes | None:
    deadline = time.monotonic() + timeout
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC) as sock:
        sock.settimeout(timeout)
        sock.connect(address)
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
        _, uid, _ = _PEERCRED.unpack(creds)
        if uid != owner:
            return None
        sock.sendall(REQUEST)
        chunks: list[bytes] = []
        size = 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            sock.settimeout(left)
            chunk = sock.recv(1 << 16)
            if not chunk:
                return b"".join(chunks)
            size += len(chunk)
            if size > OVERVIEW_ANSWER_BYTES:
                return None
            chunks.append(chunk)
