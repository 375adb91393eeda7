"""The write guard: the contract is checked before every file write an agent makes.

An agent's pre-tool hook hands us the tool call; we find the contract bound to the worktree
the agent runs in (`workspace.bound_contract`), recheck its live claim, and allow or deny
every path the call would write, with the contract line that decided. Understood dialects:

- Claude Code `PreToolUse` (`Write`/`Edit`/`MultiEdit`: `file_path`; `NotebookEdit`:
  `notebook_path`); deny = exit 0 with `hookSpecificOutput.permissionDecision = "deny"`.
- Codex, same wire format; `apply_patch` carries a raw patch in `tool_input.command`, read
  by Codex's own parsing rules (`integrator.fleet.patches`); its shell tool arrives as `Bash`,
  and every `apply_patch` a shell command runs is found and judged (`integrator.fleet.shell`).
- Gemini CLI `BeforeTool` (`write_file`, `replace`: `file_path`); deny = `{"decision": "deny"}`.

Fail closed: input we cannot read, a missing or foreign contract, a revoked, consumed or
expired claim — all deny. A crash still denies: the hook runner treats exit 2 as a block,
and the installed hook command turns any other failure into exit 2. This is an early stop,
not a security boundary; the gate recomputes the diff and decides for real.

A path outside the worktree is denied (another worktree, the main checkout and the queue
are outside too), unless it lies under a folder given with `--allow-outside` (say /tmp).
`..` is folded lexically (as the tools do) and the result resolved through symlinks; when
that differs from resolving the path as written, both readings must be allowed.

A checkout with nothing bound (the main checkout, an unbound worktree) denies every write —
Codex runs the main checkout's hooks for all its worktrees — unless the hook's environment
says this is the coordinator: `INTEGRATOR_COORDINATOR=1` with no `INTEGRATOR_AGENT` and no
`INTEGRATOR_TASK`. A bound worktree always goes by its contract.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

from integrator import paths
from integrator.documents.claim import ClaimView
from integrator.documents.rules import ContractRules
from integrator.errors import IntegratorError
from integrator.escape import visible
from integrator.fleet.bound import binding_record, bound_rules, checkout_of
from integrator.fleet.events import Dialect, GuardInputError, Write, parse_event
from integrator.fleet.patches import lexical
from integrator.plumbing import git
from integrator.records.claimref import read_claim_rules

COORDINATOR_ENV = "INTEGRATOR_COORDINATOR"
# In a shared checkout (`task claim --in-place`) nothing is bound to the worktree; the
# agent's environment names its task instead, and hooks inherit that environment.
TASK_ENV = "INTEGRATOR_TASK"
__all__ = ["Dialect", "GuardInputError", "Write", "parse_event"]  # the hook's input, re-exported

# --- the decision (pure) -----------------------------------------------------------------


class Target(NamedTuple):
    """A path as the tool gave it, and where it lands relative to the worktree root."""

    given: str
    relative: str | None  # None: outside the worktree
    outside_allowed: bool = False


class PathVerdict(NamedTuple):
    given: str
    relative: str | None
    allowed: bool
    reason: str
    rule: str | None = None  # the contract line that decided


class GuardDecision(NamedTuple):
    allowed: bool
    reason: str
    paths: tuple[PathVerdict, ...] = ()
    task_id: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "decision": "allow" if self.allowed else "deny",
            "reason": self.reason,
            "task": self.task_id,
            "paths": [
                {"path": p.given, "relative": p.relative, "allowed": p.allowed,
                 "reason": p.reason, "rule": p.rule}
                for p in self.paths
            ],
        }  # fmt: skip


def deny(reason: str) -> GuardDecision:
    return GuardDecision(False, f"integrator guard: {reason}")


def contract_problem(  # noqa: PLR0911 — one return per reason a contract cannot write, naming it
    contract: ContractRules | None,
    claim: ClaimView | None,
    wid: str | None,
    now: datetime,
    *,
    in_place: bool = False,
) -> str | None:
    """Why no write may happen under this contract at all, or None.

    `in_place`: the contract was found through $INTEGRATOR_TASK in a shared checkout, so
    it must be an in-place contract (no worktree id) rather than bound to a worktree.
    """
    if contract is None:
        return (
            "no contract is bound to this worktree; claim a task (integrator task claim) "
            "before writing — every write is denied until then"
        )
    if in_place:
        if contract.worktree_id is not None:
            return (
                f"task {contract.task_id} is bound to worktree {contract.worktree_id!r}; "
                "write there, not in this checkout"
            )
    elif contract.worktree_id is None or contract.worktree_id != wid:
        return (
            f"the contract of task {contract.task_id} is bound to worktree "
            f"{contract.worktree_id!r}, not this one ({wid or 'the main checkout'}); a contract "
            "must not move to another checkout"
        )
    if claim is None:
        return f"task {contract.task_id} has no claim ref; the coordinator must issue it"
    if claim.generation != contract.ownership_generation or (
        claim.contract_digest != contract.digest
    ):
        return (
            f"this contract (generation {contract.ownership_generation}) is stale: the live "
            f"claim of {contract.task_id} is generation {claim.generation}; stop writing"
        )
    if claim.state != "live":
        why = f" ({claim.reason})" if claim.reason else ""
        return f"the claim of task {contract.task_id} is {claim.state}{why}; stop writing"
    if now >= claim.lease_expires_at:
        return (
            f"the lease of task {contract.task_id} expired at "
            f"{claim.lease_expires_at.isoformat()}; ask the coordinator to renew it"
        )
    return None


def judge_path(contract: ContractRules, target: Target) -> PathVerdict:
    if target.relative is None:
        if target.outside_allowed:
            return PathVerdict(target.given, None, True, "outside the repository, allowed")
        return PathVerdict(target.given, None, False, "outside this worktree")
    unsafe = paths.unsafe_reason(target.relative)
    if unsafe:
        return PathVerdict(target.given, target.relative, False, f"unsafe path: {unsafe}")
    match = contract.matcher().match(target.relative)
    rule = match.denied_by or match.allowed_by
    if match.allowed:
        return PathVerdict(target.given, target.relative, True, match.reason, rule)
    if match.denied_by:
        reason = f"denied by the contract's deny line {match.denied_by!r}"
    else:
        reason = "not covered by the contract's paths " + ", ".join(contract.paths)
    return PathVerdict(target.given, target.relative, False, reason, rule)


def decide(
    contract: ContractRules | None,
    claim: ClaimView | None,
    wid: str | None,
    now: datetime,
    targets: Sequence[Target],
    *,
    in_place: bool = False,
) -> GuardDecision:
    """Allow only when the contract is live for this worktree and covers every target."""
    problem = contract_problem(contract, claim, wid, now, in_place=in_place)
    if problem is not None or contract is None:
        return deny(problem or "no contract")
    verdicts = tuple(judge_path(contract, t) for t in targets)
    denied = [v for v in verdicts if not v.allowed]
    task = contract.task_id
    if not denied:
        return GuardDecision(True, f"task {task} owns every path written", verdicts, task)
    lines = "; ".join(f"{v.relative or v.given}: {v.reason}" for v in denied)
    reason = (
        f"integrator guard: task {task} (generation {contract.ownership_generation}) may not "
        f"write {lines}. Do not work around this: if the task needs the path, pause and "
        "request an expansion of the contract before writing; if it is unrelated, file a "
        "new task."
    )
    return GuardDecision(False, reason, verdicts, task)


# --- effects: locate paths, read the binding, render the hook answer -------------------


def locate(
    given: str,
    cwd: Path,
    root: Path,
    allow_outside: Sequence[Path] = (),
    *,
    path: str | None = None,
) -> list[Target]:
    """Where `path` (default: `given`) lands, relative to the worktree root: `..` folded
    lexically then symlinks resolved, and, when it differs, the path resolved as written
    (the kernel's reading); a write is judged under both."""
    raw = given if path is None else path
    joined = raw if os.path.isabs(raw) else f"{cwd}/{raw}"
    readings = dict.fromkeys([os.path.realpath(lexical(joined)), os.path.realpath(joined)])
    top = Path(os.path.realpath(root))
    out = []
    for reading in readings:
        real = Path(reading)
        try:
            relative = real.relative_to(top).as_posix()
        except ValueError:
            ok = any(real.is_relative_to(os.path.realpath(d)) for d in allow_outside)
            out.append(Target(given, None, ok))
            continue
        out.append(Target(given, relative if relative != "." else ""))
    return out


def coordinator_mode(env: Mapping[str, str]) -> bool:
    """The hook runs for the coordinator: `INTEGRATOR_COORDINATOR=1` and no agent identity
    (`INTEGRATOR_AGENT`, `INTEGRATOR_TASK`) beside it."""
    return (
        env.get(COORDINATOR_ENV) == "1"
        and not env.get("INTEGRATOR_AGENT")
        and not env.get("INTEGRATOR_TASK")
    )


def evaluate(
    targets: Sequence[str | Write],
    cwd: Path,
    now: datetime,
    *,
    allow_outside: Sequence[Path] = (),
    relative_to_root: bool = False,
    in_place_task: str | None = None,
    coordinator: bool = False,
) -> GuardDecision:
    """Decide for paths written from `cwd`, reading the worktree's binding and live claim.

    Without a binding, `in_place_task` ($INTEGRATOR_TASK of an agent in a shared checkout)
    names the task whose live in-place contract applies; with neither, only the coordinator
    (`coordinator_mode`) may write, and nothing is checked for it.
    """
    try:
        checkout = checkout_of(cwd)
    except IntegratorError:
        return deny(f"{cwd} is not inside a git worktree; nothing is bound here")
    root = checkout.root
    contract = bound_rules(checkout)
    if contract is None and not in_place_task and coordinator:
        return GuardDecision(
            True,
            f"{COORDINATOR_ENV}=1: the coordinator writes in a checkout with nothing bound; "
            "its writes are not checked",
        )
    in_place = contract is None and bool(in_place_task)
    task = contract.task_id if contract is not None else in_place_task
    claim = None
    if task:
        try:
            live = read_claim_rules(root, task)
        except IntegratorError as err:
            return deny(f"the claim of task {task!r} cannot be read: {err}")
        if live is not None:
            claim = live[0]
            # The bound document byte for byte the live one: its digest is the claim's.
            if contract is None or contract.same_document(live[1]):
                contract = live[1]
    base = root if relative_to_root else cwd
    writes = [t if isinstance(t, Write) else Write(t, t) for t in targets]
    located = [
        target for w in writes for target in locate(w.given, base, root, allow_outside, path=w.path)
    ]
    return decide(contract, claim, checkout.worktree_id, now, located, in_place=in_place)


def check_paths(
    cwd: Path,
    now: datetime,
    env: Mapping[str, str],
    *,
    paths: Sequence[str] = (),
    staged: bool = False,
    allow_outside: Sequence[Path] = (),
) -> GuardDecision:
    """`guard --path P` (paths as given, from `cwd`) or `guard --staged` (the paths staged
    in the checkout `cwd` is in), under the contract the environment `env` leads to."""
    if staged:
        targets, relative = staged_paths(checkout_of(cwd).root), True
    else:
        targets, relative = list(paths), False
    return evaluate(
        targets,
        cwd,
        now,
        allow_outside=allow_outside,
        relative_to_root=relative,
        in_place_task=env.get(TASK_ENV),
        coordinator=coordinator_mode(env),
    )


def bound_status(
    cwd: Path, now: datetime, *, in_place_task: str | None = None
) -> dict[str, object]:
    """`guard show --json`: the contract this checkout writes under (bound here, or the live
    in-place one of `in_place_task`), its live claim, and whether the guard lets it write."""
    checkout = checkout_of(cwd)
    contract = bound_rules(checkout)
    in_place = contract is None and bool(in_place_task)
    task = contract.task_id if contract is not None else in_place_task
    live = read_claim_rules(checkout.root, task) if task else None
    if contract is None and live is not None:
        contract = live[1]
    view = live[0] if live is not None else None
    wid = checkout.worktree_id
    problem = contract_problem(contract, view, wid, now, in_place=in_place)
    return {
        "worktree": str(checkout.root),
        "worktreeId": wid,
        "task": task,
        "binding": binding_record(checkout) or None,
        "contract": contract.wire() if contract is not None else None,
        "live": None if view is None else {
            "generation": view.generation,
            "attemptId": view.attempt_id,
            "state": view.state,
            "leaseExpiresAt": view.lease_expires_at.isoformat(),
            "contractDigest": view.contract_digest,
        },
        "writable": problem is None,
        "problem": problem,
    }  # fmt: skip


def staged_paths(root: Path) -> list[str]:
    """Paths staged for the next commit; a rename counts as both its ends."""
    proc = git.run_git(["diff", "--cached", "--name-only", "--no-renames", "-z"], cwd=root)
    return [p for p in proc.stdout.decode("utf-8", "surrogateescape").split("\0") if p]


class HookAnswer(NamedTuple):
    exit_code: int
    stdout: str = ""
    stderr: str = ""


def answer(dialect: Dialect | None, decision: GuardDecision) -> HookAnswer:
    """The hook protocol's answer. Unknown dialect (unreadable input): exit 2, which every
    supported tool treats as a block, with the reason on stderr. Codex is denied the same
    way: it runs hooks under the user's login shell, whose profile may print to stdout,
    and a deny JSON it cannot parse would let the call through; exit 2 reads stderr only."""
    if dialect is None or (dialect == "codex" and not decision.allowed):
        return HookAnswer(2, "", visible(decision.reason) + "\n")
    if dialect == "gemini":
        body: dict[str, object] = {} if decision.allowed else {
            "decision": "deny", "reason": decision.reason,
        }  # fmt: skip
        return HookAnswer(0, json.dumps(body) + "\n")
    if decision.allowed:
        return HookAnswer(0)  # no opinion: the tool's own permission rules still apply
    output = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": decision.reason,
        }
    }
    return HookAnswer(0, json.dumps(output) + "\n")


def run_hook(
    data: bytes,
    *,
    cwd: Path,
    now: datetime,
    allow_outside: Sequence[Path] = (),
    in_place_task: str | None = None,
    coordinator: bool = False,
) -> tuple[HookAnswer, GuardDecision]:
    """Handle one hook event end to end; never raises, and denies on any failure."""
    dialect: Dialect | None = None
    try:
        call = parse_event(data, default_cwd=cwd)
        dialect = call.dialect
        if not call.mediated:
            decision = GuardDecision(True, f"{call.tool} writes no file the guard can see")
        else:
            decision = evaluate(
                call.targets,
                call.cwd,
                now,
                allow_outside=allow_outside,
                in_place_task=in_place_task,
                coordinator=coordinator,
            )
    except GuardInputError as err:
        dialect = err.dialect
        decision = deny(f"{err} (fail closed)")
    except Exception as err:  # fail closed on anything, including our own bugs
        decision = deny(f"internal error {type(err).__name__}: {err} (fail closed)")
    return answer(dialect, decision), decision
