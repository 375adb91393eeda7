"""Installing the write guard: agent hook settings where each agent reads them, and a
per-worktree pre-commit hook.

Where each agent loads project hooks from (docs/agents.md has the evidence):

| agent | file | also needs |
|---|---|---|
| Claude Code | `<worktree>/.claude/settings.local.json` | — (headless `-p` skips the trust dialog) |
| Codex | `<main checkout>/.codex/hooks.json` | a `.codex/` folder in the worktree; project and hook trust in `$CODEX_HOME/config.toml` |
| Gemini CLI | `<worktree>/.gemini/settings.json` | a trusted folder |

Codex reads a linked worktree's hooks from the main checkout (and only when the worktree
has a `.codex/` folder), so one hook there serves every worktree: the guard decides from
the event's cwd which worktree, and so which contract, a call belongs to. Settings are
merged into what is there and git-excluded when untracked. The pre-commit hook is set per
worktree (`extensions.worktreeConfig` + `core.hooksPath`), checks the staged paths and then
chains to the project's own hooks.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from integrator import jsontext
from integrator.errors import ConfigurationError, IntegratorError
from integrator.fleet.bound import BINDING_DIR
from integrator.fleet.workspace import exclude_path, worktree_git_dir, worktree_root
from integrator.plumbing import git


@dataclass(frozen=True)
class HookSpec:
    """One agent's hook entry and the tools its matcher must cover."""

    agent: str
    event: str
    matcher: str
    tools: tuple[str, ...]
    timeout: int | None = None  # in the agent's unit (Codex seconds, Gemini milliseconds)
    name: str | None = None


SPECS: dict[str, HookSpec] = {
    "claude": HookSpec(
        "claude", "PreToolUse", "Write|Edit|MultiEdit|NotebookEdit",
        ("Write", "Edit", "MultiEdit", "NotebookEdit"),
    ),
    # `Bash`: Codex sends apply_patch heredocs through its shell tool too.
    "codex": HookSpec(
        "codex", "PreToolUse", "apply_patch|Edit|Write|Bash", ("apply_patch", "Bash"), 30
    ),
    "gemini": HookSpec(
        "gemini", "BeforeTool", "write_file|replace", ("write_file", "replace"), 30000,
        "integrator-guard",
    ),
}  # fmt: skip
AGENTS = tuple(SPECS)
GUARD_MARK = "-m integrator guard"
# `python -m` puts the current folder first on sys.path, and a hook runs in the agent's
# worktree: a `json.py` there would run inside the guard. -P (Python 3.11+) leaves it out.
SAFE_PATH = "-P"
CODEX_EVENT_KEYS = {"PreToolUse": "pre_tool_use"}  # Codex's snake-case event labels


def hook_command(python: str, *, agent: str = "claude") -> str:
    # Exit 2 is the guard's own block; any other failure (it could not start, it crashed)
    # is turned into one, with a reason, so the tool still blocks the write.
    inner = (
        f"{shlex.quote(python)} {SAFE_PATH} {GUARD_MARK} || {{ rc=$?; [ $rc -eq 2 ] || "
        "echo 'integrator guard failed; the write is blocked (fail closed)' >&2; exit 2; }"
    )
    if agent == "codex":
        # Codex runs hooks as `$SHELL -lc COMMAND`; a login shell of another family (fish)
        # would not parse the fallback, so the command names its shell.
        return f"/bin/sh -c {shlex.quote(inner)}"
    return inner


def hook_python(command: str) -> str | None:
    """The Python a guard hook command runs, or None when it runs no guard."""
    found = _guard_words(command)
    return found[0] if found else None


def hook_safe_path(command: str) -> bool:
    """Whether the guard hook command keeps the worktree off Python's path (-P or -I)."""
    found = _guard_words(command)
    return found is not None and bool({"-P", "-I"} & set(found[1]))


def _guard_words(command: str) -> tuple[str, list[str]] | None:
    """(the Python, its options before `-m integrator guard`) of a guard hook command."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if len(words) >= 3 and words[:2] == ["/bin/sh", "-c"]:
        return _guard_words(words[2])
    for index in range(1, len(words) - 2):
        if words[index : index + 3] == ["-m", "integrator", "guard"]:
            start = index
            while start > 0 and words[start - 1].startswith("-"):
                start -= 1
            return (words[start - 1], words[start:index]) if start > 0 else None
    return None


@dataclass(frozen=True)
class Location:
    """Where an agent reads the guard's hook for a worktree."""

    settings: Path
    checkout: Path  # the checkout that holds `settings`
    marker: Path | None = None  # a folder that must exist for the settings to be read


def codex_checkout(root: Path) -> Path:
    """The main checkout, whose `.codex/` Codex reads for every linked worktree."""
    common = Path(
        git.run_git(["rev-parse", "--path-format=absolute", "--git-common-dir"], cwd=root)
        .stdout.decode()
        .strip()
    )
    if common.name != ".git":
        raise ConfigurationError(
            f"{root} belongs to a bare repository; Codex reads worktree hooks from a main "
            "checkout, and this repository has none (run Codex in a clone with a checkout)"
        )
    return common.parent


def location(agent: str, root: Path) -> Location:
    if agent == "claude":
        return Location(root / ".claude" / "settings.local.json", root)
    if agent == "gemini":
        return Location(root / ".gemini" / "settings.json", root)
    if agent == "codex":
        main = codex_checkout(root)
        return Location(main / ".codex" / "hooks.json", main, root / ".codex")
    raise ConfigurationError(f"unknown agent {agent!r}; choose from {', '.join(AGENTS)}")


def read_settings(path: Path) -> dict[str, Any]:
    try:
        document = jsontext.loads(path.read_text("utf-8")) if path.exists() else {}
    except (ValueError, OSError) as err:
        raise IntegratorError(f"{path} is not JSON ({err}); fix it and retry") from err
    if not isinstance(document, dict):
        raise IntegratorError(f"{path} does not hold a JSON object; fix it and retry")
    return document


def guard_groups(document: dict[str, Any], event: str) -> list[tuple[int, dict[str, Any]]]:
    """The (index, group) pairs of `event` whose hooks run the guard."""
    hooks = document.get("hooks")
    groups = hooks.get(event) if isinstance(hooks, dict) else None
    if not isinstance(groups, list):
        return []
    return [
        (index, group)
        for index, group in enumerate(groups)
        if isinstance(group, dict)
        and any(
            isinstance(h, dict) and GUARD_MARK in str(h.get("command", ""))
            for h in group.get("hooks") or []
        )
    ]


def _merge_hook(document: dict[str, Any], spec: HookSpec, command: str) -> None:
    hooks = document.setdefault("hooks", {})
    ours = {index for index, _ in guard_groups(document, spec.event)}
    groups = [g for i, g in enumerate(hooks.get(spec.event, [])) if i not in ours]
    entry: dict[str, Any] = {"type": "command", "command": command}
    if spec.name:
        entry["name"] = spec.name
    if spec.timeout is not None:
        entry["timeout"] = spec.timeout
    groups.append({"matcher": spec.matcher, "hooks": [entry]})
    hooks[spec.event] = groups


def codex_hook_hash(matcher: str | None, handler: dict[str, Any], event: str = "PreToolUse") -> str:
    """The hash Codex compares with `[hooks.state."<key>"] trusted_hash`: SHA-256 over the
    compact, key-sorted JSON of the normalised hook (event label, matcher, the handler with
    its timeout filled in, 600 s by default, and `async`), written `sha256:<hex>`."""
    normalised: dict[str, Any] = {
        "type": "command",
        "command": handler.get("command"),
        "timeout": max(int(handler.get("timeout") or 600), 1),
        "async": bool(handler.get("async", False)),
    }
    if handler.get("statusMessage") is not None:
        normalised["statusMessage"] = handler["statusMessage"]
    identity: dict[str, Any] = {"event_name": CODEX_EVENT_KEYS[event], "hooks": [normalised]}
    if matcher is not None:
        identity["matcher"] = matcher
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CodexHook:
    """The guard's hook in a Codex hooks.json: its trust key and current hash."""

    key: str
    hash: str
    matcher: str | None
    command: str


def codex_hooks(hooks_file: Path) -> list[CodexHook]:
    """The guard's handlers in `hooks_file`, keyed as Codex keys hook trust
    (`<abs path>:pre_tool_use:<group>:<handler>`)."""
    document = read_settings(hooks_file)
    source = str(hooks_file)  # as git names the main checkout; Codex keys it the same way
    out = []
    for group_index, group in guard_groups(document, "PreToolUse"):
        matcher = group.get("matcher")
        for handler_index, handler in enumerate(group.get("hooks") or []):
            if isinstance(handler, dict) and GUARD_MARK in str(handler.get("command", "")):
                out.append(
                    CodexHook(
                        f"{source}:pre_tool_use:{group_index}:{handler_index}",
                        codex_hook_hash(matcher, handler),
                        matcher,
                        str(handler.get("command")),
                    )
                )
    return out


@dataclass(frozen=True)
class Installed:
    written: tuple[Path, ...]
    warnings: tuple[str, ...]
    next_steps: tuple[str, ...] = ()


TRUST_STEPS = {
    "claude": (
        "Claude Code: headless `claude -p` runs project hooks as installed; an interactive "
        "session runs them once the folder's trust dialog was accepted. `--bare`, and "
        "`--setting-sources` without `local`, skip them."
    ),
    "codex": (
        "Codex runs project hooks only in a trusted project and only trusted hooks: run "
        "`integrator guard trust --agent codex` (it prints what it adds to "
        "$CODEX_HOME/config.toml). Until then Codex skips the hook silently."
    ),
    "gemini": (
        "Gemini CLI runs project hooks only in a trusted folder: run `integrator guard trust "
        "--agent gemini`, or start it with GEMINI_CLI_TRUST_WORKSPACE=true. `--skip-trust` "
        "runs no project hooks at all. Start it in the worktree's root folder."
    ),
}


def _tracked(root: Path, relative: str) -> bool:
    proc = git.run_git(["ls-files", "--error-unmatch", "--", relative], cwd=root, check=False)
    return proc.returncode == 0


def install(
    worktree: Path, *, agents: Sequence[str] = AGENTS, python: str = sys.executable
) -> Installed:
    """Write the agents' hook settings and a pre-commit hook that checks staged paths."""
    root = worktree_root(worktree)
    written: list[Path] = []
    warnings: list[str] = []
    for agent in agents:
        spec, where = SPECS[agent], location(agent, root)
        document = read_settings(where.settings)
        _merge_hook(document, spec, hook_command(python, agent=agent))
        where.settings.parent.mkdir(parents=True, exist_ok=True)
        where.settings.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        written.append(where.settings)
        if where.marker is not None:
            where.marker.mkdir(exist_ok=True)  # an empty folder: git never lists it
        relative = where.settings.relative_to(where.checkout).as_posix()
        if _tracked(where.checkout, relative):
            warnings.append(f"{relative} is tracked: the hook entry is now a local change to it")
        else:
            exclude_path(where.checkout, "/" + relative)
    written.append(install_pre_commit(root, python))
    steps = tuple(TRUST_STEPS[a] for a in agents)
    return Installed(tuple(written), tuple(warnings), steps)


def install_pre_commit(root: Path, python: str) -> Path:
    """Point this worktree (only) at a hooks folder whose pre-commit runs `guard --staged`,
    then hands over to the hook it replaced, so the project's own hooks keep running."""
    hooks = worktree_git_dir(root) / BINDING_DIR / "hooks"
    hooks.mkdir(parents=True, exist_ok=True)
    previous_file = hooks / ".previous"
    if previous_file.exists():
        previous = previous_file.read_text("utf-8").strip()
    else:
        found = git.run_git(
            ["rev-parse", "--path-format=absolute", "--git-path", "hooks"], cwd=root
        )
        previous = found.stdout.decode().strip()
        previous_file.write_text(previous + "\n", encoding="utf-8")
    names = {"pre-commit"} | (
        {p.name for p in Path(previous).iterdir() if os.access(p, os.X_OK) and not p.suffix}
        if Path(previous).is_dir()
        else set()
    )
    for name in sorted(names):
        chain = shlex.quote(f"{previous}/{name}")
        check = f"{shlex.quote(python)} {SAFE_PATH} -m integrator guard --staged || exit 1\n"
        script = (
            "#!/bin/sh\n# Installed by `integrator guard install`.\n"
            + (check if name == "pre-commit" else "")
            + f'if [ -x {chain} ]; then exec {chain} "$@"; fi\n'
        )
        (hooks / name).write_text(script, encoding="utf-8")
        (hooks / name).chmod(0o755)
    git.run_git(["config", "extensions.worktreeConfig", "true"], cwd=root)
    git.run_git(["config", "--worktree", "core.hooksPath", str(hooks)], cwd=root)
    return hooks / "pre-commit"
