"""Installing the guard where each agent loads it, the trust steps, and `guard doctor`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from integrator.errors import ConfigurationError
from integrator.fleet import doctor, hooks, trust
from tests.fleet.test_guard import make_bound
from tests.gitutil import GIT_ENV, git
from tests.gitutil import run_integrator as integrator


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, dict[str, str]]:
    """A bound worktree, its main checkout, and an environment with empty agent homes."""
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)
    worktree = make_bound(tmp_path)
    main = worktree.parent.parent
    home = tmp_path / "home"
    home.mkdir()
    env = {
        "HOME": str(home),
        "CODEX_HOME": str(home / ".codex"),
        "PATH": os.environ["PATH"],
        **GIT_ENV,
    }
    return worktree, main, env


def test_install_writes_each_agents_hook_where_it_reads_it(
    world: tuple[Path, Path, dict[str, str]],
) -> None:
    """Claude and Gemini read the worktree, Codex the main checkout plus a `.codex/` marker."""
    worktree, main, env = world
    out = integrator("guard", "install", "--worktree", str(worktree), cwd=worktree, environ=env)
    assert out.returncode == 0, out.stderr
    claude = json.loads((worktree / ".claude/settings.local.json").read_text())
    assert claude["hooks"]["PreToolUse"][0]["matcher"] == "Write|Edit|MultiEdit|NotebookEdit"
    codex = json.loads((main / ".codex/hooks.json").read_text())["hooks"]["PreToolUse"][0]
    assert codex["matcher"] == "apply_patch|Edit|Write|Bash" and codex["hooks"][0]["timeout"] == 30
    assert codex["hooks"][0]["command"].startswith("/bin/sh -c ")
    assert hooks.hook_python(codex["hooks"][0]["command"]) == sys.executable
    assert (worktree / ".codex").is_dir() and not (worktree / ".codex/hooks.json").exists()
    gemini = json.loads((worktree / ".gemini/settings.json").read_text())["hooks"]["BeforeTool"]
    assert gemini[0]["hooks"][0]["name"] == "integrator-guard"
    assert git("status", "--porcelain", cwd=worktree) == ""
    assert ".codex" not in git("status", "--porcelain", cwd=main)
    assert "guard trust --agent codex" in out.stderr and "GEMINI_CLI_TRUST_WORKSPACE" in out.stderr


def test_install_keeps_other_hooks_and_replaces_its_own(
    world: tuple[Path, Path, dict[str, str]],
) -> None:
    """A project's own hooks stay; installing twice leaves one guard group, placed last."""
    worktree, main, _ = world
    (main / ".codex").mkdir()
    own = {"matcher": "Bash", "hooks": [{"type": "command", "command": "/usr/bin/true"}]}
    (main / ".codex/hooks.json").write_text(json.dumps({"hooks": {"PreToolUse": [own]}}))
    hooks.install(worktree, agents=["codex"])
    hooks.install(worktree, agents=["codex"])
    groups = json.loads((main / ".codex/hooks.json").read_text())["hooks"]["PreToolUse"]
    assert groups[0] == own and len(groups) == 2
    [guard_hook] = hooks.codex_hooks(main / ".codex/hooks.json")
    assert guard_hook.key == f"{main}/.codex/hooks.json:pre_tool_use:1:0"


def test_pre_commit_checks_staged_paths(world: tuple[Path, Path, dict[str, str]]) -> None:
    """After `guard install`, commits of unowned staged paths fail and owned ones pass."""
    worktree, _, _ = world
    hooks.install(worktree)
    (worktree / "docs/x.md").write_text("changed\n")
    git("add", "docs/x.md", cwd=worktree)
    refused = subprocess.run(
        ["git", "commit", "-qm", "sneak"], cwd=worktree, capture_output=True, text=True, check=False
    )
    assert refused.returncode != 0 and "docs/x.md" in refused.stderr
    git("reset", "-q", "--hard", cwd=worktree)
    (worktree / "src/a.py").write_text("owned change\n")
    git("commit", "-qam", "owned", cwd=worktree)
    assert git("log", "-1", "--format=%s", cwd=worktree) == "owned"


def test_codex_hook_hash_matches_one_codex_accepted() -> None:
    """The trust hash of a hook Codex 0.171.0 ran as trusted (recorded in docs/agents.md)."""
    handler = {"type": "command", "command": "/tmp/research-agents/hook.sh", "timeout": 30}
    assert hooks.codex_hook_hash("apply_patch|Edit|Write", handler) == (
        "sha256:db27650e8d0f5980310fe9cfd8b59b883959ad6adbf969c150bdfb83003414f6"
    )
    assert hooks.codex_hook_hash("x", {"command": "c"}) == hooks.codex_hook_hash(
        "x", {"command": "c", "timeout": 600, "async": False}
    )


def test_codex_trust_writes_project_and_hook_trust(
    world: tuple[Path, Path, dict[str, str]],
) -> None:
    """`guard trust --agent codex` adds exactly the two tables, keeps the rest, is idempotent."""
    worktree, main, env = world
    hooks.install(worktree, agents=["codex"])
    config = Path(env["CODEX_HOME"]) / "config.toml"
    config.parent.mkdir()
    config.write_text('model = "m"\n\n[projects."/elsewhere"]\ntrust_level = "trusted"\n')
    dry = integrator("guard", "trust", "--agent", "codex", "--dry-run", cwd=worktree, environ=env)
    assert dry.returncode == 0 and "would write" in dry.stdout and "trusted_hash" in dry.stdout
    assert "hooks.state" not in config.read_text()
    done = integrator("guard", "trust", "--agent", "codex", cwd=worktree, environ=env)
    assert done.returncode == 0, done.stderr
    doc = tomllib.loads(config.read_text())
    [hook] = hooks.codex_hooks(main / ".codex/hooks.json")
    assert doc["model"] == "m" and doc["projects"]["/elsewhere"]["trust_level"] == "trusted"
    assert doc["projects"][os.path.realpath(main)]["trust_level"] == "trusted"
    assert doc["hooks"]["state"][hook.key]["trusted_hash"] == hook.hash
    for line in done.stdout.splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            assert line[1:] in config.read_text()  # it printed exactly what it wrote
    again = integrator("guard", "trust", "--agent", "codex", cwd=worktree, environ=env)
    assert "nothing to write" in again.stdout


def test_codex_trust_replaces_a_stale_hash_and_never_overrides_distrust(
    world: tuple[Path, Path, dict[str, str]],
) -> None:
    """A hash trusted before the hook changed is updated; `untrusted` and `enabled = false`
    are the user's word and make `guard trust` refuse."""
    worktree, main, env = world
    hooks.install(worktree, agents=["codex"])
    [hook] = hooks.codex_hooks(main / ".codex/hooks.json")
    config = Path(env["CODEX_HOME"]) / "config.toml"
    config.parent.mkdir()
    stale = f'[hooks.state.{trust.toml_string(hook.key)}]\ntrusted_hash = "sha256:old"\n'
    config.write_text(stale)
    trust.codex_trust_plan(worktree, env).write()
    assert (
        tomllib.loads(config.read_text())["hooks"]["state"][hook.key]["trusted_hash"] == hook.hash
    )
    config.write_text(
        f'[projects.{trust.toml_string(os.path.realpath(main))}]\ntrust_level = "untrusted"\n'
    )
    with pytest.raises(ConfigurationError, match="untrusted"):
        trust.codex_trust_plan(worktree, env)
    config.write_text(stale + "enabled = false\n")
    with pytest.raises(ConfigurationError, match="enabled = false"):
        trust.codex_trust_plan(worktree, env)


def test_codex_trust_refuses_tables_it_cannot_edit(
    world: tuple[Path, Path, dict[str, str]],
) -> None:
    """A config that spells the table another way is not rewritten; the lines are printed."""
    worktree, main, env = world
    hooks.install(worktree, agents=["codex"])
    config = Path(env["CODEX_HOME"]) / "config.toml"
    config.parent.mkdir()
    config.write_text(f"[projects.'{os.path.realpath(main)}']\nother = 1\n")
    with pytest.raises(ConfigurationError, match="add this yourself"):
        trust.codex_trust_plan(worktree, env)


def test_gemini_trust_adds_the_folder_and_keeps_distrust(
    world: tuple[Path, Path, dict[str, str]],
) -> None:
    """The worktree becomes TRUST_FOLDER (file mode 0600); DO_NOT_TRUST is never overridden."""
    worktree, _, env = world
    plan = trust.gemini_trust_plan(worktree, env)
    plan.write()
    rules = json.loads(plan.path.read_text())
    assert rules == {os.path.realpath(worktree): "TRUST_FOLDER"}
    assert plan.path.stat().st_mode & 0o777 == 0o600
    assert not trust.gemini_trust_plan(worktree, env).changed
    plan.path.write_text(json.dumps({os.path.realpath(worktree): "DO_NOT_TRUST"}))
    with pytest.raises(ConfigurationError, match="DO_NOT_TRUST"):
        trust.gemini_trust_plan(worktree, env)


def test_gemini_folder_rules_take_the_longest_match(tmp_path: Path) -> None:
    """Gemini's rule: the longest matching rule decides; TRUST_PARENT names the parent."""
    inner = tmp_path / "a" / "b"
    inner.mkdir(parents=True)
    rules = {str(tmp_path): "TRUST_FOLDER", str(tmp_path / "a"): "DO_NOT_TRUST"}
    assert trust.folder_trust(rules, str(inner)) is False
    assert trust.folder_trust({str(inner / "x"): "TRUST_PARENT"}, str(inner)) is True
    assert trust.folder_trust({str(tmp_path / "ab"): "TRUST_FOLDER"}, str(inner)) is None


def checks(report: doctor.AgentReport) -> dict[str, bool]:
    return {c.name: c.ok for c in report.checks}


def test_doctor_says_codex_and_gemini_skip_the_hook_until_trusted(
    world: tuple[Path, Path, dict[str, str]],
) -> None:
    """Installed but untrusted: Codex and Gemini fail their trust checks, Claude passes; after
    `guard trust` every agent will run the guard (exit 0)."""
    worktree, _, env = world
    hooks.install(worktree)
    before = {r.agent: r for r in doctor.doctor(worktree, env)}
    assert before["claude"].ok
    assert checks(before["codex"])["project trust"] is False
    assert checks(before["codex"])["hook trust"] is False
    assert checks(before["codex"])["worktree marker"] is True
    assert checks(before["gemini"])["folder trust"] is False
    out = integrator("guard", "doctor", "--json", cwd=worktree, environ=env)
    assert out.returncode == 1 and not json.loads(out.stdout)["ok"]
    for agent in ("codex", "gemini"):
        assert (
            integrator("guard", "trust", "--agent", agent, cwd=worktree, environ=env).returncode
            == 0
        )
    out = integrator("guard", "doctor", "--json", cwd=worktree, environ=env)
    assert out.returncode == 0, out.stdout
    assert {a["agent"] for a in json.loads(out.stdout)["agents"]} == {"claude", "codex", "gemini"}


def test_doctor_catches_what_makes_an_agent_skip_the_hook(
    world: tuple[Path, Path, dict[str, str]],
) -> None:
    """No Bash in Codex's matcher, no `.codex/` marker, another Python, disabled hooks, an
    env that distrusts the folder: each is reported as a failing check."""
    worktree, main, env = world
    hooks.install(worktree)
    for agent in ("codex", "gemini"):
        trust.codex_trust_plan(worktree, env).write() if agent == "codex" else (
            trust.gemini_trust_plan(worktree, env).write()
        )
    codex_file = main / ".codex/hooks.json"
    document = json.loads(codex_file.read_text())
    document["hooks"]["PreToolUse"][0]["matcher"] = "apply_patch|Edit|Write"
    codex_file.write_text(json.dumps(document))
    (worktree / ".codex").rmdir()
    report = doctor.check_codex(worktree, env, sys.executable)
    assert checks(report)["matcher"] is False and checks(report)["worktree marker"] is False
    assert checks(report)["hook trust"] is False  # the matcher is part of the trusted hash
    assert checks(doctor.check_claude(worktree, env, "/other/python"))["python"] is False
    user = Path(env["HOME"]) / ".claude"
    user.mkdir()
    (user / "settings.json").write_text('{"disableAllHooks": true}')
    assert checks(doctor.check_claude(worktree, env, sys.executable))["hooks enabled"] is False
    distrust = {**env, "GEMINI_CLI_TRUST_WORKSPACE": "false"}
    assert checks(doctor.check_gemini(worktree, distrust, sys.executable))["folder trust"] is False
    assert checks(
        doctor.check_gemini(worktree, {**env, "GEMINI_CLI_TRUST_WORKSPACE": "true"}, sys.executable)
    )["folder trust"]


def test_doctor_with_nothing_installed_fails(world: tuple[Path, Path, dict[str, str]]) -> None:
    """A worktree without any hook is not guarded: doctor exits 1 and says so per agent."""
    worktree, _, env = world
    out = integrator("guard", "doctor", cwd=worktree, environ=env)
    assert out.returncode == 1 and out.stdout.count("not installed") == 3


def test_doctor_text_escapes_what_it_prints(world: tuple[Path, Path, dict[str, str]]) -> None:
    """A matcher with a terminal escape is printed spelled out."""
    worktree, _, env = world
    hooks.install(worktree, agents=["claude"])
    settings = worktree / ".claude/settings.local.json"
    document = json.loads(settings.read_text())
    document["hooks"]["PreToolUse"][0]["matcher"] = "Write\x1b[2J"
    settings.write_text(json.dumps(document))
    out = integrator("guard", "doctor", "--agent", "claude", cwd=worktree, environ=env)
    assert out.returncode == 1 and "\x1b" not in out.stdout and "\\x1b" in out.stdout
