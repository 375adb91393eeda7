"""The write guard against the real agent CLIs (pinned by tests/e2e/install-agents.sh).

Each CLI runs in a bound worktree (contract: `src/**`) against tests/e2e/model_server.py on
127.0.0.1, which asks for one write inside the contract and one outside; the guard is
installed and trusted with integrator's own commands, `guard doctor` must pass first, and
then the outside file must never appear while the inside one does. No model is called;
every server is stopped by its PID.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from integrator.fleet import patches
from tests.fleet.test_guard import HOSTILE, make_bound
from tests.gitutil import GIT_ENV

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
AGENTS = ROOT / ".e2e" / "agents" / "node_modules"
TIMEOUT = 240
B, E = "*** Begin Patch", "*** End Patch"


def binary(name: str) -> Path:
    path = AGENTS / ".bin" / name
    if not path.exists():
        pytest.fail(f"{path} is missing: run `bash tests/e2e/install.sh` (make e2e does)")
    return path


@dataclass
class Model:
    """The scripted model server process and what the agent sent it."""

    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    def results(self) -> list[str]:
        out: list[str] = []
        if self.log.exists():
            for line in self.log.read_text().splitlines():
                out += json.loads(line).get("results") or []
        return out


@pytest.fixture
def model(tmp_path: Path) -> Iterator[Any]:
    """Start model servers with a script; each is stopped by its PID afterwards."""
    started: list[Model] = []

    def start(steps: list[dict[str, Any]]) -> Model:
        script = tmp_path / f"script-{len(started)}.json"
        script.write_text(json.dumps(steps))
        log = tmp_path / f"requests-{len(started)}.jsonl"
        proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("model_server.py")),
             "--script", str(script), "--log", str(log)],
            stdout=subprocess.PIPE,
        )  # fmt: skip
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        assert line.startswith("port "), line
        served = Model(proc, int(line.split()[1]), log)
        started.append(served)
        return served

    yield start
    for served in started:
        os.kill(served.proc.pid, signal.SIGTERM)
        served.proc.wait(timeout=10)


def agent_env(home: Path, **extra: str) -> dict[str, str]:
    """A clean environment: a fresh home, no agent or model variables from outside."""
    home.mkdir(parents=True, exist_ok=True)
    return {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8", **GIT_ENV, **extra}


def integrator(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "integrator", *args],
        cwd=cwd, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip


def guarded(worktree: Path, agent: str, env: dict[str, str], *, trust: bool = True) -> None:
    """Install the agent's hook, do its trust step, and require `guard doctor` to agree."""
    done = integrator("guard", "install", "--agents", agent, cwd=worktree, env=env)
    assert done.returncode == 0, done.stderr
    if trust and agent != "claude":
        done = integrator("guard", "trust", "--agent", agent, cwd=worktree, env=env)
        assert done.returncode == 0, done.stderr
    doctor = integrator("guard", "doctor", "--agent", agent, "--json", cwd=worktree, env=env)
    assert (doctor.returncode == 0) is trust, doctor.stdout


def run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
        timeout=TIMEOUT, check=False,
    )  # fmt: skip


def patch(*lines: str) -> str:
    return "\n".join([B, *lines, E]) + "\n"


def test_claude_code_is_stopped_outside_its_contract(tmp_path: Path, model: Any) -> None:
    """Claude Code's Write inside `src/` lands; its Write to `docs/` is denied by the hook."""
    worktree = make_bound(tmp_path)
    env = agent_env(tmp_path / "home")
    guarded(worktree, "claude", env)
    inside, outside = worktree / "src/inside.txt", worktree / "docs/outside.md"
    served = model([
        {"tool": "Write", "input": {"file_path": str(inside), "content": "in\n"}},
        {"tool": "Write", "input": {"file_path": str(outside), "content": "out\n"}},
    ])  # fmt: skip
    proc = run(
        [str(binary("claude")), "-p", "do the task", "--permission-mode", "acceptEdits",
         "--output-format", "json"],
        worktree,
        {**env, "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{served.port}",
         "ANTHROPIC_API_KEY": "sk-ant-e2e", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert inside.read_text() == "in\n"
    assert not outside.exists()
    assert any("integrator guard" in r and "docs/outside.md" in r for r in served.results())


def codex_home(tmp_path: Path, port: int) -> dict[str, str]:
    home = tmp_path / "home"
    codex = home / ".codex"
    codex.mkdir(parents=True)
    (codex / "config.toml").write_text(
        'model_provider = "scripted"\n\n[model_providers.scripted]\nname = "scripted"\n'
        f'base_url = "http://127.0.0.1:{port}/v1"\nwire_api = "responses"\n'
        'env_key = "SCRIPTED_API_KEY"\n'
    )
    return agent_env(home, CODEX_HOME=str(codex), SCRIPTED_API_KEY="e2e")


def codex(worktree: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run(
        [str(binary("codex")), "exec", "-m", "gpt-5.5", "--skip-git-repo-check",
         "--dangerously-bypass-approvals-and-sandbox", "do the task"],
        worktree,
        env,
    )  # fmt: skip


def test_codex_is_stopped_outside_its_contract_by_patch_and_by_shell(
    tmp_path: Path, model: Any
) -> None:
    """Codex loads the hook from the main checkout: apply_patch inside `src/` lands, outside
    is blocked; a Bash heredoc outside is blocked, one after `cd src &&` lands."""
    worktree = make_bound(tmp_path)
    served = model([
        {"tool": "apply_patch", "input": {"patch": patch("*** Add File: src/by_patch.txt", "+in")}},
        {"tool": "apply_patch", "input": {"patch": patch("*** Add File: docs/by_patch.md", "+out")}},
        {"tool": "exec_command", "input": {"command": "apply_patch <<'EOF'\n"
            + patch("*** Add File: docs/by_shell.md", "+out") + "EOF\n"}},
        {"tool": "exec_command", "input": {"command": "cd src && apply_patch <<'EOF'\n"
            + patch("*** Add File: by_shell.txt", "+in") + "EOF\n"}},
    ])  # fmt: skip
    env = codex_home(tmp_path, served.port)
    guarded(worktree, "codex", env)
    proc = codex(worktree, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (worktree / "src/by_patch.txt").read_text() == "in\n"
    assert (worktree / "src/by_shell.txt").read_text() == "in\n"
    assert not (worktree / "docs/by_patch.md").exists()
    assert not (worktree / "docs/by_shell.md").exists()
    blocked = list(dict.fromkeys(r for r in served.results() if "integrator guard" in r))
    assert (
        len(blocked) == 2 and "docs/by_patch.md" in blocked[0] and "docs/by_shell.md" in blocked[1]
    )


def test_codex_skips_an_untrusted_hook_and_doctor_says_so(tmp_path: Path, model: Any) -> None:
    """Without `guard trust`, doctor exits 1 — and indeed Codex runs no hook and writes."""
    worktree = make_bound(tmp_path)
    served = model(
        [{"tool": "apply_patch", "input": {"patch": patch("*** Add File: docs/n.md", "+x")}}]
    )
    env = codex_home(tmp_path, served.port)
    guarded(worktree, "codex", env, trust=False)
    proc = codex(worktree, env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (worktree / "docs/n.md").exists()


def test_gemini_cli_is_stopped_outside_its_contract(tmp_path: Path, model: Any) -> None:
    """Gemini CLI in a folder trusted by `guard trust`: write_file inside lands, outside is
    denied by the BeforeTool hook."""
    worktree = make_bound(tmp_path)
    env = agent_env(tmp_path / "home")
    settings = Path(env["HOME"]) / ".gemini"
    settings.mkdir()
    (settings / "settings.json").write_text(
        '{"security": {"auth": {"selectedType": "gemini-api-key"}}}'
    )
    guarded(worktree, "gemini", env)
    inside, outside = worktree / "src/inside.txt", worktree / "docs/outside.md"
    served = model([
        {"tool": "write_file", "input": {"file_path": str(inside), "content": "in\n"}},
        {"tool": "write_file", "input": {"file_path": str(outside), "content": "out\n"}},
    ])  # fmt: skip
    proc = run(
        [str(binary("gemini")), "-p", "do the task", "--yolo", "-m", "gemini-2.5-flash"],
        worktree,
        {**env, "GEMINI_API_KEY": "e2e", "GOOGLE_GEMINI_BASE_URL": f"http://127.0.0.1:{served.port}"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert inside.read_text() == "in\n"
    assert not outside.exists()
    assert any("integrator guard" in r and "docs/outside.md" in r for r in served.results())


def apply_patch_binary(tmp_path: Path) -> Path:
    """Codex's own apply_patch: its binary answers to that name (argv[0])."""
    found = sorted(AGENTS.glob("@openai/codex-*/vendor/*/bin/codex"))
    if not found:
        pytest.fail("the native codex binary is missing: run `bash tests/e2e/install.sh`")
    link = tmp_path / "bin" / "apply_patch"
    link.parent.mkdir()
    link.symlink_to(found[0])
    return link


def files(folder: Path) -> dict[str, str]:
    return {
        str(p): p.read_text(errors="replace")
        for p in sorted(folder.rglob("*"))
        if p.is_file() and ".git" not in p.parts
    }


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_the_guard_parses_hostile_headers_as_real_codex_applies_them(
    tmp_path: Path, name: str
) -> None:
    """Each hostile patch of tests/fleet/test_guard.py, applied by the real binary: what changes is
    exactly what the guard's parser named (or nothing, when the guard refuses to parse)."""
    tool = apply_patch_binary(tmp_path)
    case = tmp_path / "case"
    work = case / "w"
    (work / "src").mkdir(parents=True)
    (work / "docs").mkdir()
    (work / "src/a.py").write_text("a\n")
    (work / "docs/x.md").write_text("x\n")
    text, expected, _ = HOSTILE[name]
    text = text.replace("/tmp/n.txt", f"{case}/abs-n.txt")
    before = files(case)
    proc = subprocess.run(
        [str(tool), text], cwd=work, env=agent_env(case / "home"), capture_output=True,
        text=True, timeout=60, check=False,
    )  # fmt: skip
    after = files(case)
    changed = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
    where: dict[str, list[str]] = {}
    for given in expected or ():
        real = given.replace("/tmp/n.txt", f"{case}/abs-n.txt")
        where[given] = patches.readings(real, work, home=str(case / "home"))
    named = {p for places in where.values() for p in places}
    if expected is None:
        assert proc.returncode != 0 and not changed, (proc.stdout, proc.stderr, changed)
        assert "Failed to find" not in proc.stdout + proc.stderr  # refused while parsing
    elif proc.returncode == 0:
        assert changed <= named, (proc.stdout, proc.stderr)
        assert all(set(places) & changed for places in where.values()), changed
    else:  # parsed, then failed to apply (a context line that is not in the file)
        assert "Failed to find" in proc.stdout + proc.stderr and changed <= named


# --- the MCP server, driven by each client -------------------------------------------------

SERVER = {"command": sys.executable, "args": ["-m", "integrator", "mcp"]}


def checked_through_mcp(served: Model, prefix: str) -> None:
    """The client offered the server's tools and relayed check_paths' deny document."""
    log = [json.loads(line) for line in served.log.read_text().splitlines()]
    offered = {name for entry in log for name in entry.get("tools") or []}
    assert f"{prefix}check_paths" in offered and f"{prefix}claim_task" in offered, offered
    answer = [r for r in served.results() if "docs/x.md" in r]
    assert (answer and '\\"decision\\": \\"deny\\"' in json.dumps(answer[0])) or "deny" in answer[0]


def test_claude_code_uses_the_mcp_server(tmp_path: Path, model: Any) -> None:
    """Claude Code starts `integrator mcp` from --mcp-config and calls check_paths."""
    worktree = make_bound(tmp_path)
    served = model([{"tool": "*check_paths", "input": {"paths": ["docs/x.md"]}}])
    proc = run(
        [str(binary("claude")), "-p", "check", "--output-format", "json",
         "--mcp-config", json.dumps({"mcpServers": {"integrator": SERVER}}),
         "--allowedTools", "mcp__integrator__check_paths"],
        worktree,
        {**agent_env(tmp_path / "home"), "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{served.port}",
         "ANTHROPIC_API_KEY": "sk-ant-e2e", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
         "ENABLE_TOOL_SEARCH": "false"},  # offer MCP tools directly, not behind a search tool
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    checked_through_mcp(served, "mcp__integrator__")


def test_gemini_cli_uses_the_mcp_server(tmp_path: Path, model: Any) -> None:
    """Gemini CLI starts `integrator mcp` from its user settings and calls check_paths."""
    worktree = make_bound(tmp_path)
    served = model([{"tool": "*check_paths", "input": {"paths": ["docs/x.md"]}}])
    env = agent_env(tmp_path / "home")
    settings = Path(env["HOME"]) / ".gemini"
    settings.mkdir()
    (settings / "settings.json").write_text(json.dumps({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "mcpServers": {"integrator": {**SERVER, "cwd": str(worktree)}},
    }))  # fmt: skip
    proc = run(
        [str(binary("gemini")), "-p", "check", "--yolo", "-m", "gemini-2.5-flash"],
        worktree,
        {**env, "GEMINI_API_KEY": "e2e", "GOOGLE_GEMINI_BASE_URL": f"http://127.0.0.1:{served.port}",
         "GEMINI_CLI_TRUST_WORKSPACE": "true"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    checked_through_mcp(served, "mcp_integrator_")
