"""One evaluation worker: `python -m integrator.landing.worker REPO` (see `workers`).

It reads framed requests on standard input, evaluates each candidate with its own `Gate`
over REPO and answers on the descriptor that was standard output; its own standard output
goes to standard error, so nothing a library prints can corrupt a frame. It ends at end
of input: when the daemon closes the pipe, or dies.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import queue
import signal
import sys
import threading
import traceback
from typing import Any, BinaryIO

from integrator.fence.trees import TreeReader
from integrator.landing.evaluation import Stopped
from integrator.landing.gate import Gate
from integrator.landing.history import QueueHistory
from integrator.landing.workers import _HEADER, Payload, export, frame
from integrator.records.canonical import Canonical


def _read(stream: BinaryIO, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = stream.read(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _requests(stream: BinaryIO, inbox: queue.SimpleQueue[bytes | None]) -> None:
    """Read every request as it arrives, so the daemon's writes never wait on our replies
    (both pipes full would hold both processes for ever); None at end of input."""
    try:
        while True:
            header = _read(stream, _HEADER.size)
            body = None if header is None else _read(stream, _HEADER.unpack(header)[0])
            if body is None:
                return
            inbox.put(body)
    finally:
        inbox.put(None)


def _serve(repo: str, requests: BinaryIO, replies: BinaryIO) -> None:
    canonical = Canonical(repo)
    gate = Gate(canonical, QueueHistory(canonical), TreeReader(canonical.repo))
    inbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
    threading.Thread(target=_requests, args=(requests, inbox), daemon=True).start()
    replies.write(frame(("ready",)))
    replies.flush()
    while True:
        body = inbox.get()
        if body is None:
            return
        _, cid, (now, rewritten), items = pickle.loads(body)  # from the daemon that started us
        canonical.rewritten = rewritten
        answer: tuple[Any, ...]
        try:
            done: list[Stopped | Payload] = []
            for data, candidate in items:
                if done:  # a word after each candidate: a slow chunk is not a silent worker
                    replies.write(frame(("progress", cid, len(done))))
                    replies.flush()
                done.append(export(gate.evaluate(data, candidate, now=now)))
            answer = ("done", cid, done)
        except Exception as err:  # the daemon evaluates it again itself
            answer = ("error", cid, f"{type(err).__name__}: {err}")
        replies.write(frame(answer))
        replies.flush()


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the daemon's to handle
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    try:
        with contextlib.suppress(BrokenPipeError):  # the daemon went away
            _serve(argv[0], sys.stdin.buffer, replies)
    except BaseException:  # the daemon sees end of input and evaluates it itself
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    # Nothing to tidy: a worker holds no state but its caches. Skipping the interpreter's
    # teardown (which would also wait on the reader thread's lock on standard input) lets
    # the daemon's shutdown wait a few milliseconds, not a quarter second.
    os._exit(0)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
