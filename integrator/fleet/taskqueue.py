"""The filesystem task queue: `.agents/inbox|claimed|done/` in the main checkout.

Every worktree finds the same queue through `git rev-parse --git-common-dir`. A claim is a
`rename()` of `inbox/<id>.md` to `claimed/<id>@<agent>.md`: POSIX renames within one
filesystem are atomic, so of N claimers racing for one file exactly one succeeds and the
others get ENOENT and move on.

The rename makes each claim exactly-once; it cannot by itself make *readiness* safe,
because "B is ready" depends on other files (A, which overlaps B, being neither in the inbox
nor claimed). A listing taken while A moves between folders could miss A. So every state
transition of ours decides on a snapshot taken under one `flock` on `.agents/.lock`; a shell
script that only renames still cannot claim a task twice, it can only misjudge readiness.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

from integrator.clock import Clock, utcnow
from integrator.documents.policy import Policy
from integrator.errors import ClaimConflictError, UsageError
from integrator.fleet.planner import Plan, build_plan
from integrator.fleet.tasks import Task, TaskFileError, load_task, parse_task
from integrator.fleet.workspace import agent_name, main_checkout

State = Literal["inbox", "claimed", "done"]
STATES: tuple[State, ...] = ("inbox", "claimed", "done")
QUEUE_DIR = ".agents"
Hook = Callable[["TaskEntry"], None]


@dataclass(frozen=True)
class TaskEntry:
    """One task file in one state; `task` is None when the file does not parse."""

    task_id: str
    state: State
    path: Path
    agent: str | None
    since: datetime
    task: Task | None = None
    error: str | None = None


@dataclass(frozen=True)
class Snapshot:
    inbox: tuple[TaskEntry, ...]
    claimed: tuple[TaskEntry, ...]
    done: tuple[TaskEntry, ...]

    def plan(self, policy: Policy, *, fleet: int | None = None) -> Plan:
        """The queue's plan: claimed tasks hold their write sets, done ones resolve blockers."""
        pending = [e.task for e in self.inbox if e.task is not None]
        running = [e.task for e in self.claimed if e.task is not None]
        plan = build_plan(
            pending,
            policy,
            running=running,
            done=[e.task_id for e in self.done],
            fleet=fleet,
            strict=False,
        )
        waiting = {k: list(v) for k, v in plan.waiting.items()}
        for entry in self.inbox:
            if entry.error:
                waiting.setdefault(entry.task_id, []).append(entry.error)
        broken = [e for e in self.claimed if e.error]
        ready = plan.ready
        if broken:
            # Its write set is unknown, so it might overlap anything: hold everything.
            why = "; ".join(f"{e.path.name}: {e.error}" for e in broken)
            ready = ()
            for task_id in plan.ready:
                waiting.setdefault(task_id, []).append(
                    f"a claimed task file is unreadable ({why}); fix it or requeue it"
                )
        return replace(plan, ready=ready, waiting={k: tuple(v) for k, v in waiting.items()})


@dataclass(frozen=True)
class ClaimedTask:
    task: Task
    path: Path
    agent: str


class Queue:
    """One queue folder; every transition runs under the queue lock."""

    def __init__(self, root: Path, *, clock: Clock = utcnow) -> None:
        self.root = Path(root)
        self.clock = clock
        self._depth = 0

    @classmethod
    def find(cls, start: Path | str = ".", *, clock: Clock = utcnow) -> Queue:
        return cls(main_checkout(Path(start)) / QUEUE_DIR, clock=clock)

    def folder(self, state: State) -> Path:
        return self.root / state

    def init(self) -> None:
        for state in STATES:
            self.folder(state).mkdir(parents=True, exist_ok=True)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the queue lock; re-entrant within this object, so a caller can widen the
        critical section around several transitions (the workspace binding does)."""
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        self.init()
        with open(self.root / ".lock", "a+") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            self._depth = 1
            try:
                yield
            finally:
                self._depth = 0
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    # -- reading ----------------------------------------------------------------------------

    def _entry(self, state: State, path: Path, parse: bool) -> TaskEntry | None:
        task_id, _, agent = path.stem.partition("@") if state != "inbox" else (path.stem, "", "")
        try:
            since = datetime.fromtimestamp(path.stat().st_mtime, UTC)
        except FileNotFoundError:
            return None  # moved by someone else while we listed
        if not parse:
            return TaskEntry(task_id, state, path, agent or None, since)
        try:
            task = load_task(path)
        except TaskFileError as err:
            if not path.exists():
                return None
            return TaskEntry(task_id, state, path, agent or None, since, error=str(err))
        if task.id != task_id:
            error = f"{path.name} holds task {task.id}; the file must be named {task.id}.md"
            return TaskEntry(task_id, state, path, agent or None, since, task=None, error=error)
        return TaskEntry(task_id, state, path, agent or None, since, task=task)

    def entries(self, state: State, *, parse: bool = True) -> tuple[TaskEntry, ...]:
        folder = self.folder(state)
        if not folder.is_dir():
            return ()
        found = (self._entry(state, p, parse) for p in sorted(folder.glob("*.md")))
        return tuple(e for e in found if e is not None)

    def snapshot(self) -> Snapshot:
        return Snapshot(
            self.entries("inbox"), self.entries("claimed"), self.entries("done", parse=False)
        )

    def plan(self, policy: Policy, *, fleet: int | None = None) -> Plan:
        with self.locked():
            return self.snapshot().plan(policy, fleet=fleet)

    def find_claimed(self, task_id: str, agent: str | None = None) -> TaskEntry:
        agent = agent_name(agent) if agent else None
        for entry in self.entries("claimed", parse=False):
            if entry.task_id == task_id:
                if agent is not None and entry.agent != agent:
                    raise ClaimConflictError(
                        f"task {task_id} is claimed by {entry.agent}, not {agent}"
                    )
                return entry
        raise UsageError(f"task {task_id} is not claimed (see `integrator task list`)")

    # -- transitions ------------------------------------------------------------------------

    def add(self, text: str, *, source: Path | None = None) -> Path:
        """Validate a task file and publish it into the inbox as `<id>.md` (never overwrites)."""
        task = parse_task(text, source)
        with self.locked():
            for state in ("claimed", "done"):
                if any(e.task_id == task.id for e in self.entries(state, parse=False)):
                    raise UsageError(f"task {task.id} is already {state}; pick a new id")
            target = self.folder("inbox") / f"{task.id}.md"
            tmp = self.root / f".{task.id}.{os.getpid()}.tmp"
            tmp.write_text(text, encoding="utf-8")
            try:
                os.link(tmp, target)  # link() refuses an existing name, rename() would not
            except FileExistsError as err:
                raise UsageError(f"task {task.id} is already in the inbox ({target})") from err
            finally:
                tmp.unlink(missing_ok=True)
        return target

    def claim(
        self,
        agent: str,
        policy: Policy,
        *,
        task_id: str | None = None,
        skip: frozenset[str] = frozenset(),
    ) -> ClaimedTask | None:
        """Claim the first ready task (or `task_id` if it is ready); None when none is.

        A `task_id` that is not waiting in the inbox is refused with the reason: claimed by
        someone (ClaimConflictError), done, or in none of the queue's folders (UsageError).
        """
        agent = agent_name(agent)
        with self.locked():
            snapshot = self.snapshot()
            if task_id is not None:
                self._claimable(snapshot, task_id)
            plan = snapshot.plan(policy)
            for ready in plan.ready:
                if ready in skip or (task_id is not None and ready != task_id):
                    continue
                source = self.folder("inbox") / f"{ready}.md"
                target = self.folder("claimed") / f"{ready}@{agent}.md"
                try:
                    os.rename(source, target)
                except FileNotFoundError:
                    continue  # a claimer outside the lock won this one
                stamp = self.clock().timestamp()
                os.utime(target, (stamp, stamp))  # the claim's age starts now
                return ClaimedTask(plan.tasks[ready], target, agent)
        return None

    def _claimable(self, snapshot: Snapshot, task_id: str) -> None:
        if any(e.task_id == task_id for e in snapshot.inbox):
            return
        for entry in snapshot.claimed:
            if entry.task_id == task_id:
                raise ClaimConflictError(
                    f"task {task_id} is already claimed by {entry.agent} ({entry.path})"
                )
        for entry in snapshot.done:
            if entry.task_id == task_id:
                raise UsageError(f"task {task_id} is already done ({entry.path})")
        raise UsageError(
            f"no such task {task_id}: it is in none of inbox/, claimed/ and done/ of {self.root}"
        )

    def _move(self, entry: TaskEntry, state: State, name: str) -> Path:
        target = self.folder(state) / name
        if state == "inbox" and target.exists():
            raise UsageError(f"{target} exists; cannot return task {entry.task_id} to the inbox")
        os.rename(entry.path, target)
        return target

    def complete(
        self, task_id: str, *, agent: str | None = None, before: Hook | None = None
    ) -> Path:
        """claimed → done (the file keeps the claimer's name, for the record)."""
        with self.locked():
            entry = self.find_claimed(task_id, agent)
            if before is not None:
                before(entry)
            return self._move(entry, "done", entry.path.name)

    def release(
        self, task_id: str, *, agent: str | None = None, before: Hook | None = None
    ) -> Path:
        """claimed → inbox: the task is claimable again. `before` runs first, under the lock."""
        with self.locked():
            entry = self.find_claimed(task_id, agent)
            if before is not None:
                before(entry)
            return self._move(entry, "inbox", f"{task_id}.md")

    def requeue_stale(
        self, older_than: timedelta, *, before: Hook | None = None
    ) -> list[TaskEntry]:
        """Return every claim older than `older_than` (a crashed or stuck claimer) to the inbox.

        `before(entry)` runs under the lock before each move, so cleanup of the old attempt
        (revoking its contract) cannot race a new claimer of the same task.
        """
        cutoff = self.clock() - older_than
        moved = []
        with self.locked():
            for entry in self.entries("claimed", parse=False):
                if entry.since <= cutoff:
                    if before is not None:
                        before(entry)
                    self._move(entry, "inbox", f"{entry.task_id}.md")
                    moved.append(entry)
        return moved

    def heartbeat(self, task_id: str, *, agent: str | None = None) -> TaskEntry:
        """Mark a claim as alive now, so `requeue-stale` leaves it alone."""
        with self.locked():
            entry = self.find_claimed(task_id, agent)
            stamp = self.clock().timestamp()
            os.utime(entry.path, (stamp, stamp))
            return replace(entry, since=datetime.fromtimestamp(stamp, UTC))
