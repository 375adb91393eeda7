"""`guard doctor`: will each agent actually run the guard's hook in this worktree?

Installing a hook is not enough: each agent has its own conditions (docs/agents.md), and
when one is missing the agent skips the hook without a word and writes anyway. This reads
the same files the agents read and reports, per agent, every condition with its result.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from integrator.errors import IntegratorError
from integrator.fleet.hooks import (
    AGENTS,
    SPECS,
    codex_checkout,
    codex_hooks,
    guard_groups,
    hook_python,
    hook_safe_path,
    location,
    read_settings,
)
from integrator.fleet.trust import (
    codex_config_path,
    folder_trust,
    gemini_home,
    home,
    read_toml,
    read_trusted_folders,
    trusted_folders_path,
)


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


@dataclass
class AgentReport:
    agent: str
    installed: bool = False
    checks: list[Check] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.installed and all(c.ok for c in self.checks)

    def check(self, name: str, ok: bool, detail: str) -> bool:
        self.checks.append(Check(name, ok, detail))
        return ok

    def to_json(self) -> dict[str, object]:
        return {
            "agent": self.agent,
            "installed": self.installed,
            "ok": self.ok,
            "checks": [{"check": c.name, "ok": c.ok, "detail": c.detail} for c in self.checks],
            "notes": list(self.notes),
        }


def _table(doc: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = doc.get(key)
    return value if isinstance(value, dict) else {}


def covers(matcher: object, tool: str, *, search: bool = False) -> bool:
    """Whether a hook matcher selects `tool` (a regex: Claude Code and Codex match the whole
    name, Gemini CLI anywhere in it; empty or `*` selects every tool)."""
    if matcher is None or matcher in ("", "*"):
        return True
    if not isinstance(matcher, str):
        return False
    try:
        pattern = re.compile(matcher)
    except re.error:
        return False
    return bool(pattern.search(tool) if search else pattern.fullmatch(tool))


def _hook_checks(report: AgentReport, settings: Path, python: str) -> dict[str, Any] | None:
    """Settings present, a guard group, its matcher, its Python; the settings or None."""
    spec = SPECS[report.agent]
    if not report.check("settings", settings.is_file(), f"{settings}"):
        return None
    try:
        document = read_settings(settings)
    except IntegratorError as err:
        report.check("settings parse", False, str(err))
        return None
    groups = guard_groups(document, spec.event)
    report.installed = bool(groups)
    if not report.check("hook", bool(groups), f"a {spec.event} hook runs `integrator guard`"):
        return None
    matcher = groups[-1][1].get("matcher")
    missing = [t for t in spec.tools if not covers(matcher, t, search=report.agent == "gemini")]
    report.check(
        "matcher",
        not missing,
        f"matcher {matcher!r} " + (f"misses {', '.join(missing)}" if missing else "covers "
        + ", ".join(spec.tools)),
    )  # fmt: skip
    commands = [str(h.get("command", "")) for h in groups[-1][1].get("hooks") or []]
    found = next((p for p in map(hook_python, commands) if p), None)
    runs = found == python and os.access(found, os.X_OK)
    report.check(
        "python",
        runs,
        f"the hook runs {found!r}" + ("" if runs else f"; this Python is {python!r}: re-run "
        "`integrator guard install`"),
    )  # fmt: skip
    safe = any(hook_safe_path(c) for c in commands)
    report.check(
        "safe path",
        safe,
        "the hook runs Python with -P (the worktree's files cannot shadow its modules)"
        if safe
        else "the hook runs `python -m` without -P: a file in the worktree named like a "
        "module (json.py) would run inside the guard; re-run `integrator guard install`",
    )
    return document


def check_claude(root: Path, env: Mapping[str, str], python: str) -> AgentReport:
    report = AgentReport("claude")
    settings = location("claude", root).settings
    if _hook_checks(report, settings, python) is None:
        return report
    user = Path(env["CLAUDE_CONFIG_DIR"]) if env.get("CLAUDE_CONFIG_DIR") else home(env) / ".claude"
    for path in (user / "settings.json", root / ".claude" / "settings.json", settings):
        try:
            disabled = read_settings(path).get("disableAllHooks") is True
        except IntegratorError:
            disabled = False
        if disabled:
            report.check("hooks enabled", False, f"{path} sets disableAllHooks")
    report.notes += [
        "`claude --bare` skips all hooks; `--setting-sources` without `local` skips "
        "settings.local.json",
        "headless `claude -p` runs project hooks without a trust step; an interactive session "
        "runs them once the folder's trust dialog was accepted",
    ]
    return report


def check_codex(root: Path, env: Mapping[str, str], python: str) -> AgentReport:
    report = AgentReport("codex")
    try:
        where = location("codex", root)
    except IntegratorError as err:
        report.check("main checkout", False, str(err))
        return report
    if _hook_checks(report, where.settings, python) is None:
        return report
    marker = where.marker or root / ".codex"
    report.check(
        "worktree marker",
        marker.is_dir(),
        f"{marker} exists (Codex reads the main checkout's hooks only for a worktree that "
        "has a .codex/ folder)",
    )
    config_path = codex_config_path(env)
    try:
        _, config = read_toml(config_path)
    except IntegratorError as err:
        report.check("codex config", False, str(err))
        return report
    projects = _table(config, "projects")
    main = os.path.realpath(codex_checkout(root))
    levels = [_table(projects, p).get("trust_level") for p in (os.path.realpath(root), main)]
    level = next((lvl for lvl in levels if lvl is not None), None)
    report.check(
        "project trust",
        level == "trusted",
        f"{config_path}: project {main} is {level or 'not trusted'}"
        + ("" if level == "trusted" else "; run `integrator guard trust --agent codex`"),
    )
    states = _table(_table(config, "hooks"), "state")
    for hook in codex_hooks(where.settings):
        state = states.get(hook.key) if isinstance(states, dict) else None
        state = state if isinstance(state, dict) else {}
        trusted = state.get("trusted_hash") == hook.hash and state.get("enabled") is not False
        why = (
            "disabled (enabled = false)" if state.get("enabled") is False
            else "trusted" if trusted
            else "modified since it was trusted" if state.get("trusted_hash")
            else "not trusted"
        )  # fmt: skip
        report.check(
            "hook trust",
            trusted,
            f"{hook.key} is {why}" + ("" if trusted else "; run `integrator guard trust --agent codex`"),
        )  # fmt: skip
    if (root / ".codex" / "hooks.json").exists() and where.checkout != root:
        report.notes.append(
            f"{root / '.codex' / 'hooks.json'} is ignored: Codex reads a linked worktree's hooks "
            "from the main checkout"
        )
    report.notes.append(
        "`codex --dangerously-bypass-hook-trust` runs untrusted hooks, but never those of an "
        "untrusted project; `codex exec --trust` trusts the project, not its hooks"
    )
    return report


def check_gemini(root: Path, env: Mapping[str, str], python: str) -> AgentReport:
    report = AgentReport("gemini")
    settings = location("gemini", root).settings
    workspace = _hook_checks(report, settings, python)
    if workspace is None:
        return report
    user_path = gemini_home(env) / ".gemini" / "settings.json"
    try:
        user = read_settings(user_path)
    except IntegratorError:
        user = {}
    for name, doc in ((str(user_path), user), (str(settings), workspace)):
        config = _table(doc, "hooksConfig")
        if config.get("enabled") is False:
            report.check("hooks enabled", False, f"{name} sets hooksConfig.enabled = false")
        if SPECS["gemini"].name in (config.get("disabled") or []):
            report.check("hooks enabled", False, f"{name} lists the guard in hooksConfig.disabled")
    report.check("folder trust", *_gemini_trust(root, env, user))
    report.notes.append(
        "`gemini --skip-trust` runs no project hooks; start Gemini CLI in the worktree's root "
        "folder (it reads .gemini/settings.json from the folder it starts in)"
    )
    return report


def _gemini_trust(root: Path, env: Mapping[str, str], user: dict[str, Any]) -> tuple[bool, str]:
    flag = env.get("GEMINI_CLI_TRUST_WORKSPACE")
    if flag in ("true", "false"):
        return flag == "true", f"GEMINI_CLI_TRUST_WORKSPACE={flag}"
    folder = _table(_table(user, "security"), "folderTrust")
    if folder.get("enabled") is False:
        return True, "folder trust is switched off in the user settings (every folder is trusted)"
    path = trusted_folders_path(env)
    try:
        _, rules = read_trusted_folders(path)
    except IntegratorError as err:
        return False, str(err)
    trusted = folder_trust(rules, str(root))
    state = {True: "trusted", False: "distrusted (DO_NOT_TRUST)", None: "not trusted"}[trusted]
    hint = "" if trusted else "; run `integrator guard trust --agent gemini`"
    return bool(trusted), f"{path}: {os.path.realpath(root)} is {state}{hint}"


CHECKS = {"claude": check_claude, "codex": check_codex, "gemini": check_gemini}


def doctor(
    root: Path,
    env: Mapping[str, str],
    agents: Sequence[str] | None = None,
    python: str = sys.executable,
) -> list[AgentReport]:
    """A report per agent: those named, else every agent whose hook is installed here (all
    three, reported as not installed, when none is)."""
    reports = [CHECKS[a](root, env, python) for a in (agents or AGENTS)]
    if agents:
        return reports
    installed = [r for r in reports if r.installed]
    return installed or reports


def report_json(root: Path, reports: Sequence[AgentReport]) -> dict[str, object]:
    return {
        "worktree": str(root),
        "ok": bool(reports) and all(r.ok for r in reports),
        "agents": [r.to_json() for r in reports],
    }
