"""What the MCP tools do: the CLI's own operations, returning the CLI's `--json` documents.

Every tool returns `(document, exit code)` or raises the IntegratorError the CLI would
raise for the same input, so the server refuses exactly what the command line refuses.
Agent input is hostile: a worktree must belong to the server's repository and be the
server's agent's (`integrator.mcp.identity`), a submission id must be a spool id, paths go
through the guard like any hook event, and an expansion is only asked for, never granted
by the agent.

Submissions travel through a `Transport`: the daemon's spool (`SpoolTransport`), or an
intake (`IntakeTransport`: a git remote with `refs/integrator/submit/…`, for agents without
the daemon's file system). Both answer `read_verdict` with the verdict and where its
landing is now, as `status` prints them. A submission is its task and its id: `read_verdict`
reads the verdict of the task the server submitted it under (else the one named, else the
bound contract's), and a verdict on another candidate than the one this server submitted
is an error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol

from integrator.clock import utcnow
from integrator.errors import ConfigurationError, UsageError
from integrator.fleet import guard
from integrator.fleet.workspace import binding_dir, main_checkout
from integrator.mcp.identity import Identity, plain

Result = tuple[dict[str, Any], int]
SUBMITTED_KEPT = 10_000  # submissions one server remembers (task and candidate) for read_verdict


class Transport(Protocol):
    """Where a candidate goes and where its verdict comes back from."""

    def submit(self, contract: bytes, candidate: str, repo: Path, bundle: bool) -> Result: ...

    def verdict(
        self, submission: str, wait: float, task: str | None, candidate: str | None
    ) -> Result: ...


@dataclass(frozen=True)
class SpoolTransport:
    """The daemon's spool folder (`integrator submit` / `submit --wait`)."""

    folder: Path

    def submit(self, contract: bytes, candidate: str, repo: Path, bundle: bool) -> Result:
        from integrator.fleet.submit import publish
        from integrator.store.spool import Spool

        return publish(Spool(self.folder), contract, candidate, repo, bundle), 0

    def verdict(
        self, submission: str, wait: float, task: str | None, candidate: str | None
    ) -> Result:
        from integrator.fleet.intake import check_filed
        from integrator.fleet.submit import landing, lifecycle_code, verdict_document, wait_filed
        from integrator.store.spool import Spool

        _submission_id(submission)
        spool = Spool(self.folder)
        found = wait_filed(spool, submission, wait)
        check_filed(*found, sid=submission, task_id=task, candidate=candidate)
        doc, code = verdict_document(submission, *found)
        where = landing(spool, submission)  # the same lifecycle `status --spool` shows
        if where is not None:
            doc["landing"] = where
        return doc, lifecycle_code(code, where, "decided")


@dataclass(frozen=True)
class IntakeTransport:
    """An intake (`integrator submit --intake URL` / `status --intake URL`): the candidate
    is pushed there, the verdict read back from it, and where the landing is read from the
    canonical server (`canonical`, else the clone's origin or the intake) into `repo`."""

    url: str
    repo: Path
    canonical: str | None = None

    def submit(self, contract: bytes, candidate: str, repo: Path, bundle: bool) -> Result:
        from integrator.fleet.submit import to_intake

        if bundle:
            raise UsageError("a bundle is for a spool; a push to the intake carries the objects")
        pushed = to_intake(self.url, contract, candidate, repo)
        doc: dict[str, Any] = {
            "submission": pushed.submission, "candidate": pushed.candidate, "intake": self.url,
        }  # fmt: skip
        if pushed.unsigned:
            doc["unsigned"] = pushed.unsigned  # as `integrator submit --intake --json` says
        return doc, 0

    def verdict(
        self, submission: str, wait: float, task: str | None, candidate: str | None
    ) -> Result:
        from integrator.fleet.submit import (
            document_of,
            intake_landing,
            lifecycle_code,
            wait_published,
        )

        _submission_id(submission)
        if task is None:
            raise UsageError(
                "a submission on an intake is its task and its id: name the task (no contract "
                "is bound to this worktree, and this server did not submit it)"
            )
        found = wait_published(self.url, self.repo, task, submission, wait, candidate=candidate)
        doc, code = document_of(submission, found.rejected, found.document)
        where = intake_landing(self.url, self.repo, doc, self.canonical)  # as status --intake
        if where is not None:
            doc["landing"] = where
        return doc, lifecycle_code(code, where, "decided")


def _submission_id(submission: str) -> None:
    from integrator.store.spool import ID_RE

    if not ID_RE.fullmatch(submission):
        raise UsageError(f"{submission[:80]!r} is not a submission id")


class AgentTools:
    """The tools of one MCP server: its repository, the one agent it acts for (every
    worktree and task a call names is checked against it: `integrator.mcp.identity`), a
    transport."""

    def __init__(
        self,
        worktree: Path,
        *,
        transport: Transport | None = None,
        agent: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.identity = Identity(worktree, agent, env)
        self.root = self.identity.root
        self.transport = transport
        self.agent = self.identity.agent
        self.env = self.identity.env
        # What this server submitted: submission id → (task, candidate), so read_verdict
        # checks the verdict it finds is about exactly that (bounded: oldest dropped first).
        self.submitted: dict[str, tuple[str, str]] = {}

    def worktree(self, given: str | None) -> Path:
        """The worktree a call names (default: the server's), if it is its agent's."""
        return self.identity.worktree(given)

    # -- the tools -----------------------------------------------------------------------

    def claim_task(
        self, task: str | None, lease: timedelta, in_place: bool, install_guard: bool
    ) -> Result:
        from integrator.fleet.tasking import claim_document

        plain("task", task)
        doc, _text = claim_document(
            self.root,
            agent=self.agent,
            task_id=task,
            lease=lease,
            in_place=in_place,
            guard=install_guard,
        )
        return doc, 0

    def show_contract(self, worktree: str | None) -> Result:
        root = self.worktree(worktree)
        task = self.identity.in_place_task(root)
        return guard.bound_status(root, utcnow(), in_place_task=task), 0

    def check_paths(self, paths: Sequence[str], worktree: str | None) -> Result:
        if not paths:
            raise UsageError("name at least one path to check")
        plain("path", *paths)
        root = self.worktree(worktree)
        decision = guard.evaluate(
            list(paths),
            root,
            utcnow(),
            relative_to_root=True,
            in_place_task=self.identity.in_place_task(root),
            coordinator=guard.coordinator_mode(self.identity.coordinator_env()),
        )
        return decision.to_json(), 0 if decision.allowed else 1

    def request_expansion(
        self, add_paths: Sequence[str], add_resources: Sequence[str], worktree: str | None
    ) -> Result:
        """`contract request-expansion --send`: the request, built from the bound contract
        and the workspace's whole state, is filed for the coordinator; only what the
        policy's `[expansion] auto_grant` covers is granted (and bound) now."""
        from integrator.fleet.expansion import send_expansion

        if not add_paths and not add_resources:
            raise UsageError("name what to add: add_paths and/or add_resources")
        plain("path", *add_paths)
        plain("resource", *add_resources)
        return send_expansion(self.worktree(worktree), add_paths, add_resources)

    def submit(self, candidate: str, bundle: bool, worktree: str | None) -> Result:
        if self.transport is None:
            raise ConfigurationError(
                "this MCP server has no spool; start it with `integrator mcp --spool DIR` "
                "(or --intake URL)"
            )
        plain("candidate", candidate)
        root = self.worktree(worktree)
        try:
            contract = (binding_dir(root) / "contract.json").read_bytes()
        except FileNotFoundError:
            raise ConfigurationError(
                f"no contract is bound to {root}; claim a task before submitting"
            ) from None
        doc, code = self.transport.submit(contract, candidate, root, bundle)
        from integrator.documents.rules import rules_from_bytes

        if len(self.submitted) >= SUBMITTED_KEPT:
            del self.submitted[next(iter(self.submitted))]
        task = rules_from_bytes(contract).task_id  # the transport read the same contract
        self.submitted[str(doc["submission"])] = (task, str(doc["candidate"]))
        return doc, code

    def read_verdict(self, submission: str, wait: float, task: str | None = None) -> Result:
        """The verdict of `submission` of its task: the task this server submitted it under,
        else `task`, else the task of the contract bound to the server's worktree."""
        plain("submission", submission)
        plain("task", task)
        if self.transport is None:
            raise ConfigurationError(
                "this MCP server has no spool; start it with `integrator mcp --spool DIR` "
                "(or --intake URL)"
            )
        known = self.submitted.get(submission)
        candidate = None
        if known is not None:
            if task is not None and task != known[0]:
                raise UsageError(
                    f"{submission} was submitted by this server under task {known[0]!r}, "
                    f"not {task[:80]!r}"
                )
            task, candidate = known
        elif task is None:
            task = self._bound_task()
        return self.transport.verdict(submission, wait, task, candidate)

    def _bound_task(self) -> str | None:
        from integrator.documents.rules import rules_from_bytes
        from integrator.errors import ContractError

        try:
            return rules_from_bytes((binding_dir(self.root) / "contract.json").read_bytes()).task_id
        except (FileNotFoundError, ContractError):
            return None

    def ready_tasks(self) -> Result:
        from integrator.fleet.plans import load_plan, plan_json
        from integrator.fleet.taskqueue import Queue
        from integrator.records.canonical import Canonical

        queue = Queue.find(self.root)
        with Canonical(main_checkout(self.root)) as canonical:
            policy = canonical.policy_state().policy
        return plan_json(load_plan(queue.root, policy)), 0
