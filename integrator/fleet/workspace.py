"""Lock modes and workspace binding (docs/fleet.md). `assignments.py` ties queue, contract and
worktree together on top of these.

A task that does not write (`requires_filesystem: false`, no `workspace:`) runs with lock
mode `none`: no workspace, no lock, no contract, full parallelism. A task that writes runs
with lock mode `exclusive`: its write set becomes an ownership contract (through the claims
module), and a git worktree at the queue head is bound one-to-one to that contract. The
workspace is, in this order, the task's explicit `workspace:`, the agent's, the project's
primary — and otherwise `WorkspaceConfigurationError`, never a silent fallback to some other
workspace (the failure of a fleet without them: every agent converging on one checkout). A fleet that
shares one checkout asks for `in_place` instead: no worktree, and the contract's
write set, which no overlapping live claim may share, is the lock.

Files (all in the main checkout, found from any worktree):
- `.agents/workspaces.toml` — the workspaces file: `primary = "NAME"`, `[agents.NAME] workspace =
  "WS"`, and optionally `[workspaces.WS] path = "…"` (default `.trees/WS`).
- `.agents/locks/WS.json` — the exclusive lock on workspace WS (which task, which agent).
- `<worktree git dir>/integrator/contract.json` — the contract bound to that worktree; its
  `worktreeId` is the worktree's git name (`.git/worktrees/<name>`), so a contract copied into
  another checkout is refused by the guard.
"""

from __future__ import annotations

import json
import os
import re
import socket
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from integrator import jsontext
from integrator.documents.attempt_key import AttemptKey
from integrator.documents.bounds import CEILING_LIMITS
from integrator.documents.contract import OwnershipContract, parse_contract
from integrator.errors import (
    ConfigurationError,
    UsageError,
    WorkspaceBusyError,
    WorkspaceConfigurationError,
)
from integrator.files import atomic_write
from integrator.fleet.bound import binding_record as read_binding_record
from integrator.fleet.bound import checkout_of
from integrator.fleet.keys import BOUND_KEY
from integrator.fleet.tasks import Task
from integrator.plumbing import git
from integrator.refnames import refname_problem
from integrator.store.keys import write_key

WORKSPACES_FILE = "workspaces.toml"
TREES_DIR = ".trees"


# --- who and where ---------------------------------------------------------------------


def agent_name(name: str | None = None) -> str:
    """A file-name-safe agent identity: NAME, $INTEGRATOR_AGENT, or `<host>-<pid>`."""
    raw = name or os.environ.get("INTEGRATOR_AGENT") or f"{socket.gethostname()}-{os.getpid()}"
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", raw).strip("._-")[:64]
    if not safe:
        raise UsageError(f"agent name {raw!r} has no usable characters")
    return safe


def main_checkout(start: Path) -> Path:
    """The folder that holds the queue: the main checkout, whichever worktree we are in.

    A bare repository has no checkout; its queue lives in the repository folder itself.
    """
    proc = git.run_git(
        ["rev-parse", "--path-format=absolute", "--git-common-dir"], cwd=start, check=False
    )
    if proc.returncode != 0:
        raise ConfigurationError(f"{start} is not inside a git repository; run from a checkout")
    common = Path(proc.stdout.decode().strip())
    return common.parent if common.name == ".git" else common


# --- the workspaces file ----------------------------------------------------------------------


@dataclass(frozen=True)
class Workspaces:
    """Which workspace each agent uses, the project's primary, and where workspaces live."""

    primary: str | None = None
    agents: tuple[tuple[str, str], ...] = ()
    paths: tuple[tuple[str, str], ...] = ()
    source: Path | None = None

    def agent_workspace(self, agent: str) -> str | None:
        return dict(self.agents).get(agent)

    def path_of(self, workspace: str, main: Path) -> Path:
        configured = dict(self.paths).get(workspace)
        return (main / configured) if configured else main / TREES_DIR / workspace


def _name(value: object, where: str) -> str:
    if not isinstance(value, str) or refname_problem(value):
        raise ConfigurationError(f"{where}: {value!r} is not a workspace name")
    return value


def parse_workspaces(text: str, source: Path | None = None) -> Workspaces:
    where = str(source or WORKSPACES_FILE)
    try:
        doc: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigurationError(f"{where}: not valid TOML: {err}") from err
    unknown = set(doc) - {"primary", "agents", "workspaces"}
    if unknown:
        raise ConfigurationError(f"{where}: unknown keys {sorted(unknown)}")
    primary = _name(doc["primary"], f"{where}: primary") if "primary" in doc else None
    agents = []
    for agent, table in dict(doc.get("agents", {})).items():
        if agent_name(agent) != agent:
            raise ConfigurationError(
                f"{where}: agent {agent!r} can never match a claimer's name; agent names use "
                "letters, digits, '.', '_' and '-'"
            )
        if not isinstance(table, dict) or set(table) != {"workspace"}:
            raise ConfigurationError(f'{where}: [agents.{agent}] needs only workspace = "NAME"')
        agents.append((agent, _name(table["workspace"], f"{where}: agents.{agent}")))
    spaces = []
    for space, table in dict(doc.get("workspaces", {})).items():
        _name(space, f"{where}: workspaces")
        if not isinstance(table, dict) or set(table) != {"path"} or not table["path"]:
            raise ConfigurationError(f'{where}: [workspaces.{space}] needs only path = "DIR"')
        spaces.append((space, str(table["path"])))
    return Workspaces(primary, tuple(agents), tuple(spaces), source)


def load_workspaces(queue_root: Path) -> Workspaces:
    path = queue_root / WORKSPACES_FILE
    try:
        return parse_workspaces(path.read_text("utf-8"), path)
    except FileNotFoundError:
        return Workspaces(source=path)


# --- lock modes (pure) ------------------------------------------------------------------


@dataclass(frozen=True)
class NoLock:
    """Lock mode `none`: the task is cognitive; it gets no workspace and takes no lock."""

    reason: str
    lock_mode: Literal["none"] = "none"
    workspace: None = None


@dataclass(frozen=True)
class Exclusive:
    """Lock mode `exclusive` on a live workspace, and where the binding came from."""

    workspace: str
    source: Literal["task", "agent", "primary"]
    reason: str
    lock_mode: Literal["exclusive"] = "exclusive"


@dataclass(frozen=True)
class InPlace:
    """The shared checkout, asked for explicitly (`task claim --in-place`): no
    worktree; the write set itself is the lock — the live claim refuses every overlapping
    contract — and commits go through `integrator commit --task`, one at a time."""

    reason: str
    lock_mode: Literal["paths"] = "paths"
    workspace: None = None


Resolution = NoLock | Exclusive | InPlace


def resolve_lock_mode(
    task: Task, agent: str, workspaces: Workspaces, *, in_place: bool = False
) -> Resolution:
    """The lock-mode decision table (docs/fleet.md). Raises WorkspaceConfigurationError when a writing task
    has no legitimate workspace, naming the file and the line that would fix it."""
    if in_place and task.writes and task.meta.workspace is None:
        return InPlace(f"task {task.id} runs in the shared checkout; its write set is the lock")
    if task.meta.workspace is not None:
        return Exclusive(
            task.meta.workspace, "task", f"task {task.id} names workspace {task.meta.workspace}"
        )
    if not task.meta.requires_filesystem:
        return NoLock(f"task {task.id} does not write files (requires_filesystem: false)")
    bound = workspaces.agent_workspace(agent)
    if bound is not None:
        return Exclusive(bound, "agent", f"agent {agent} is bound to workspace {bound}")
    if workspaces.primary is not None:
        return Exclusive(
            workspaces.primary,
            "primary",
            f"the project's primary workspace is {workspaces.primary}",
        )
    raise WorkspaceConfigurationError(
        f"task {task.id} writes files (requires_filesystem: true) but agent {agent} has no "
        f"workspace and the project has no primary one; add [agents.{agent}] workspace = "
        f'"{agent}" (or primary = "NAME") to {workspaces.source or WORKSPACES_FILE}, or set '
        f"`workspace:` in the task. There is no fallback to another agent's workspace."
    )


# --- exclusive locks --------------------------------------------------------------------


def lock_path(queue_root: Path, workspace: str) -> Path:
    return queue_root / "locks" / f"{workspace}.json"


def read_lock(queue_root: Path, workspace: str) -> dict[str, str] | None:
    try:
        data = jsontext.loads(lock_path(queue_root, workspace).read_text("utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {"task": "?", "agent": "?", "since": "?"}
    return {str(k): str(v) for k, v in dict(data).items()}


def acquire_lock(
    queue_root: Path, workspace: str, task_id: str, agent: str, since: str, live: set[str]
) -> Path:
    """Create the workspace's lock file (O_EXCL). A lock whose task is no longer claimed
    (`live` holds the claimed task ids) was left by a crash and is taken over."""
    path = lock_path(queue_root, workspace)
    path.parent.mkdir(parents=True, exist_ok=True)
    holder = read_lock(queue_root, workspace)
    if holder is not None and holder.get("task") not in live:
        path.unlink(missing_ok=True)
    body = json.dumps({"workspace": workspace, "task": task_id, "agent": agent, "since": since})
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        holder = read_lock(queue_root, workspace) or {}
        raise WorkspaceBusyError(
            f"workspace {workspace} is held exclusively by task {holder.get('task')} "
            f"(agent {holder.get('agent')}, since {holder.get('since')}); task {task_id} "
            "went back to the inbox — retry when that task completes, or bind agent "
            f"{agent} to a workspace of its own"
        ) from None
    with os.fdopen(fd, "w") as handle:
        handle.write(body + "\n")
    return path


def release_lock(queue_root: Path, workspace: str, task_id: str) -> bool:
    holder = read_lock(queue_root, workspace)
    if holder is None or holder.get("task") != task_id:
        return False
    lock_path(queue_root, workspace).unlink(missing_ok=True)
    return True


def locks_of(queue_root: Path, task_id: str) -> list[str]:
    folder = queue_root / "locks"
    if not folder.is_dir():
        return []
    return [
        p.stem
        for p in sorted(folder.glob("*.json"))
        if (read_lock(queue_root, p.stem) or {}).get("task") == task_id
    ]


# --- worktrees and binding --------------------------------------------------------------


def _rev_parse(path: Path, *args: str) -> str | None:
    proc = git.run_git(["rev-parse", "--path-format=absolute", *args], cwd=path, check=False)
    return proc.stdout.decode().strip() if proc.returncode == 0 else None


def worktree_root(start: Path) -> Path:
    return checkout_of(start).root


def worktree_git_dir(worktree: Path) -> Path:
    return checkout_of(worktree).git_dir


def worktree_id(worktree: Path) -> str | None:
    """The worktree's git name (`.git/worktrees/<name>`); None for the main checkout."""
    return checkout_of(worktree).worktree_id


def exclude_path(root: Path, line: str) -> None:
    """Add `line` to the repository's info/exclude (shared by all worktrees), once."""
    common = _rev_parse(root, "--git-common-dir")
    if common is None:
        return
    exclude = Path(common) / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    text = exclude.read_text("utf-8") if exclude.exists() else ""
    if line not in text.splitlines():
        sep = "" if text.endswith("\n") or not text else "\n"
        exclude.write_text(text + sep + line + "\n", encoding="utf-8")


def prepare_worktree(main: Path, path: Path, base: str, workspace: str) -> Path:
    """A clean worktree at `path` checked out (detached) at `base`; created when missing."""
    if not path.exists():
        if path.resolve().is_relative_to(main.resolve()):
            exclude_path(main, "/" + path.resolve().relative_to(main.resolve()).parts[0] + "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        git.run_git(["worktree", "add", "-q", "--detach", str(path), base], cwd=main)
        return path
    own_common = _rev_parse(main, "--git-common-dir")
    if _rev_parse(path, "--git-common-dir") != own_common or (
        _rev_parse(path, "--show-toplevel") != str(path.resolve())
    ):
        raise WorkspaceConfigurationError(
            f"workspace {workspace}: {path} exists but is not a worktree of this repository; "
            "remove it, or point [workspaces.NAME] path in workspaces.toml elsewhere"
        )
    if worktree_id(path) is None:
        raise WorkspaceConfigurationError(
            f"workspace {workspace}: {path} is the main checkout, which holds the queue; "
            "give the workspace its own path (default .trees/NAME)"
        )
    status = git.run_git(["status", "--porcelain", "--untracked-files=all"], cwd=path)
    if status.stdout.strip():
        raise WorkspaceBusyError(
            f"workspace {workspace} ({path}) has uncommitted changes left by an earlier "
            "task; submit or discard them before it takes new work"
        )
    git.run_git(["checkout", "-q", "--detach", base], cwd=path)
    return path


def binding_dir(worktree: Path) -> Path:
    return checkout_of(worktree).binding_dir


def bind(
    worktree: Path,
    contract: OwnershipContract,
    record: dict[str, str],
    key: AttemptKey | None = None,
) -> Path:
    """Bind `contract` (and the attempt key issued with it, 0600) to `worktree`; refuses a
    contract naming another worktree."""
    wid = worktree_id(worktree)
    if wid is None or contract.worktree_id != wid:
        raise ConfigurationError(
            f"contract for {contract.task_id} names worktree {contract.worktree_id!r}, "
            f"but {worktree} is {wid or 'the main checkout'}; a contract binds one worktree"
        )
    folder = binding_dir(worktree)
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in (
        ("binding.json", json.dumps(record, indent=2) + "\n"),
        ("contract.json", contract.to_json() + "\n"),
    ):
        atomic_write(folder / name, text.encode("utf-8"), sync=False)
    if key is not None:
        write_key(folder / BOUND_KEY, key)
    else:
        (folder / BOUND_KEY).unlink(missing_ok=True)  # never an earlier task's key
    return folder / "contract.json"


def bound_contract(worktree: Path) -> OwnershipContract | None:
    """The contract bound to the worktree, or None when nothing is bound."""
    try:
        data = (binding_dir(worktree) / "contract.json").read_bytes()
    except FileNotFoundError:
        return None
    return parse_contract(data, limits=CEILING_LIMITS)  # a copy of one issued: admitted


def binding_record(worktree: Path) -> dict[str, str]:
    return read_binding_record(checkout_of(worktree))


def unbind(worktree: Path, task_id: str) -> bool:
    """Remove the binding if it belongs to `task_id` (a newer task's binding stays)."""
    if not worktree.exists() or binding_record(worktree).get("task") != task_id:
        return False
    folder = binding_dir(worktree)
    for name in ("contract.json", "binding.json", BOUND_KEY):
        (folder / name).unlink(missing_ok=True)
    return True
