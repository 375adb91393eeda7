"""The trust steps agents need before they run project hooks, as edits to their user files.

Codex runs a project's hooks only when the project is trusted (`[projects."<path>"]
trust_level = "trusted"`) and each hook is trusted by hash (`[hooks.state."<key>"]
trusted_hash = "sha256:…"`), both in `$CODEX_HOME/config.toml`; an untrusted hook is skipped
without a word. Gemini CLI runs them only in a trusted folder (`~/.gemini/trustedFolders.json`,
or GEMINI_CLI_TRUST_WORKSPACE=true). These files belong to the user: a plan is computed
first, shown as a diff, and written only when asked (`integrator guard trust`). Explicit
distrust (`untrusted`, `DO_NOT_TRUST`, a disabled hook) is never overridden.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from integrator import jsontext
from integrator.errors import ConfigurationError
from integrator.files import atomic_write
from integrator.fleet.hooks import codex_checkout, codex_hooks, location


@dataclass(frozen=True)
class TrustPlan:
    """What `guard trust` would write: the file, its new text, and the diff shown."""

    path: Path
    old: str
    new: str
    mode: int = 0o600

    @property
    def changed(self) -> bool:
        return self.old != self.new

    def diff(self) -> str:
        return "".join(
            difflib.unified_diff(
                self.old.splitlines(keepends=True),
                self.new.splitlines(keepends=True),
                fromfile=str(self.path),
                tofile=str(self.path),
            )
        )

    def write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, self.new.encode("utf-8"), sync=True)
        os.chmod(self.path, self.mode)


def home(env: Mapping[str, str]) -> Path:
    return Path(env.get("HOME") or os.path.expanduser("~"))


def codex_config_path(env: Mapping[str, str]) -> Path:
    return (
        Path(env["CODEX_HOME"]) / "config.toml"
        if env.get("CODEX_HOME")
        else (home(env) / ".codex" / "config.toml")
    )


def toml_string(text: str) -> str:
    out = ['"']
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def read_toml(path: Path) -> tuple[str, dict[str, Any]]:
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        return "", {}
    except OSError as err:
        raise ConfigurationError(f"cannot read {path}: {err.strerror}") from err
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigurationError(f"{path} is not valid TOML ({err}); fix it first") from err


def _set_key(text: str, table: str, key: str, value: str) -> str:
    """`text` with `key = value` in `[table]`: the key replaced if the table (spelled as
    we spell it) has it, added under its header otherwise, or the table appended."""
    lines = text.splitlines(keepends=True)
    header = f"[{table}]"
    start = next((i for i, line in enumerate(lines) if line.strip() == header), None)
    if start is None:
        sep = "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
        return f"{text}{sep}{header}\n{key} = {value}\n"
    end = next(
        (i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("[")),
        len(lines),
    )
    pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
    for i in range(start + 1, end):
        if pattern.match(lines[i]):
            lines[i] = f"{key} = {value}\n"
            return "".join(lines)
    lines.insert(start + 1, f"{key} = {value}\n")
    return "".join(lines)


def _lookup(doc: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if not isinstance(doc, dict):
            return None
        doc = doc.get(key)  # type: ignore[assignment]
    return doc


def codex_trust_plan(root: Path, env: Mapping[str, str]) -> TrustPlan:
    """Trust the main checkout as a Codex project and every guard hook in its hooks.json."""
    hooks_file = location("codex", root).settings
    hooks = codex_hooks(hooks_file) if hooks_file.exists() else []
    if not hooks:
        raise ConfigurationError(
            f"{hooks_file} holds no integrator guard hook; run `integrator guard install "
            "--agents codex` first"
        )
    path = codex_config_path(env)
    old, doc = read_toml(path)
    project = os.path.realpath(codex_checkout(root))
    edits: list[tuple[str, str, str]] = []
    for candidate in dict.fromkeys([os.path.realpath(root), project]):
        if _lookup(doc, "projects", candidate, "trust_level") == "untrusted":
            raise ConfigurationError(
                f"{path} marks {candidate} as untrusted; integrator does not override that. "
                "Remove the entry yourself if Codex should run this project's hooks"
            )
    if _lookup(doc, "projects", project, "trust_level") != "trusted":
        edits.append((f"projects.{toml_string(project)}", "trust_level", '"trusted"'))
    for hook in hooks:
        state = _lookup(doc, "hooks", "state", hook.key)
        if isinstance(state, dict) and state.get("enabled") is False:
            raise ConfigurationError(
                f"{path} disables the hook {hook.key} (enabled = false); integrator does "
                "not override that. Remove the line yourself to let it run"
            )
        if _lookup(doc, "hooks", "state", hook.key, "trusted_hash") != hook.hash:
            edits.append(
                (f"hooks.state.{toml_string(hook.key)}", "trusted_hash", toml_string(hook.hash))
            )
    new = old
    for table, key, value in edits:
        new = _set_key(new, table, key, value)
    _verify_codex(path, new, project, hooks, edits)
    return TrustPlan(path, old, new)


def _verify_codex(
    path: Path, new: str, project: str, hooks: list[Any], edits: list[tuple[str, str, str]]
) -> None:
    wanted = "".join(f"[{table}]\n{key} = {value}\n" for table, key, value in edits)
    try:
        doc = tomllib.loads(new)
    except tomllib.TOMLDecodeError:
        doc = {}
    ok = _lookup(doc, "projects", project, "trust_level") == "trusted" and all(
        _lookup(doc, "hooks", "state", h.key, "trusted_hash") == h.hash for h in hooks
    )
    if not ok:
        raise ConfigurationError(
            f"{path} spells these tables in a way integrator does not edit; add this "
            f"yourself:\n{wanted}"
        )


# --- Gemini CLI -------------------------------------------------------------------------


def gemini_home(env: Mapping[str, str]) -> Path:
    return Path(env["GEMINI_CLI_HOME"]) if env.get("GEMINI_CLI_HOME") else home(env)


def trusted_folders_path(env: Mapping[str, str]) -> Path:
    if env.get("GEMINI_CLI_TRUSTED_FOLDERS_PATH"):
        return Path(env["GEMINI_CLI_TRUSTED_FOLDERS_PATH"])
    return gemini_home(env) / ".gemini" / "trustedFolders.json"


def folder_trust(rules: Mapping[str, object], folder: str) -> bool | None:
    """Gemini's isPathTrusted: the longest rule whose folder contains `folder` decides
    (`TRUST_PARENT` names its parent); None when no rule matches."""
    real = os.path.realpath(folder)
    best: tuple[int, object] | None = None
    for rule, level in rules.items():
        effective = os.path.dirname(rule) if level == "TRUST_PARENT" else rule
        effective = os.path.realpath(effective) if os.path.exists(effective) else effective
        inside = real == effective or real.startswith(effective.rstrip("/") + "/")
        if inside and (best is None or len(rule) > best[0]):
            best = (len(rule), level)
    if best is None:
        return None
    if best[1] == "DO_NOT_TRUST":
        return False
    return best[1] in ("TRUST_FOLDER", "TRUST_PARENT")


def read_trusted_folders(path: Path) -> tuple[str, dict[str, object]]:
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        return "", {}
    try:
        doc = jsontext.loads(text) if text.strip() else {}
    except ValueError as err:
        raise ConfigurationError(
            f"{path} is not plain JSON (comments?) ({err}); integrator does not rewrite it — "
            "add the folder yourself"
        ) from err
    if not isinstance(doc, dict):
        raise ConfigurationError(f"{path} does not hold a JSON object")
    return text, doc


def gemini_trust_plan(root: Path, env: Mapping[str, str]) -> TrustPlan:
    """Trust the worktree's folder in Gemini CLI's trustedFolders.json."""
    path = trusted_folders_path(env)
    old, rules = read_trusted_folders(path)
    folder = os.path.realpath(root)
    if rules.get(folder) == "DO_NOT_TRUST":
        raise ConfigurationError(
            f"{path} marks {folder} DO_NOT_TRUST; integrator does not override that"
        )
    if folder_trust(rules, folder):
        return TrustPlan(path, old, old)
    new = json.dumps({**rules, folder: "TRUST_FOLDER"}, indent=2) + "\n"
    return TrustPlan(path, old, new)
