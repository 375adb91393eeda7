"""Evaluation in worker processes: the gate's reading and deciding on more than one core.

The gate's work is Python (tree parsing, the diff walk, path and resource checks), so
threads would share one core. Each worker is a child process (`python -m
integrator.landing.worker REPO`) with its own `Gate` over the same repository; the daemon's
process hands it chunks of a batch and plans the landing of each candidate as soon as its
evaluation is back, so merging onto the queue head overlaps with evaluating the next ones.

Nothing a worker decides is trusted for landing more than an in-process evaluation is:
the landing re-reads every claim and the policy and lands only what its own compare-and-swap
proves unchanged since the evaluation read it (`batch.recheck`). Frames between the daemon
and its workers are pickles: both ends are this program, run by the same user; a worker
that a hostile candidate could take over would already hold everything the daemon holds.

The pool is started on the first batch of at least `min_batch` candidates (a daemon with a
trickle of submissions never starts one). A chunk no worker has taken yet when the landing
needs it is evaluated in the daemon's own process, and so is a chunk whose worker died or
raised: the exception is then raised where the daemon's crash handling sees it.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import structlog

from integrator import faults
from integrator.documents.claim import Claim
from integrator.documents.contract import OwnershipContract
from integrator.documents.policy import PolicyState
from integrator.documents.verdict import ResourceUse, Verdict, Violation
from integrator.fence.diff import RecomputedDiff
from integrator.landing.evaluation import Evaluation, Stopped

CHUNK = 4  # candidates per message: fewer frames, while the landing still starts early
OUTSTANDING = 2  # chunks handed to one worker ahead of its replies: it never idles
MIN_BATCH = 8  # smaller batches are evaluated in the daemon's process
MAX_RESPAWNS = 4  # workers started again after dying, per pool; then the daemon goes alone
# A worker that says nothing for this long while it holds a chunk or before it is ready
# (stopped, hung) is killed and its chunks evaluated here. It speaks after every candidate,
# so this bounds one evaluation, not a chunk's four.
SILENCE_LIMIT = 120.0
_WAIT_SLICE = 1.0
_HEADER = struct.Struct(">Q")

Item = tuple[bytes, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class Payload:
    """A complete evaluation as a worker sends it: commits by id, the policy by its ref
    value (the policy itself only when it is not the ref's). A stopped one is sent as is."""

    verdict: Verdict
    data: bytes
    contract: OwnershipContract
    candidate: str
    base: str
    diff: RecomputedDiff
    claim: Claim | None
    policy: PolicyState | None  # None: read it at `policy_oid`
    policy_oid: str | None
    resources: tuple[ResourceUse, ...]
    violations: tuple[Violation, ...]


def default_workers() -> int:
    """One fewer than the cores this process may run on (the daemon plans on one), at most 4."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(0, min(4, cores - 1))


def frame(message: object) -> bytes:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(data)) + data


def export(evaluation: Evaluation) -> Stopped | Payload:
    """An evaluation as a worker sends it (`Payload`)."""
    if isinstance(evaluation, Stopped):
        return evaluation
    return Payload(
        verdict=evaluation.verdict,
        data=evaluation.data,
        contract=evaluation.contract,
        candidate=str(evaluation.candidate.id),
        base=str(evaluation.base.id),
        diff=evaluation.diff,
        claim=evaluation.claim,
        policy=evaluation.policy if evaluation.policy_oid is None else None,
        policy_oid=evaluation.policy_oid,
        resources=evaluation.resources,
        violations=evaluation.violations,
    )


@dataclass
class _Worker:
    proc: subprocess.Popen[bytes]
    ready: bool = False
    buffer: bytearray = field(default_factory=bytearray)
    outstanding: set[int] = field(default_factory=set)
    heard: float = field(default_factory=time.monotonic)  # its last word, or its last task

    @property
    def fd(self) -> int:
        assert self.proc.stdout is not None
        return self.proc.stdout.fileno()

    @property
    def inbox(self) -> int:
        assert self.proc.stdin is not None
        return self.proc.stdin.fileno()


class EvaluationPool:
    """Worker processes evaluating candidates of one repository, started on demand."""

    def __init__(self, repo_path: str | Path, size: int, *, min_batch: int = MIN_BATCH) -> None:
        self.repo_path = str(repo_path)
        self.size = size
        self.min_batch = min_batch
        self.workers: list[_Worker] = []
        self.spawned = 0
        self.silenced = 0  # killed for silence: slow candidates, not a reason to stop
        self.remote_chunks = 0  # chunks a worker evaluated (for the benchmark and tests)
        self.local_chunks = 0
        self._next_id = 0
        self._waiting: set[int] = set()  # chunk ids the current call still expects
        self._replies: dict[int, tuple[str, Any]] = {}
        self.log = structlog.get_logger("integrator.workers")

    # -- processes ----------------------------------------------------------------------------

    def _start(self) -> None:
        while len(self.workers) < self.size:
            if self.spawned - self.silenced >= self.size + MAX_RESPAWNS:
                return  # they keep dying: evaluate in the daemon's process from now on
            proc = subprocess.Popen(
                [sys.executable, "-m", "integrator.landing.worker", self.repo_path],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                close_fds=True,
            )
            faults.children.add(proc.pid)
            self.spawned += 1
            worker = _Worker(proc)
            os.set_blocking(worker.inbox, False)  # a worker that stops reading cannot stall us
            self.workers.append(worker)

    def start(self, *, wait: float | None = None) -> int:
        """Start the workers now (not on the first large batch); with `wait`, give them up
        to that many seconds to be ready. How many are ready."""
        self._start()
        deadline = time.monotonic() + (wait or 0)
        while wait is not None and not all(w.ready for w in self.workers):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self._receive(left)
        return sum(w.ready for w in self.workers)

    def _drop(self, worker: _Worker, why: str) -> None:
        """Forget a worker that died or misbehaved; its chunks go back to be done here."""
        self.log.warning("workers.lost", pid=worker.proc.pid, why=why)
        for cid in worker.outstanding & self._waiting:
            self._replies[cid] = ("lost", why)
        self.workers.remove(worker)
        self._stop(worker)

    @staticmethod
    def _stop(worker: _Worker) -> None:
        for pipe in (worker.proc.stdin, worker.proc.stdout):
            with contextlib.suppress(OSError):
                if pipe is not None:
                    pipe.close()
        try:
            worker.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            worker.proc.kill()
            worker.proc.wait()
        faults.children.discard(worker.proc.pid)

    def close(self) -> None:
        if self.spawned:
            self.log.info(
                "workers.closed", spawned=self.spawned, by_workers=self.remote_chunks,
                in_daemon=self.local_chunks, chunk=CHUNK,
            )  # fmt: skip
        for worker in list(self.workers):
            self._stop(worker)
        self.workers.clear()

    # -- messages -----------------------------------------------------------------------------

    def _send(self, worker: _Worker, message: object) -> bool:
        """Write one frame; a worker that takes none of it for SILENCE_LIMIT is dropped."""
        view = memoryview(frame(message))
        deadline = time.monotonic() + SILENCE_LIMIT
        try:
            while view:
                try:
                    view = view[os.write(worker.inbox, view) :]
                except BlockingIOError:
                    left = deadline - time.monotonic()
                    poller = select.poll()
                    poller.register(worker.inbox, select.POLLOUT)
                    if left <= 0 or not poller.poll(left * 1000):
                        self._drop(worker, f"took no request for {SILENCE_LIMIT:g} s")
                        return False
        except OSError as err:  # a broken pipe: it died
            self._drop(worker, f"could not send: {err}")
            return False
        if not worker.outstanding:
            worker.heard = time.monotonic()
        return True

    def _reap_silent(self) -> None:
        now = time.monotonic()
        for worker in list(self.workers):
            if (worker.outstanding or not worker.ready) and now - worker.heard > SILENCE_LIMIT:
                worker.proc.kill()
                self.silenced += 1
                doing = "evaluating" if worker.ready else "starting"
                self._drop(worker, f"said nothing for {SILENCE_LIMIT:g} s while {doing}")

    def _receive(self, timeout: float) -> None:
        """Read what the workers sent within `timeout` seconds."""
        if not self.workers:
            return
        # poll, not select: a long-lived daemon's descriptors may pass select's 1024.
        poller = select.poll()
        for worker in self.workers:
            poller.register(worker.fd, select.POLLIN)
        events = poller.poll(timeout * 1000)
        readable = {fd for fd, _ in events}  # POLLHUP and POLLERR read as end of input
        for worker in [w for w in self.workers if w.fd in readable]:
            try:
                chunk = os.read(worker.fd, 1 << 20)
            except OSError as err:
                self._drop(worker, f"could not read: {err}")
                continue
            if not chunk:
                self._drop(worker, f"exited with {worker.proc.wait()}")
                continue
            worker.heard = time.monotonic()
            worker.buffer += chunk
            self._frames(worker)

    def _frames(self, worker: _Worker) -> None:
        while len(worker.buffer) >= _HEADER.size:
            (length,) = _HEADER.unpack_from(worker.buffer)
            if len(worker.buffer) < _HEADER.size + length:
                return
            data = bytes(worker.buffer[_HEADER.size : _HEADER.size + length])
            del worker.buffer[: _HEADER.size + length]
            message = pickle.loads(data)  # our own child process (module doc)
            if message[0] == "ready":
                worker.ready = True
                continue
            if message[0] == "progress":
                continue  # it is alive (`heard` was set when these bytes came)
            kind, cid, body = message
            worker.outstanding.discard(cid)
            if cid in self._waiting:  # else: a call that stopped early no longer waits
                self._replies[cid] = (kind, body)

    def _hand_out(self, chunks: dict[int, Sequence[Item]], order: list[int], context: Any) -> None:
        """Give chunks nobody holds yet, in order, to ready workers with room for them."""
        for worker in list(self.workers):
            while worker.ready and len(worker.outstanding) < OUTSTANDING:
                waiting = next((c for c in order if c in chunks), None)
                if waiting is None:
                    return
                items = chunks.pop(waiting)
                if not self._send(worker, ("evaluate", waiting, context, list(items))):
                    chunks[waiting] = items  # the worker is gone: someone else does it
                    break
                worker.outstanding.add(waiting)

    # -- evaluation ---------------------------------------------------------------------------

    def evaluations(
        self,
        items: Sequence[Item],
        *,
        now: datetime,
        rewritten: dict[str, tuple[str, str]],
        local: Callable[[bytes, str], Evaluation],
        rebuild: Callable[[Stopped | Payload], Evaluation],
    ) -> Iterator[Evaluation]:
        """The evaluations of `items`, in order, as soon as each is known."""
        if self.size <= 0 or len(items) < self.min_batch:
            for data, candidate in items:
                yield local(data, candidate)
            return
        self._start()
        ids = list(range(self._next_id, self._next_id + len(items), CHUNK))
        self._next_id += len(items)
        parts = {cid: items[cid - ids[0] : cid - ids[0] + CHUNK] for cid in ids}
        chunks = dict(parts)  # the ones nobody holds yet
        context = (now, dict(rewritten))
        self._waiting = set(ids)
        try:
            self._receive(0)
            self._reap_silent()  # one that never became ready, say
            ahead: dict[int, list[Evaluation]] = {}  # chunks this process took from the end
            for cid in ids:
                self._hand_out(chunks, ids, context)
                while cid not in chunks and cid not in self._replies and cid not in ahead:
                    # A worker holds it. Rather than wait, evaluate the last chunk nobody
                    # holds yet (workers take them from the front): needed last, done now.
                    later = max(chunks, default=None)
                    if later is None:
                        self._receive(_WAIT_SLICE)  # nothing left to take: wait for an answer
                        self._reap_silent()
                    else:
                        del chunks[later]
                        self.local_chunks += 1
                        ahead[later] = [local(d, c) for d, c in parts[later]]
                        self._receive(0)
                    self._hand_out(chunks, ids, context)
                self._waiting.discard(cid)
                if cid in ahead:
                    yield from ahead.pop(cid)
                    continue
                reply = self._replies.pop(cid, None)
                if reply is not None and reply[0] == "done":
                    self.remote_chunks += 1
                    for payload in reply[1]:
                        yield rebuild(payload)
                    continue
                if reply is not None:
                    self.log.warning("workers.chunk_failed", why=reply[1])
                self.local_chunks += 1
                chunks.pop(cid, None)
                for data, candidate in parts[cid]:
                    yield local(data, candidate)
                self._receive(0)
        finally:
            # Replies for chunks no longer waited for (a consumer that stopped early) are
            # dropped as they arrive: ids never repeat.
            self._waiting = set()
            self._replies.clear()
