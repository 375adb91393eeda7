"""Reverting a bad landing through the same gate, never by moving a ref back.

`integrator revert STAGING_COMMIT` builds an explicit revert commit R of a landed staging
commit S: R's parent is S and R's tree is S's parent's, so R's diff (S → R) is exactly the
landing undone. Why S and not the current queue head as R's parent: the merge onto the
queue then happens *in the gate*, with S as the merge base, by the same code and rules as
every candidate. When nothing landed since, the merge is trivial and the target's tree
becomes exactly the tree before the change. When later landings changed other paths,
git's three-way merge carries the undo onto them. When a later landing changed the same
lines, the merge conflicts (MERGE_CONFLICT) and when one touched a semantic resource the
landing touched, it is RESOURCE_CONFLICT: held for a release manager, not guessed at.
Building R on the queue head instead would do that merge outside the gate, resolving (or
hiding) exactly the conflicts a person must see.

The ownership contract comes from the landing's own evidence: every path its staging
commit changed (both ends of a rename) as an anchored literal, and every semantic resource
those changes touch under the live policy — nothing more. It is issued as a claim like any
other (task `revert-<S>`, base S; the overlap check and a pause apply), and R's trailers
name the reverted staging commit, task, attempt and candidate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pygit2
import structlog

from integrator.documents.bounds import DEFAULT_LIMITS, ContractLimits
from integrator.documents.contract import OwnershipContract
from integrator.documents.submission import Submission
from integrator.documents.trailers import TRAILER_CANDIDATE, TRAILER_REVERTS, trailers
from integrator.documents.verdict import Decision, Verdict
from integrator.errors import ConfigurationError, IntegratorError, UsageError
from integrator.fence.diff import recompute
from integrator.fence.resources import touched_resources
from integrator.limits import DEFAULT_MAX_PATCH_BYTES, HOLDER_CHARS
from integrator.paths import PathMatcher, glob_problem, unsafe_reason
from integrator.plumbing import git
from integrator.records.attempt_keys import stored_key
from integrator.records.canonical import Canonical
from integrator.records.claims import (
    REVERT_TASK_PREFIX,
    Claims,
    IssueRequest,
)
from integrator.records.revert import write_revert
from integrator.store.spool import Spool

log = structlog.get_logger("integrator.revert")

_GLOB_SPECIAL = "*?[\\"


@dataclass(frozen=True, kw_only=True)
class RevertPlan:
    """What a revert of one landing undoes, read from the landing's evidence."""

    staging: str
    task_id: str
    attempt_id: str
    candidate: str
    summary: str
    paths: tuple[str, ...]  # every path the landing changed
    resources: tuple[str, ...]  # every resource those changes touch
    patch_bytes: int = 0

    @property
    def task(self) -> str:
        return f"{REVERT_TASK_PREFIX}{self.staging[:12]}"

    def globs(self, limits: ContractLimits = DEFAULT_LIMITS) -> tuple[str, ...]:
        return tuple(literal_glob(p, limits) for p in self.paths)


def literal_glob(path: str, limits: ContractLimits = DEFAULT_LIMITS) -> str:
    """An ownership glob naming exactly `path` (anchored, wildcards escaped), within the
    glob length of `limits` (the policy in force's)."""
    if unsafe_reason(path) or path != path.strip():
        raise UsageError(f"cannot name {path!r} in a contract; revert this landing by hand")
    glob = "/" + "".join(f"\\{ch}" if ch in _GLOB_SPECIAL else ch for ch in path)
    problem = glob_problem(glob)
    if problem or len(glob) > limits.max_glob_length:
        raise UsageError(f"cannot name {path!r} in a contract ({problem or 'too long'})")
    return glob


def plan_revert(canonical: Canonical, rev: str) -> RevertPlan:
    """Read the landing `rev` names; UsageError unless it is a staging commit on the queue."""
    try:
        staging = str(git.resolve_commit(canonical.repo, rev).id)
    except ConfigurationError as err:
        raise UsageError(str(err)) from err
    commit = canonical.commit(staging)
    found = trailers(commit.message)
    task, candidate = found.get("Integrator-Task"), found.get(TRAILER_CANDIDATE)
    if task is None or candidate is None or len(commit.parent_ids) != 1:
        raise UsageError(f"{staging} is not a staging commit (no Integrator-Task trailer)")
    queue = canonical.ref(canonical.queue_ref)
    if queue is None or not (
        queue == staging
        or canonical.repo.descendant_of(pygit2.Oid(hex=queue), pygit2.Oid(hex=staging))
    ):
        raise UsageError(f"{staging} is not on {canonical.queue_ref}; only a landing is reverted")
    parent = canonical.commit(str(commit.parent_ids[0]))
    policy = canonical.policy_state().policy
    diff = recompute(
        canonical.repo, parent.tree, commit.tree, rename_limit=policy.integration.rename_limit
    )
    paths = tuple(dict.fromkeys(p for change in diff.changes for p in change.paths))
    if not paths:
        raise UsageError(f"{staging} changed nothing; there is nothing to revert")
    limits = policy.contract_limits
    if len(paths) > limits.max_globs:
        raise UsageError(
            f"{staging} changed {len(paths)} paths, more than a contract names "
            f"(limits.max_globs = {limits.max_globs})"
        )
    touched = touched_resources(policy, diff.changes, diff.reconfigured)
    resources = tuple(t.resource for t in touched)
    if len(resources) > limits.max_resources:
        raise UsageError(
            f"{staging} touched {len(resources)} resources, more than a contract names "
            f"(limits.max_resources = {limits.max_resources})"
        )
    summary = commit.message.splitlines()[0] if commit.message.strip() else "a landing"
    return RevertPlan(
        staging=staging,
        task_id=task,
        attempt_id=found.get("Integrator-Attempt", "-"),
        candidate=candidate,
        summary=summary,
        paths=paths,
        resources=resources,
        patch_bytes=diff.patch_bytes,
    )


def revert_message(plan: RevertPlan, actor: str, reason: str | None) -> str:
    body = (
        f'Revert "{plan.summary}"\n\n'
        f"This reverts staging commit {plan.staging} of task {plan.task_id} (attempt "
        f"{plan.attempt_id}), which landed candidate {plan.candidate}. Requested by {actor}"
    )
    body += f": {reason}\n" if reason else ".\n"
    return body + (
        f"\n{TRAILER_REVERTS}: {plan.staging}\n"
        f"Integrator-Reverted-Task: {plan.task_id}\n"
        f"Integrator-Reverted-Attempt: {plan.attempt_id}\n"
        f"Integrator-Reverted-Candidate: {plan.candidate}\n"
    )


@dataclass(frozen=True)
class Revert:
    plan: RevertPlan
    commit: str  # the revert commit (the candidate)
    contract: OwnershipContract

    def head(self) -> dict[str, Any]:
        """What `integrator revert` reports of it, before its verdict or submission."""
        return {
            "reverts": self.plan.staging,
            "revertedTask": self.plan.task_id,
            "revertCommit": self.commit,
            "taskId": self.contract.task_id,
            "generation": self.contract.ownership_generation,
            "paths": list(self.plan.paths),
            "resources": list(self.plan.resources),
        }


def prepare_revert(
    canonical: Canonical,
    rev: str,
    *,
    actor: str,
    reason: str | None = None,
    lease: timedelta = timedelta(minutes=30),
    force_shared: bool = False,
) -> Revert:
    """Write the revert commit and issue its claim; nothing lands yet."""
    canonical.refresh()
    plan = plan_revert(canonical, rev)
    commit = write_revert(canonical, plan.staging, revert_message(plan, actor, reason))
    globs = plan.globs(canonical.policy_state().policy.contract_limits)
    matcher = PathMatcher.of(globs)
    uncovered: Sequence[str] = [p for p in plan.paths if not matcher.covers(p)]
    if uncovered:  # the escaping above must name each path; never send what it does not
        raise UsageError(f"cannot name {uncovered[0]!r} exactly in a contract")
    request = IssueRequest(
        task_id=plan.task,
        paths=globs,
        resources=plan.resources,
        base=plan.staging,
        lease=lease,
        holder=actor[:HOLDER_CHARS],
        max_patch_bytes=max(DEFAULT_MAX_PATCH_BYTES, plan.patch_bytes),
    )
    contract = Claims(canonical).issue(request, force_shared=force_shared, revert=True)
    return Revert(plan, commit, contract)


@dataclass(frozen=True)
class Reverted:
    """One `integrator revert`: the revert, and its verdict (sent through the gate here) or
    its submission id in `spool` (handed to the daemon)."""

    revert: Revert
    verdict: Verdict | None = None
    spool: Spool | None = None
    submission: str | None = None


def revert_landing(
    repo: str | Path,
    rev: str,
    *,
    actor: str,
    reason: str | None = None,
    lease: timedelta = timedelta(minutes=30),
    force_shared: bool = False,
    spool: Path | None = None,
) -> Reverted:
    """Write the revert of the landing `rev`, issue its claim and send it through the gate
    and the integration transaction: here, or with `spool` through the daemon."""
    from integrator.landing.engine import Integrator

    with Canonical(repo) as canonical:
        done = prepare_revert(
            canonical, rev, actor=actor, reason=reason, lease=lease, force_shared=force_shared
        )
        if spool is None:
            verdict = Integrator(canonical).integrate(done.contract.to_json().encode(), done.commit)
            if verdict.decision is not Decision.ACCEPTED:
                # Nothing landed: the revert's claim would block the landing's paths for its
                # whole lease, and a second try at the revert with it.
                codes = ", ".join(dict.fromkeys(v.code.value for v in verdict.violations))
                try:
                    Claims(canonical).revoke(
                        done.contract.task_id, f"the revert did not land ({codes or 'no code'})"
                    )
                except IntegratorError as err:  # no longer live, or the server: the verdict stands
                    log.warning("revert.claim_kept", task=done.contract.task_id, error=str(err))
            return Reverted(done, verdict=verdict)
        key = stored_key(canonical, done.contract)  # issued just now, here
    into = Spool(spool).existing()
    submission = Submission.model_validate(
        {
            "schema": "integrator.submission.v1",
            "contract": done.contract.wire(),
            "candidate": done.commit,
            "submitter": {"user": actor[:200], "host": "integrator-revert"},
            "submittedAt": datetime.now(UTC),
        }
    )
    return Reverted(done, spool=into, submission=into.submit(submission, key=key))
