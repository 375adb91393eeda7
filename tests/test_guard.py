"""The write guard: real hook payloads from Claude Code, Codex and Gemini, fail-closed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from integrator.documents.claim import ClaimView
from integrator.documents.contract import OwnershipContract
from integrator.fleet import guard
from integrator.fleet.assignments import Fleet
from integrator.fleet.taskqueue import Queue
from integrator.fleet.workspace import binding_dir
from integrator.repo.canonical import Canonical
from integrator.repo.claims import Claims
from tests.gitutil import GIT_ENV, commit_files, git, make_repo

NOW = datetime.now(UTC)


def make_bound(folder: Path) -> Path:
    """A repository whose worktree `.trees/alice` holds the contract of task CODE (src/**)."""
    repo = make_repo(folder / "repo")
    commit_files(repo, {"src/a.py": "a\n", "docs/x.md": "x\n"}, "init")
    git("reset", "-q", "--hard", cwd=repo)
    Queue.find(repo).init()
    (repo / ".agents" / "workspaces.toml").write_text('[agents.alice]\nworkspace = "alice"\n')
    Queue.find(repo).add("---\nid: CODE\nowns: [src/**]\nrequires_filesystem: true\n---\n# Code\n")
    assignment = Fleet(repo).claim("alice").assignment
    assert assignment is not None and assignment.worktree is not None
    return assignment.worktree


@pytest.fixture(scope="module")
def bound(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One bound worktree shared by the read-only tests of this module."""
    with pytest.MonkeyPatch.context() as patch:
        for key, value in GIT_ENV.items():
            patch.setenv(key, value)
        yield make_bound(tmp_path_factory.mktemp("guard"))


def claude(tool: str, tool_input: Mapping[str, object], cwd: Path) -> bytes:
    """A Claude Code PreToolUse payload as the tool sends it."""
    return json.dumps(
        {
            "session_id": "0b8f3c2e-5d1a-4f7e-9a61-2c4d8e9f0a1b",
            "transcript_path": "/home/dev/.claude/projects/repo/0b8f3c2e.jsonl",
            "cwd": str(cwd),
            "permission_mode": "default",
            "hook_event_name": "PreToolUse",
            "tool_name": tool,
            "tool_input": tool_input,
            "tool_use_id": "toolu_01ABCDEF",
        }
    ).encode()


def codex_patch(patch: str, cwd: Path) -> bytes:
    """A Codex PreToolUse payload for `apply_patch` (raw patch in tool_input.command)."""
    return json.dumps(
        {
            "session_id": "019a7c3e-0000-7000-8000-000000000001",
            "turn_id": "1",
            "transcript_path": "/home/dev/.codex/sessions/rollout.jsonl",
            "cwd": str(cwd),
            "hook_event_name": "PreToolUse",
            "model": "gpt-5-codex",
            "permission_mode": "default",
            "tool_name": "apply_patch",
            "tool_use_id": "call_abc",
            "tool_input": {"command": patch},
        }
    ).encode()


def gemini(tool: str, tool_input: Mapping[str, object], cwd: Path) -> bytes:
    """A Gemini CLI BeforeTool payload."""
    return json.dumps(
        {
            "session_id": "test-123",
            "transcript_path": "/home/dev/.gemini/tmp/chats/session.json",
            "cwd": str(cwd),
            "hook_event_name": "BeforeTool",
            "timestamp": "2026-01-01T00:00:00Z",
            "tool_name": tool,
            "tool_input": tool_input,
        }
    ).encode()


def hook(payload: bytes, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """Run `integrator guard` as the agent would: a process with the event on stdin."""
    return subprocess.run(
        [sys.executable, "-m", "integrator", "guard"],
        input=payload,
        cwd=cwd,
        capture_output=True,
        check=False,
    )


def denied_reason(proc: subprocess.CompletedProcess[bytes]) -> str:
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)["hookSpecificOutput"]
    assert out["hookEventName"] == "PreToolUse" and out["permissionDecision"] == "deny"
    return str(out["permissionDecisionReason"])


def test_claude_write_outside_the_contract_is_denied(bound: Path) -> None:
    """Claude Code `Write` to docs/ (not owned) gets the deny JSON naming path and contract."""
    proc = hook(
        claude("Write", {"file_path": str(bound / "docs/x.md"), "content": "no"}, bound), bound
    )
    reason = denied_reason(proc)
    assert "docs/x.md" in reason and "src/**" in reason and "expansion" in reason


def test_claude_write_inside_the_contract_is_allowed(bound: Path) -> None:
    """Claude Code `Write` under src/ exits 0 with no output (no opinion: allowed)."""
    proc = hook(
        claude("Write", {"file_path": str(bound / "src/new.py"), "content": "ok"}, bound), bound
    )
    assert proc.returncode == 0 and proc.stdout == b""


def test_codex_patch_moving_a_file_out_is_denied(bound: Path) -> None:
    """A Codex patch that moves src/a.py to docs/a.py is denied for the move target."""
    patch = (
        "*** Begin Patch\n*** Update File: src/a.py\n*** Move to: docs/a.py\n"
        "@@\n-a\n+b\n*** End Patch\n"
    )
    reason = denied_reason(hook(codex_patch(patch, bound), bound))
    assert "docs/a.py" in reason and "src/a.py:" not in reason


def test_codex_patch_adding_inside_is_allowed(bound: Path) -> None:
    """A Codex patch that adds and updates files under src/ is allowed."""
    patch = (
        "*** Begin Patch\n*** Add File: src/pkg/new.py\n+print('hi')\n"
        "*** Update File: src/a.py\n@@\n-a\n+b\n*** End Patch\n"
    )
    proc = hook(codex_patch(patch, bound), bound)
    assert proc.returncode == 0 and proc.stdout == b""


def test_gemini_write_file_answers_in_gemini_dialect(bound: Path) -> None:
    """Gemini `write_file` with a relative path: deny JSON outside, `{}` inside."""
    out = hook(gemini("write_file", {"file_path": "docs/x.md", "content": "x"}, bound), bound)
    assert out.returncode == 0
    answer = json.loads(out.stdout)
    assert answer["decision"] == "deny" and "docs/x.md" in answer["reason"]
    ok = hook(
        gemini("replace", {"file_path": "src/a.py", "old_string": "a", "new_string": "b"}, bound),
        bound,
    )
    assert json.loads(ok.stdout) == {}


@pytest.mark.parametrize("payload", [b"not json at all", b"{}", b"[1,2]", b"\xff\xfe", b""])
def test_garbage_input_blocks_with_exit_2(bound: Path, payload: bytes) -> None:
    """Unreadable input exits 2 — a block in every supported tool — with a reason on stderr."""
    proc = hook(payload, bound)
    assert proc.returncode == 2
    assert b"fail closed" in proc.stderr


def test_known_write_tool_without_a_path_is_denied(bound: Path) -> None:
    """A Write event with no file_path is unreadable as a write: denied in Claude's dialect."""
    answer, decision = guard.run_hook(claude("Write", {"content": "x"}, bound), cwd=bound, now=NOW)
    assert not decision.allowed and "no file_path" in decision.reason
    assert json.loads(answer.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_patch_without_headers_is_denied(bound: Path) -> None:
    """An apply_patch body that names no file cannot be checked, so it is denied."""
    _, decision = guard.run_hook(
        codex_patch("*** Begin Patch\n*** End Patch\n", bound), cwd=bound, now=NOW
    )
    assert not decision.allowed and "names no file" in decision.reason


def test_no_contract_denies(bound: Path) -> None:
    """In the main checkout nothing is bound, so every write is denied."""
    main = bound.parent.parent
    _, decision = guard.run_hook(
        claude("Write", {"file_path": str(main / "src/a.py"), "content": ""}, main),
        cwd=main,
        now=NOW,
    )
    assert not decision.allowed and "no contract is bound" in decision.reason


def test_paths_outside_the_worktree_or_into_git_are_denied(bound: Path) -> None:
    """The main checkout, /etc and .git are outside what a contract can grant."""
    main = bound.parent.parent
    for target in (main / "src/a.py", Path("/etc/passwd"), bound / ".git"):
        _, decision = guard.run_hook(
            claude("Edit", {"file_path": str(target), "old_string": "", "new_string": ""}, bound),
            cwd=bound,
            now=NOW,
        )
        assert not decision.allowed, target
    _, tmp_ok = guard.run_hook(
        claude("Write", {"file_path": "/tmp/scratch.txt", "content": ""}, bound),
        cwd=bound,
        now=NOW,
        allow_outside=[Path("/tmp")],
    )
    assert tmp_ok.allowed


def test_symlink_out_of_the_contract_is_resolved_and_denied(bound: Path) -> None:
    """Writing through src/link → ../docs lands in docs/, so it is denied."""
    link = bound / "src" / "link"
    link.symlink_to("../docs")
    try:
        _, decision = guard.run_hook(
            claude("Write", {"file_path": str(link / "x.md"), "content": ""}, bound),
            cwd=bound,
            now=NOW,
        )
    finally:
        link.unlink()
    assert not decision.allowed and "docs/x.md" in decision.reason


def test_shell_and_read_tools_are_not_mediated_but_shell_patches_are(bound: Path) -> None:
    """Read and Bash pass; a Bash command carrying an apply_patch body is checked."""
    for tool, tool_input in (("Read", {"file_path": "/etc/passwd"}), ("Bash", {"command": "ls"})):
        _, decision = guard.run_hook(claude(tool, tool_input, bound), cwd=bound, now=NOW)
        assert decision.allowed
    heredoc = "apply_patch <<'EOF'\n*** Begin Patch\n*** Delete File: docs/x.md\n*** End Patch\nEOF"
    _, shell = guard.run_hook(claude("Bash", {"command": heredoc}, bound), cwd=bound, now=NOW)
    assert not shell.allowed


def test_contract_copied_to_another_worktree_is_refused(bound: Path, tmp_path: Path) -> None:
    """A contract file moved into a different worktree does not authorize writes there."""
    other = tmp_path / "other"
    git("worktree", "add", "-q", "--detach", str(other), "HEAD", cwd=bound)
    target = binding_dir(other)
    target.mkdir(parents=True)
    shutil.copy(binding_dir(bound) / "contract.json", target / "contract.json")
    _, decision = guard.run_hook(
        claude("Write", {"file_path": str(other / "src/a.py"), "content": ""}, other),
        cwd=other,
        now=NOW,
    )
    assert not decision.allowed and "must not move to another checkout" in decision.reason


def test_revoked_or_expired_claims_deny(bound: Path) -> None:
    """The pure decision denies revoked, stale and expired claims before looking at paths."""
    contract = OwnershipContract.model_validate_json(
        (binding_dir(bound) / "contract.json").read_bytes()
    )
    view = ClaimView(
        task_id="CODE",
        generation=contract.ownership_generation,
        attempt_id=contract.attempt_id,
        contract_digest=contract.digest,
        state="live",
        lease_expires_at=NOW + timedelta(hours=1),
        policy_digest=contract.policy_digest,
    )
    inside = [guard.Target("src/a.py", "src/a.py")]
    assert guard.decide(contract, view, "alice", NOW, inside).allowed
    cases = {
        "revoked": ClaimView(**{**view.__dict__, "state": "revoked", "reason": "policy changed"}),
        "generation 2": ClaimView(**{**view.__dict__, "generation": 2}),
        "expired": ClaimView(**{**view.__dict__, "lease_expires_at": NOW - timedelta(seconds=1)}),
    }
    for expected, claim in cases.items():
        decision = guard.decide(contract, claim, "alice", NOW, inside)
        assert not decision.allowed and expected in decision.reason


def test_path_mode_exit_codes(bound: Path) -> None:
    """`integrator guard --path` exits 0 when every path is owned and 1 otherwise."""
    base = [sys.executable, "-m", "integrator", "guard", "--json"]
    ok = subprocess.run([*base, "--path", "src/a.py"], cwd=bound, capture_output=True, check=False)
    assert ok.returncode == 0 and json.loads(ok.stdout)["decision"] == "allow"
    no = subprocess.run(
        [*base, "--path", "src/a.py", "--path", "docs/x.md"],
        cwd=bound,
        capture_output=True,
        check=False,
    )
    assert no.returncode == 1
    verdicts = {p["relative"]: p for p in json.loads(no.stdout)["paths"]}
    assert verdicts["src/a.py"]["rule"] == "src/**" and not verdicts["docs/x.md"]["allowed"]


def test_install_writes_agent_hooks_and_a_pre_commit_that_checks_staged_paths(bound: Path) -> None:
    """After `guard install`, commits of unowned staged paths fail and owned ones pass."""
    out = subprocess.run(
        [sys.executable, "-m", "integrator", "guard", "install", "--worktree", str(bound)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    settings = json.loads((bound / ".claude/settings.local.json").read_text())
    command = settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    assert "-m integrator guard" in command and "exit 2" in command
    assert json.loads((bound / ".gemini/settings.json").read_text())["hooks"]["BeforeTool"]
    assert json.loads((bound / ".codex/hooks.json").read_text())["hooks"]["PreToolUse"]
    assert git("status", "--porcelain", cwd=bound) == ""  # the settings are excluded
    (bound / "docs/x.md").write_text("changed\n")
    git("add", "docs/x.md", cwd=bound)
    refused = subprocess.run(
        ["git", "commit", "-qm", "sneak"], cwd=bound, capture_output=True, text=True, check=False
    )
    assert refused.returncode != 0 and "docs/x.md" in refused.stderr
    git("reset", "-q", "--hard", cwd=bound)
    (bound / "src/a.py").write_text("owned change\n")
    git("commit", "-qam", "owned", cwd=bound)
    assert git("log", "-1", "--format=%s", cwd=bound) == "owned"
    git("reset", "-q", "--hard", "HEAD~1", cwd=bound)


def test_revoked_claim_denies_through_the_hook(tmp_path: Path) -> None:
    """Once the coordinator revokes the claim, the same inside write is denied."""
    bound = make_bound(tmp_path)
    with Canonical(bound) as canonical:
        Claims(canonical).revoke("CODE", "taken over")
    _, decision = guard.run_hook(
        claude("Write", {"file_path": str(bound / "src/a.py"), "content": ""}, bound),
        cwd=bound,
        now=NOW,
    )
    assert not decision.allowed and "revoked" in decision.reason
