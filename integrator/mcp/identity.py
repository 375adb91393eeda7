"""The one agent an MCP server acts for, and the worktrees it may act in.

`integrator mcp` is started for one agent: `--agent NAME`, else `$INTEGRATOR_AGENT`, else
the agent the worktree it starts in is bound to (its binding record, `task claim` wrote
it), else a name of its own (`<host>-<pid>`). A worktree bound to another agent refuses
the server at start. From then on every tool call that names a worktree, or works under
a task, is checked against that agent on every call (bindings change):

- the worktree must be of the server's repository (real paths, resolved once per call),
  and either the server's own or one bound to its agent;
- a worktree whose binding record or bound contract names another agent is refused, the
  server's own included;
- the shared checkout's task (`$INTEGRATOR_TASK`, `task claim --in-place`) must be held by
  the agent (its live claim's lease holder).

Each refusal is a UsageError, the documented tool error with exit code 2.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from pathlib import Path

from integrator.errors import IntegratorError, UsageError
from integrator.fleet.bound import binding_record, bound_rules, checkout_of
from integrator.fleet.workspace import agent_name
from integrator.plumbing import git
from integrator.records.claimref import read_claim_rules

AGENT_ENV = "INTEGRATOR_AGENT"
TASK_ENV = "INTEGRATOR_TASK"


def plain(what: str, *values: str | None) -> None:
    """UsageError when a tool argument holds a control character (a NUL in a path, a line
    break in a task id): refused with the documented error shape before anything reads it,
    never left to fail somewhere below with an error of its own."""
    for value in values:
        if value is not None and any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
            raise UsageError(f"{what} {value[:80]!r} holds a control character")


def _common(path: Path) -> str:
    proc = git.run_git(["rev-parse", "--path-format=absolute", "--git-common-dir"], cwd=path)
    return os.path.realpath(proc.stdout.decode().strip())


def _root(path: Path) -> Path:
    return Path(os.path.realpath(checkout_of(Path(os.path.realpath(path))).root))


def owners(root: Path) -> dict[str, str]:
    """Who the worktree at `root` is bound to: {agent: what says so} from its binding
    record and its bound contract's lease holder; empty when nothing is bound."""
    checkout = checkout_of(root)
    found: dict[str, str] = {}
    record = binding_record(checkout)
    if record.get("agent"):
        found[record["agent"]] = f"its binding (task {record.get('task', '?')})"
    try:
        rules = bound_rules(checkout)
    except IntegratorError:
        rules = None  # an unreadable contract: the record alone decides, the guard denies
    holder = rules.document.get("lease", {}).get("holder") if rules is not None else None
    if isinstance(holder, str) and holder and holder not in found:
        found[holder] = f"its bound contract (task {rules.task_id if rules else '?'})"
    return found


class Identity:
    """The agent a server acts for (`agent`), its worktree (`root`), its repository."""

    def __init__(
        self, worktree: Path, agent: str | None = None, env: Mapping[str, str] | None = None
    ) -> None:
        env = os.environ if env is None else env
        self.env = env
        self.root = _root(worktree)
        self.common = _common(self.root)
        named = agent or env.get(AGENT_ENV)
        bound = owners(self.root)
        self.explicit = bool(named)
        if named:
            self.agent = agent_name(named)
        elif len(bound) == 1:
            self.agent = next(iter(bound))
        else:
            self.agent = agent_name(f"{socket.gethostname()}-{os.getpid()}")
        self._refuse_others(self.root, bound)

    def _refuse_others(self, root: Path, bound: dict[str, str]) -> None:
        others = {name: why for name, why in bound.items() if name != self.agent}
        if others:
            who = "; ".join(f"agent {name} by {why}" for name, why in sorted(others.items()))
            raise UsageError(
                f"worktree {root} is bound to {who}; this MCP server acts for agent "
                f"{self.agent} only"
            )

    def worktree(self, given: str | None) -> Path:
        """The worktree a call names (default: the server's), if its agent's."""
        if not given:
            root = self.root
        else:
            plain("worktree", given)
            path = Path(given)
            if not path.is_absolute() or not path.is_dir():
                raise UsageError(f"worktree {given[:200]!r} is not an absolute path to a folder")
            root = _root(path)
            if _common(root) != self.common:
                raise UsageError(f"{root} is not a worktree of this server's repository")
        bound = owners(root)
        self._refuse_others(root, bound)
        if root != self.root and not bound:
            raise UsageError(
                f"worktree {root} is not bound to agent {self.agent}; this MCP server acts "
                f"in {self.root} and in the worktrees bound to that agent"
            )
        return root

    def in_place_task(self, root: Path) -> str | None:
        """`$INTEGRATOR_TASK` for a checkout with nothing bound, if the agent holds it."""
        task = self.env.get(TASK_ENV)
        if not task or binding_record(checkout_of(root)):
            return None
        plain("task", task)
        found = read_claim_rules(root, task)
        holder = found[1].document.get("lease", {}).get("holder") if found else None
        if isinstance(holder, str) and holder and holder != self.agent:
            raise UsageError(
                f"task {task} ({TASK_ENV}) is held by agent {holder}; this MCP server acts for "
                f"agent {self.agent} only"
            )
        return task

    def coordinator_env(self) -> Mapping[str, str]:
        """The environment the guard reads for coordinator mode: an agent named to the
        server counts as the agent identity beside `INTEGRATOR_COORDINATOR`."""
        return {**self.env, AGENT_ENV: self.agent} if self.explicit else self.env
