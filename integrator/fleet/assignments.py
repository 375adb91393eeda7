"""The claim that ties queue, contract and worktree together (seeds 003 and 004).

`Fleet.claim` takes the first ready task from the queue by atomic rename, resolves its lock
mode (`workspace.resolve_lock_mode`), and for a task that writes issues its ownership
contract through the claims module and binds a worktree at the queue head to it. On a
`WorkspaceConfigurationError` the claim is released and the task returns to the inbox.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path

from integrator.clock import Clock, utcnow
from integrator.documents.contract import OwnershipContract
from integrator.documents.policy import Policy
from integrator.errors import (
    ClaimConflictError,
    IntegratorError,
    WorkspaceBusyError,
)
from integrator.fleet.planner import Plan, WriteSet, expand_writeset
from integrator.fleet.taskqueue import QUEUE_DIR, Queue, TaskEntry
from integrator.fleet.tasks import Task
from integrator.fleet.workspace import (
    Exclusive,
    InPlace,
    NoLock,
    Resolution,
    Workspaces,
    acquire_lock,
    agent_name,
    bind,
    binding_record,
    load_workspaces,
    locks_of,
    main_checkout,
    prepare_worktree,
    release_lock,
    resolve_lock_mode,
    unbind,
    worktree_id,
)
from integrator.plumbing import git
from integrator.records.attempt_keys import stored_key
from integrator.records.canonical import Canonical
from integrator.records.claims import Claims, IssueRequest, overlaps_with_live


@dataclass(frozen=True)
class Assignment:
    """What a claimer got: the task, its lock mode and, when exclusive, worktree and contract."""

    task: Task
    agent: str
    claimed_file: Path
    resolution: Resolution
    writeset: WriteSet
    worktree: Path | None = None
    contract: OwnershipContract | None = None

    @property
    def lock_mode(self) -> str:
        return self.resolution.lock_mode

    def to_json(self) -> dict[str, object]:
        doc: dict[str, object] = {
            "task": self.task.id,
            "title": self.task.title,
            "agent": self.agent,
            "lockMode": self.lock_mode,
            "reason": self.resolution.reason,
            "claimed": str(self.claimed_file),
            "workspace": self.resolution.workspace,
            "worktree": str(self.worktree) if self.worktree else None,
            "writeSet": [
                {"pattern": e.pattern, "origin": e.origin, "because": e.because}
                for e in self.writeset.entries
            ],
            "resources": list(self.writeset.resources),
            "brief": self.task.body,
        }
        if isinstance(self.resolution, Exclusive):
            doc["workspaceSource"] = self.resolution.source
        if self.contract is not None:
            doc["worktreeId"] = self.contract.worktree_id
            doc["contractDigest"] = self.contract.digest
            doc["contract"] = self.contract.wire()
        return doc


@dataclass(frozen=True)
class ClaimOutcome:
    assignment: Assignment | None
    skipped: tuple[str, ...] = ()


class Fleet:
    """The fleet side of one repository, from any of its worktrees: claim, complete,
    release and requeue tasks, with lock modes, contracts and worktree bindings."""

    def __init__(
        self,
        start: Path | str = ".",
        *,
        policy: Policy | None = None,
        clock: Clock = utcnow,
        lease: timedelta = timedelta(hours=1),
    ) -> None:
        self.main = main_checkout(Path(start))
        self.queue = Queue(self.main / QUEUE_DIR, clock=clock)
        self.clock = clock
        self.lease = lease
        self._policy = policy

    def canonical(self) -> Canonical:
        return Canonical(self.main, clock=self.clock)

    def policy(self) -> Policy:
        if self._policy is None:
            with self.canonical() as canonical:
                self._policy = canonical.policy_state().policy
        return self._policy

    def workspaces(self) -> Workspaces:
        return load_workspaces(self.queue.root)

    def claim(
        self, agent: str | None = None, *, task_id: str | None = None, in_place: bool = False
    ) -> ClaimOutcome:
        """Claim the first ready task and set up its lock mode.

        A task whose contract would overlap a live claim (say, a finished task whose
        candidate is not integrated yet) goes back and the next one is tried. Any other
        failure — no workspace binding, a busy workspace — puts the task back in the inbox
        and raises, so the operator sees the cause.
        """
        agent = agent_name(agent)
        skipped: list[str] = []
        tried: set[str] = set()
        with self.queue.locked():
            workspaces, policy = self.workspaces(), self.policy()
            while True:
                claimed = self.queue.claim(agent, policy, task_id=task_id, skip=frozenset(tried))
                if claimed is None:
                    return ClaimOutcome(None, tuple(skipped))
                task = claimed.task
                writeset = expand_writeset(task, policy)
                try:
                    resolution = resolve_lock_mode(task, agent, workspaces, in_place=in_place)
                    if isinstance(resolution, NoLock):
                        assignment = Assignment(task, agent, claimed.path, resolution, writeset)
                    elif isinstance(resolution, InPlace):
                        contract = self._issue(task, agent, writeset, None)
                        assignment = Assignment(
                            task, agent, claimed.path, resolution, writeset, None, contract
                        )
                    else:
                        assignment = self._bind(claimed.path, task, agent, resolution, writeset)
                    return ClaimOutcome(assignment, tuple(skipped))
                except WorkspaceBusyError:
                    self.queue.release(task.id)
                    raise
                except ClaimConflictError as err:
                    self.queue.release(task.id)
                    tried.add(task.id)
                    skipped.append(f"{task.id}: {err}")
                except BaseException:
                    self.queue.release(task.id)
                    raise

    def _bind(
        self, claimed: Path, task: Task, agent: str, how: Exclusive, writeset: WriteSet
    ) -> Assignment:
        live = {e.task_id for e in self.queue.entries("claimed", parse=False)}
        since = self.clock().isoformat()
        acquire_lock(self.queue.root, how.workspace, task.id, agent, since, live)
        worktree: Path | None = None
        contract: OwnershipContract | None = None
        canonical = self.canonical()
        try:
            base = _queue_head(canonical)
            path = self.workspaces().path_of(how.workspace, self.main)
            worktree = prepare_worktree(self.main, path, base, how.workspace)
            holder = binding_record(worktree).get("task")
            if holder is not None and holder in live - {task.id}:
                raise WorkspaceBusyError(f"workspace {how.workspace} is bound to task {holder}")
            if holder is not None:
                unbind(worktree, holder)  # left by a crashed claimer
            contract = self._issue(task, agent, writeset, worktree_id(worktree), canonical, base)
            record = {
                "task": task.id,
                "agent": agent,
                "workspace": how.workspace,
                "claimedFile": str(claimed),
                "since": since,
            }
            bind(worktree, contract, record, stored_key(canonical, contract))
            return Assignment(task, agent, claimed, how, writeset, worktree, contract)
        except BaseException:
            if contract is not None:
                with contextlib.suppress(IntegratorError):
                    Claims(canonical).revoke(task.id, "claim setup failed; task returned")
            if worktree is not None:
                unbind(worktree, task.id)
            release_lock(self.queue.root, how.workspace, task.id)
            raise
        finally:
            canonical.close()

    def _issue(
        self,
        task: Task,
        agent: str,
        writeset: WriteSet,
        wid: str | None,
        canonical: Canonical | None = None,
        base: str | None = None,
    ) -> OwnershipContract:
        """Issue the task's contract; a live claim left by an earlier attempt of the same
        task (it was back in the inbox, so nobody holds it) is revoked first."""
        with contextlib.ExitStack() as stack:
            if canonical is None:
                canonical = stack.enter_context(self.canonical())
            claims = Claims(canonical)
            previous = canonical.claim(task.id)
            if previous is not None and previous.view.state == "live":
                claims.revoke(task.id, "superseded: the task went back to the queue")
            return claims.issue(
                IssueRequest(
                    task_id=task.id,
                    paths=writeset.patterns,
                    resources=writeset.resources,
                    base=base or _queue_head(canonical),
                    lease=self.lease,
                    holder=agent,
                    worktree_id=wid,
                )
            )

    def _cleanup(self, entry: TaskEntry, revoke_reason: str | None) -> None:
        """Unbind the task's worktree and free its workspace; revoke its claim if asked."""
        if revoke_reason is not None:
            with self.canonical() as canonical:
                claim = canonical.claim(entry.task_id)
                if (
                    claim is not None
                    and claim.view.state == "live"
                    and claim.contract.lease.holder == entry.agent
                ):
                    Claims(canonical).revoke(entry.task_id, revoke_reason)
        workspaces = self.workspaces()
        for space in locks_of(self.queue.root, entry.task_id):
            unbind(workspaces.path_of(space, self.main), entry.task_id)
            release_lock(self.queue.root, space, entry.task_id)

    def complete(
        self, task_id: str, *, agent: str | None = None, no_candidate: bool = False
    ) -> Path:
        """claimed → done. The claim stays live: the daemon consumes it when it integrates
        the candidate (revoking here would fence a candidate still in the spool). With
        `no_candidate` there is nothing to integrate, so the claim is revoked at once and
        overlapping tasks need not wait for its lease."""
        reason = "completed without a candidate" if no_candidate else None
        return self.queue.complete(task_id, agent=agent, before=lambda e: self._cleanup(e, reason))

    def plan(self, *, fleet: int | None = None) -> Plan:
        """The queue's plan, with ready tasks that overlap a live claim moved to waiting
        (a completed task whose candidate the daemon has not integrated yet)."""
        policy = self.policy()
        plan = self.queue.plan(policy, fleet=fleet)
        waiting = {k: list(v) for k, v in plan.waiting.items()}
        with self.canonical() as canonical:
            for task_id in plan.ready:
                ws = plan.writesets[task_id]
                for other, overlap in overlaps_with_live(
                    canonical, task_id, list(ws.patterns), list(ws.resources)
                ):
                    waiting.setdefault(task_id, []).append(
                        f"overlaps the live claim of {other} ({overlap.describe()}); it is "
                        "released when its candidate is integrated or the claim revoked"
                    )
        ready = tuple(t for t in plan.ready if t not in waiting)
        return replace(plan, ready=ready, waiting={k: tuple(v) for k, v in waiting.items()})

    def release(
        self, task_id: str, *, agent: str | None = None, reason: str = "released by its agent"
    ) -> Path:
        """claimed → inbox; the attempt's contract is revoked so nothing it left can land."""
        return self.queue.release(task_id, agent=agent, before=lambda e: self._cleanup(e, reason))

    def requeue_stale(self, older_than: timedelta) -> list[TaskEntry]:
        reason = f"claim older than {older_than}; requeued as stale"
        return self.queue.requeue_stale(older_than, before=lambda e: self._cleanup(e, reason))

    def worktree_of(self, task_id: str) -> Path | None:
        workspaces = self.workspaces()
        for space in locks_of(self.queue.root, task_id):
            return workspaces.path_of(space, self.main)
        return None


def _queue_head(canonical: Canonical) -> str:
    """Where new work starts: the queue head, else the target branch, else HEAD."""
    for ref in (canonical.queue_ref, canonical.target_ref):
        oid = canonical.ref(ref)
        if oid is not None:
            return oid
    return str(git.resolve_commit(canonical.repo, "HEAD").id)
