"""Installing the write guard into a worktree: agent hook settings and a pre-commit hook.

`install` writes `.claude/settings.local.json`, `.codex/hooks.json` and
`.gemini/settings.json` (merged into what is there, and excluded from git when untracked)
and a per-worktree pre-commit hook (`extensions.worktreeConfig` + `core.hooksPath`) that
checks the staged paths and then chains to the project's own hooks.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from integrator.errors import IntegratorError
from integrator.fleet.workspace import BINDING_DIR, exclude_path, worktree_git_dir, worktree_root
from integrator.repo import git

HOOK_FILES: dict[str, tuple[str, str, str]] = {
    # agent: (settings file in the worktree, event, tool matcher)
    "claude": (".claude/settings.local.json", "PreToolUse", "Write|Edit|MultiEdit|NotebookEdit"),
    "codex": (".codex/hooks.json", "PreToolUse", "apply_patch|Edit|Write"),
    "gemini": (".gemini/settings.json", "BeforeTool", "write_file|replace"),
}
AGENTS = tuple(HOOK_FILES)


def hook_command(python: str) -> str:
    # `|| exit 2`: should the guard itself fail to start, the tool still blocks the write.
    return (
        f"{shlex.quote(python)} -m integrator guard || "
        "{ echo 'integrator guard failed; the write is blocked (fail closed)' >&2; exit 2; }"
    )


def _merge_hook(document: dict[str, Any], event: str, matcher: str, command: str) -> None:
    hooks = document.setdefault("hooks", {})
    groups = [
        g
        for g in hooks.get(event, [])
        if not any("-m integrator guard" in str(h.get("command", "")) for h in g.get("hooks", []))
    ]
    entry: dict[str, Any] = {"type": "command", "command": command}
    if event == "BeforeTool":
        entry["name"] = "integrator-guard"
    groups.append({"matcher": matcher, "hooks": [entry]})
    hooks[event] = groups


@dataclass(frozen=True)
class Installed:
    written: tuple[Path, ...]
    warnings: tuple[str, ...]


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
        relative, event, matcher = HOOK_FILES[agent]
        path = root / relative
        try:
            document = json.loads(path.read_text("utf-8")) if path.exists() else {}
        except ValueError as err:
            raise IntegratorError(f"{path} is not JSON ({err}); fix it and retry") from err
        _merge_hook(document, event, matcher, hook_command(python))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
        written.append(path)
        if _tracked(root, relative):
            warnings.append(f"{relative} is tracked: the hook entry is now a local change to it")
        else:
            exclude_path(root, "/" + relative)
    written.append(install_pre_commit(root, python))
    return Installed(tuple(written), tuple(warnings))


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
        check = f"{shlex.quote(python)} -m integrator guard --staged || exit 1\n"
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
