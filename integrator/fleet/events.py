"""Reading an agent's pre-tool hook event: which tool, which paths it would write.

Claude Code and Codex send `PreToolUse`, Gemini CLI `BeforeTool` (docs/agents.md has the
payloads). A tool that names a file (`file_path`, `notebook_path`, …) writes that path;
Codex's `apply_patch` writes every path its patch names, read as Codex reads it
(`integrator.fleet.patches`); a shell tool writes what the `apply_patch` runs inside it
write (`integrator.fleet.shell`), and is otherwise not mediated. What cannot be read raises
GuardInputError, and the guard denies.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal, NamedTuple

from integrator import jsontext
from integrator.fleet.patches import PatchError, parse_patch, readings, resolve
from integrator.fleet.shell import APPLY_PATCH_NAMES, ShellError, invocation_paths, shell_patches
from integrator.limits import MAX_EVENT_BYTES

Dialect = Literal["claude", "codex", "gemini"]

WRITE_FIELDS = ("file_path", "notebook_path", "path", "filePath", "absolute_path", "target_file")
READ_ONLY_TOOLS = frozenset(
    {
        # Claude Code
        "Read", "Glob", "Grep", "LS", "WebFetch", "WebSearch", "Task", "TodoWrite",
        "BashOutput", "KillShell", "ExitPlanMode", "NotebookRead",
        # Gemini CLI
        "read_file", "read_many_files", "list_directory", "glob", "search_file_content",
        "google_web_search", "web_fetch", "save_memory", "write_todos",
    }
)  # fmt: skip
SHELL_TOOLS = frozenset({"Bash", "run_shell_command", "shell", "exec_command", "local_shell"})
SHELL_DIR_FIELDS = ("workdir", "dir_path", "directory")  # a shell tool's own working folder


class GuardInputError(ValueError):
    """The hook input cannot be read as a tool call; the guard denies.

    `dialect` is set once the event named its hook protocol, so the denial can use it.
    """

    def __init__(self, message: str, dialect: Dialect | None = None) -> None:
        super().__init__(message)
        self.dialect = dialect


class Write(NamedTuple):
    """A path a tool call writes: as the tool named it, and where it lands (absolute, or
    relative to the call's cwd)."""

    given: str
    path: str


class ToolCall(NamedTuple):
    dialect: Dialect
    tool: str
    targets: tuple[Write, ...]
    cwd: Path
    mediated: bool = True  # False: the tool writes nothing we can see (reads, plain shell)


def patch_paths(patch: str, dialect: Dialect | None = None) -> list[str]:
    """Every path an `apply_patch` body names (both ends of a move), as Codex parses it."""
    try:
        hunks = parse_patch(patch)
    except PatchError as err:
        raise GuardInputError(
            f"the patch does not parse as Codex reads it: {err}", dialect
        ) from err
    found = [path for hunk in hunks for path in hunk.paths()]
    if not found:
        raise GuardInputError(
            "the patch names no file (no '*** Add/Update/Delete File:' header)", dialect
        )
    return list(dict.fromkeys(found))


def _patch_writes(patch: str, cwd: Path, dialect: Dialect) -> tuple[Write, ...]:
    return tuple(Write(p, r) for p in patch_paths(patch, dialect) for r in readings(p, cwd))


def _shell_script(value: object) -> str | None:
    """The script of a shell call: a string, or an argv (`bash -lc SCRIPT`, `apply_patch P`)."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value) or not value:
        return None
    shells = ("bash", "sh", "zsh", "dash")
    if len(value) == 3 and os.path.basename(value[0]) in shells and value[1] in ("-c", "-lc"):
        return str(value[2])
    if len(value) == 2 and os.path.basename(value[0]) in APPLY_PATCH_NAMES:
        return f"{value[0]} {_single_quoted(value[1])}"
    return "\n".join(value)  # an argv the guard does not know: read as words, fail closed


def _single_quoted(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _shell_writes(script: str, cwd: Path, dialect: Dialect) -> tuple[Write, ...] | None:
    """What the apply_patch runs of a shell command write; None when it runs none."""
    try:
        invocations = shell_patches(script, cwd)
        found = [pair for invocation in invocations for pair in invocation_paths(invocation)]
    except (ShellError, PatchError) as err:
        raise GuardInputError(
            f"the shell command runs apply_patch in a way the guard cannot check ({err}); "
            "use the apply_patch tool, or `apply_patch <<'EOF'` with the patch inline",
            dialect,
        ) from err
    if not invocations:
        return None
    unknown = [given for given, path in found if path is None]
    if unknown:
        raise GuardInputError(
            f"apply_patch runs after a cd the guard cannot follow, so {unknown[0]!r} has no "
            "known folder; use absolute paths or a literal `cd DIR &&`",
            dialect,
        )
    if not found:
        raise GuardInputError("the patch names no file", dialect)
    return tuple(Write(given, path) for given, path in found if path is not None)


def _event(data: bytes, default_cwd: Path) -> tuple[Dialect, str, dict[str, object], Path]:
    if len(data) > MAX_EVENT_BYTES:
        raise GuardInputError(f"hook input is larger than {MAX_EVENT_BYTES >> 20} MiB")
    try:
        event = jsontext.loads(data)
    except (ValueError, UnicodeDecodeError) as err:
        raise GuardInputError(f"hook input is not JSON: {err}") from err
    if not isinstance(event, dict):
        raise GuardInputError("hook input is not a JSON object")
    name = event.get("hook_event_name")
    dialects: dict[object, Dialect] = {"PreToolUse": "claude", "BeforeTool": "gemini"}
    if not isinstance(name, str) or name not in dialects:
        raise GuardInputError(f"hook_event_name {name!r} is not PreToolUse or BeforeTool")
    dialect = dialects[name]
    if dialect == "claude" and "turn_id" in event:
        dialect = "codex"  # Codex sends Claude's wire format, plus the turn it runs in
    tool, tool_input = event.get("tool_name"), event.get("tool_input")
    if not isinstance(tool, str) or not tool or not isinstance(tool_input, dict):
        raise GuardInputError("hook input lacks tool_name or a tool_input object", dialect)
    cwd = event.get("cwd")
    here = Path(cwd) if isinstance(cwd, str) and os.path.isabs(cwd) else default_cwd
    return dialect, tool, tool_input, here


def _writes_of(
    dialect: Dialect, tool: str, tool_input: dict[str, object], here: Path
) -> tuple[Write, ...] | None:
    """The paths the call writes; None when the tool writes nothing the guard can see."""
    command = tool_input.get("command")
    if tool == "apply_patch":
        if not isinstance(command, str):
            raise GuardInputError(f"{tool}: tool_input.command holds no patch text", dialect)
        return _patch_writes(command, here, dialect)
    if tool in SHELL_TOOLS:
        script = _shell_script(command)
        if script is None:
            raise GuardInputError(f"{tool}: tool_input.command is not a command", dialect)
        folder = next((tool_input[k] for k in SHELL_DIR_FIELDS if k in tool_input), None)
        if folder is not None and (not isinstance(folder, str) or not folder):
            raise GuardInputError(f"{tool}: its working folder is not a string", dialect)
        return _shell_writes(script, Path(resolve(folder, here)) if folder else here, dialect)
    if isinstance(command, str) and "*** Begin Patch" in command:
        return _patch_writes(command, here, dialect)
    if tool in READ_ONLY_TOOLS:
        return None
    targets = [tool_input[f] for f in WRITE_FIELDS if f in tool_input]
    if any(not isinstance(t, str) or not t for t in targets):
        raise GuardInputError(
            f"{tool}: a path field of tool_input is not a non-empty string", dialect
        )
    if not targets:
        if tool in ("Write", "Edit", "MultiEdit", "NotebookEdit", "write_file", "replace"):
            raise GuardInputError(f"{tool}: tool_input has no file_path", dialect)
        return None
    return tuple(Write(str(t), str(t)) for t in targets)


def parse_event(data: bytes, *, default_cwd: Path) -> ToolCall:
    """Read a Claude Code / Codex `PreToolUse` or Gemini `BeforeTool` event."""
    dialect, tool, tool_input, here = _event(data, default_cwd)
    writes = _writes_of(dialect, tool, tool_input, here)
    if writes is None:
        return ToolCall(dialect, tool, (), here, mediated=False)
    return ToolCall(dialect, tool, writes, here)


def unmediated_answer(data: bytes, *, cwd: Path) -> str | None:
    """The allow answer for a call that writes nothing the guard mediates (a read, a shell
    command that runs no apply_patch), read with the hook's own parser; None for anything
    else, which the full guard decides (and denies when in doubt). Loads no contract
    models, so the hook answers such calls fast."""
    try:
        call = parse_event(data, default_cwd=cwd)
    except Exception:
        return None
    if call.mediated:
        return None
    return "{}\n" if call.dialect == "gemini" else ""
