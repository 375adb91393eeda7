"""The write guard: real hook payloads from Claude Code, Codex and Gemini, fail-closed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from integrator.documents.claim import ClaimView
from integrator.documents.contract import OwnershipContract
from integrator.documents.rules import rules_from_bytes
from integrator.fleet import guard, patches
from integrator.fleet.assignments import Fleet
from integrator.fleet.taskqueue import Queue
from integrator.fleet.workspace import binding_dir
from integrator.records.canonical import Canonical
from integrator.records.claims import Claims
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


def codex_denied_reason(proc: subprocess.CompletedProcess[bytes]) -> str:
    """Codex is denied with exit 2 and the reason on stderr (stdout is not read)."""
    assert proc.returncode == 2 and proc.stdout == b"", proc
    assert proc.stderr.strip()
    return proc.stderr.decode()


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
    reason = codex_denied_reason(hook(codex_patch(patch, bound), bound))
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
    answer, decision = guard.run_hook(
        codex_patch("*** Begin Patch\n*** End Patch\n", bound), cwd=bound, now=NOW
    )
    assert not decision.allowed and "names no file" in decision.reason
    assert answer.exit_code == 2 and "names no file" in answer.stderr


def test_no_contract_denies(bound: Path) -> None:
    """In the main checkout nothing is bound, so every write of an agent is denied."""
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
    document = (binding_dir(bound) / "contract.json").read_bytes()
    model = OwnershipContract.model_validate_json(document)
    contract = rules_from_bytes(document)
    assert contract.digest == model.digest  # the guard's plain reading digests alike
    view = ClaimView(
        task_id="CODE",
        generation=contract.ownership_generation,
        attempt_id=model.attempt_id,
        contract_digest=contract.digest,
        state="live",
        lease_expires_at=NOW + timedelta(hours=1),
        policy_digest=model.policy_digest,
    )
    inside = [guard.Target("src/a.py", "src/a.py")]
    assert guard.decide(contract, view, "alice", NOW, inside).allowed
    cases = {
        "revoked": view._replace(state="revoked", reason="policy changed"),
        "generation 2": view._replace(generation=2),
        "expired": view._replace(lease_expires_at=NOW - timedelta(seconds=1)),
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


# --- Codex's patch grammar: hostile headers ----------------------------------------------
#
# Each case is decided the way the real Codex (0.171.0) parses it (docs/agents.md has the
# measured table; tests/e2e/test_agents.py replays every case through the real binary).
# `paths` is what Codex would touch (None: Codex rejects the patch), `allowed` the guard's
# answer for a worktree whose contract owns `src/**`.

B, E = "*** Begin Patch", "*** End Patch"
HOSTILE: dict[str, tuple[str, tuple[str, ...] | None, bool]] = {
    "plain outside": (f"{B}\n*** Add File: docs/n.md\n+x\n{E}", ("docs/n.md",), False),
    "indented outside": (f"{B}\n   *** Add File: docs/n.md\n+x\n{E}", ("docs/n.md",), False),
    "indented inside": (f"{B}\n   *** Add File: src/n.py\n+x\n{E}", ("src/n.py",), True),
    "tab-indented": (f"{B}\n\t*** Add File: docs/n.md\n+x\n{E}", ("docs/n.md",), False),
    "NBSP-indented": (f"{B}\n\u00a0*** Add File: docs/n.md\n+x\n{E}", ("docs/n.md",), False),
    "U+3000-indented": (f"{B}\n\u3000*** Add File: docs/n.md\n+x\n{E}", ("docs/n.md",), False),
    "U+001C is no space to Codex": (f"{B}\n\x1c*** Add File: src/n.py\n+x\n{E}", None, False),
    "U+200B is no space": (f"{B}\n\u200b*** Add File: src/n.py\n+x\n{E}", None, False),
    "NBSP around the markers": (
        f"\u00a0{B}\u00a0\n*** Add File: src/n.py\n+x\n\u3000{E}\u2003", ("src/n.py",), True
    ),
    "CRLF outside": (f"{B}\r\n*** Add File: docs/n.md\r\n+x\r\n{E}\r\n", ("docs/n.md",), False),
    "CRLF inside": (f"{B}\r\n*** Add File: src/n.py\r\n+x\r\n{E}\r\n", ("src/n.py",), True),
    "lone CR is one line": (f"{B}\r*** Add File: src/n.py\r+x\r{E}", None, False),
    "U+2028 hides no header": (
        f"{B}\n*** Add File: src/n.py\n+x\u2028*** Add File: docs/b.md\n+y\n{E}",
        ("src/n.py",),
        True,
    ),
    "lower case header": (f"{B}\n*** add file: src/n.py\n+x\n{E}", None, False),
    "upper case header": (f"{B}\n*** ADD FILE: src/n.py\n+x\n{E}", None, False),
    "heredoc wrapped outside": (
        f"<<'EOF'\n{B}\n*** Add File: docs/n.md\n+x\n{E}\nEOF\n", ("docs/n.md",), False
    ),
    "heredoc wrapped inside": (f'<<"EOF"\n{B}\n*** Delete File: src/a.py\n{E}\nEOF', ("src/a.py",), True),
    "other heredoc tag": (f"<<'PATCH'\n{B}\n*** Add File: src/n.py\n+x\n{E}\nPATCH", None, False),
    "Move to indented is context": (
        f"{B}\n*** Update File: src/a.py\n  *** Move to: docs/a.md\n@@\n-a\n+b\n{E}",
        ("src/a.py",),
        True,
    ),
    "Move to at column 0": (
        f"{B}\n*** Update File: src/a.py\n*** Move to: docs/a.md\n@@\n-a\n+b\n{E}",
        ("src/a.py", "docs/a.md"),
        False,
    ),
    "absolute outside": (f"{B}\n*** Add File: /tmp/n.txt\n+x\n{E}", ("/tmp/n.txt",), False),
    "dot-dot escape": (f"{B}\n*** Add File: ../n.txt\n+x\n{E}", ("../n.txt",), False),
    "dot-dot back into docs": (f"{B}\n*** Add File: src/../docs/n.md\n+x\n{E}", ("src/../docs/n.md",), False),
    "home folder": (f"{B}\n*** Add File: ~/n.txt\n+x\n{E}", ("~/n.txt",), False),
    "two spaces keep one": (f"{B}\n*** Add File:  src/n.py\n+x\n{E}", (" src/n.py",), False),
    "blank line before a header": (f"{B}\n\n*** Add File: src/n.py\n+x\n{E}", None, False),
    "End Patch in the middle": (
        f"{B}\n*** Add File: src/n.py\n+x\n{E}\n*** Add File: docs/b.md\n+y\n{E}", None, False
    ),
    "indented Delete": (f"{B}\n  *** Delete File: docs/x.md\n{E}", ("docs/x.md",), False),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_patch_headers_parse_as_codex_parses_them(name: str) -> None:
    """Each hostile header yields exactly the paths Codex would touch, or a parse error."""
    text, expected, _ = HOSTILE[name]
    if expected is None:
        with pytest.raises(patches.PatchError):
            patches.parse_patch(text)
    else:
        assert tuple(p for h in patches.parse_patch(text) for p in h.paths()) == expected


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_patch_headers_get_the_decision_codex_behaviour_implies(
    bound: Path, name: str
) -> None:
    """The guard allows a hostile patch only when everything Codex would write is owned."""
    text, _, allowed = HOSTILE[name]
    answer, decision = guard.run_hook(codex_patch(text, bound), cwd=bound, now=NOW)
    assert decision.allowed is allowed, decision.reason
    assert answer.exit_code == (0 if allowed else 2)


def test_python_whitespace_is_not_rusts() -> None:
    """str.strip removes U+001C..U+001F, Rust's trim keeps them: the guard trims like Rust."""
    assert "\x1cx".strip() == "x"
    assert patches.rust_trim("\x1cx\x1f") == "\x1cx\x1f"
    assert patches.rust_trim("\u3000\u00a0x\u2028\u0085") == "x"
    assert patches.rust_lines("a\r\nb\rc\u2028d\n") == ["a", "b\rc\u2028d"]


def test_a_symlink_cannot_hide_dot_dot(bound: Path) -> None:
    """`src/link/../../docs/x.md` is docs/x.md to the tools, src/docs/x.md to the kernel: both
    readings are judged, so the write is denied."""
    deep = bound / "src" / "deep" / "er"
    deep.mkdir(parents=True)
    link = bound / "src" / "link"
    link.symlink_to("deep/er")
    try:
        for target in ("src/link/../../docs/x.md", str(bound / "src/link/../../docs/x.md")):
            _, decision = guard.run_hook(
                gemini("write_file", {"file_path": target, "content": ""}, bound),
                cwd=bound,
                now=NOW,
            )
            assert not decision.allowed and "docs/x.md" in decision.reason, target
    finally:
        link.unlink()
        shutil.rmtree(bound / "src" / "deep")


# --- apply_patch inside shell commands ---------------------------------------------------


def codex_shell(command: str | list[str], cwd: Path) -> bytes:
    """A Codex PreToolUse payload for its shell tool (hook name `Bash`)."""
    event = json.loads(codex_patch("", cwd))
    event.update(tool_name="Bash", tool_input={"command": command})
    return json.dumps(event).encode()


def heredoc(body: str, tag: str = "'EOF'") -> str:
    end = tag.strip("'\"")
    return f"apply_patch <<{tag}\n{B}\n{body}\n{E}\n{end}\n"


SHELL_CASES: dict[str, tuple[str | list[str], bool, str]] = {
    "heredoc inside": (heredoc("*** Add File: src/n.py\n+x"), True, ""),
    "heredoc outside": (heredoc("*** Add File: docs/n.md\n+x"), False, "docs/n.md"),
    "cd prefix inside": ("cd src && " + heredoc("*** Add File: n.py\n+x"), True, ""),
    "cd prefix outside": ("cd docs && " + heredoc("*** Add File: n.py\n+x"), False, "docs/n.py"),
    "cd then semicolon": ("cd docs; " + heredoc("*** Add File: n.py\n+x"), False, "docs/n.py"),
    "cd to a variable": ("cd $D && " + heredoc("*** Add File: n.py\n+x"), False, "no known folder"),
    "cd in a pipeline stays": ("cd docs | true; " + heredoc("*** Add File: src/n.py\n+x"), True, ""),
    "second of two patches": (
        heredoc("*** Add File: src/n.py\n+x") + heredoc("*** Add File: docs/n.md\n+x"),
        False,
        "docs/n.md",
    ),
    "here-string": ("apply_patch <<< '" + f"{B}\n*** Add File: docs/n.md\n+x\n{E}'", False, "docs/n.md"),
    "single argument": (f"apply_patch '{B}\n*** Delete File: docs/x.md\n{E}'", False, "docs/x.md"),
    "argv form": (["apply_patch", f"{B}\n*** Delete File: docs/x.md\n{E}"], False, "docs/x.md"),
    "bash -lc argv": (["bash", "-lc", heredoc("*** Add File: src/n.py\n+x")], True, ""),
    "other heredoc tag": (heredoc("*** Add File: docs/n.md\n+x", "'PATCH'"), False, "docs/n.md"),
    "unquoted heredoc expands": (heredoc("*** Add File: $HOME/n\n+x", "EOF"), False, "expand"),
    "patch from a pipe": ("cat p.diff | apply_patch", False, "standard input"),
    "patch from a file": ("apply_patch < p.diff", False, "from a file"),
    "inside bash -c": ("bash -c 'apply_patch < p'", False, "cannot follow"),
    "through xargs": ("echo p | xargs apply_patch", False, "cannot follow"),
    "heredoc into python": ("python3 - <<'X'\nrun('apply_patch')\nX\n", False, "another program"),
    "command substitution": ("echo $(apply_patch x)", False, "substitution"),
    "a compound command": ("if true; then apply_patch x; fi", False, "cannot follow"),
    "searching for the word": ("grep -rn apply_patch src", False, "cannot follow"),
    "a file named after it": ("python3 tools/apply_patch.py", True, ""),
    "plain shell": ("ls -la && echo done > /tmp/log", True, ""),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(SHELL_CASES))
def test_every_apply_patch_a_shell_command_runs_is_judged(bound: Path, name: str) -> None:
    """Patches in heredocs, here-strings and arguments are judged with `cd` followed; a
    mention the guard cannot follow denies; a shell command without one is not mediated."""
    command, allowed, why = SHELL_CASES[name]
    answer, decision = guard.run_hook(codex_shell(command, bound), cwd=bound, now=NOW)
    assert decision.allowed is allowed, decision.reason
    assert why in decision.reason
    if not allowed:
        assert answer.exit_code == 2 and why in answer.stderr


def test_gemini_shell_patches_run_in_the_tools_folder(bound: Path) -> None:
    """`run_shell_command`'s own `dir_path` is the folder a patch's relative paths land in."""
    command = heredoc("*** Add File: n.md\n+x")
    for folder, allowed in (("src", True), ("docs", False)):
        _, decision = guard.run_hook(
            gemini("run_shell_command", {"command": command, "dir_path": folder}, bound),
            cwd=bound,
            now=NOW,
        )
        assert decision.allowed is allowed, (folder, decision.reason)


# --- who may write where nothing is bound ---------------------------------------------


def test_coordinator_mode_needs_the_flag_and_no_agent_identity() -> None:
    """Only INTEGRATOR_COORDINATOR=1 with no agent or task identity beside it counts."""
    assert guard.coordinator_mode({"INTEGRATOR_COORDINATOR": "1"})
    assert not guard.coordinator_mode({})
    assert not guard.coordinator_mode({"INTEGRATOR_COORDINATOR": "yes"})
    assert not guard.coordinator_mode({"INTEGRATOR_COORDINATOR": "1", "INTEGRATOR_AGENT": "a"})
    assert not guard.coordinator_mode({"INTEGRATOR_COORDINATOR": "1", "INTEGRATOR_TASK": "T"})


def test_the_main_checkout_hook_serves_every_worktree(bound: Path, tmp_path: Path) -> None:
    """One hook process decides by the event's cwd: the bound worktree by its contract, an
    unbound worktree and the main checkout deny agents, and let only the coordinator write."""
    main = bound.parent.parent
    unbound = tmp_path / "unbound"
    git("worktree", "add", "-q", "--detach", str(unbound), "HEAD", cwd=main)
    env = {k: v for k, v in os.environ.items() if not k.startswith("INTEGRATOR_")}
    coordinator = {**env, "INTEGRATOR_COORDINATOR": "1"}
    cases = [
        (bound, "src/n.py", env, 0),
        (bound, "docs/n.md", env, 2),
        (bound, "docs/n.md", coordinator, 2),  # a binding always wins
        (unbound, "src/n.py", env, 2),
        (unbound, "src/n.py", coordinator, 0),
        (main, "src/n.py", env, 2),
        (main, "src/n.py", coordinator, 0),
        (main, "src/n.py", {**coordinator, "INTEGRATOR_AGENT": "alice"}, 2),
    ]
    for where, path, environment, code in cases:
        patch = f"{B}\n*** Add File: {path}\n+x\n{E}\n"
        proc = subprocess.run(
            [sys.executable, "-m", "integrator", "guard"],
            input=codex_patch(patch, where),
            cwd=main,  # Codex starts the main checkout's hook; the event names the worktree
            env=environment,
            capture_output=True,
            check=False,
        )
        assert proc.returncode == code, (where, path, proc.stderr)
    assert not (unbound / "src" / "n.py").exists()


def test_codex_allow_is_silent_and_claude_keeps_its_json(bound: Path) -> None:
    """Codex: allow = exit 0, nothing printed; Claude Code still gets its deny JSON."""
    ok = hook(codex_patch(f"{B}\n*** Add File: src/n.py\n+x\n{E}\n", bound), bound)
    assert ok.returncode == 0 and ok.stdout == b"" and ok.stderr == b""
    no = hook(claude("Write", {"file_path": str(bound / "docs/n.md"), "content": ""}, bound), bound)
    assert "docs/n.md" in denied_reason(no)


def test_escaped_reason_on_stderr(bound: Path) -> None:
    """A path with terminal escapes reaches stderr spelled out, never raw."""
    patch = f"{B}\n*** Add File: docs/\x1b[31mred\n+x\n{E}\n"
    proc = hook(codex_patch(patch, bound), bound)
    assert proc.returncode == 2 and b"\x1b" not in proc.stderr and b"\\x1b" in proc.stderr


def test_show_reports_the_bound_contract_and_whether_it_may_write(bound: Path) -> None:
    """`guard show --json` names the task, the contract and its live claim."""
    proc = subprocess.run(
        [sys.executable, "-m", "integrator", "guard", "show", "--json"],
        cwd=bound,
        capture_output=True,
        check=True,
    )
    doc = json.loads(proc.stdout)
    assert doc["task"] == "CODE" and doc["writable"] and doc["problem"] is None
    assert doc["contract"]["paths"] == ["src/**"] and doc["live"]["generation"] == 1


def test_hook_events_are_decided_without_the_contract_models(bound: Path) -> None:
    """Every hook event — a plain shell command, a read, a write inside, a write outside —
    is decided without loading pydantic or pygit2 (the guard reads the contract as plain
    rules), nor `dataclasses` (which imports `inspect`: a fifth of the hook's start-up),
    each with its right answer; the command lists the same agents as the installer."""
    from integrator.commands.guard import AGENTS
    from integrator.fleet.hooks import AGENTS as INSTALLED
    from tests.test_api import _modules_loaded

    assert AGENTS == INSTALLED
    plain = codex_shell("ls -la && git status", bound)
    inside = claude("Write", {"file_path": str(bound / "src/new.py"), "content": "x"}, bound)
    outside = claude("Write", {"file_path": str(bound / "docs/new.md"), "content": "x"}, bound)
    patch = codex_patch(f"{B}\n*** Add File: docs/p.md\n+x\n{E}\n", bound)
    heavy = {"pydantic", "pygit2", "dataclasses", "inspect"}
    for event in (plain, inside, outside, patch):
        loaded = _modules_loaded(["guard"], event)
        assert "integrator" in loaded and not heavy & loaded, heavy & loaded
    # The probe does see them where a command loads them.
    assert {"pydantic", "dataclasses"} <= _modules_loaded(["policy", "init"])
    assert hook(plain, bound).stdout == b""
    assert hook(inside, bound).stdout == b""
    assert "docs/new.md" in denied_reason(hook(outside, bound))
    denied = hook(patch, bound)  # Codex: exit 2, the reason on stderr
    assert denied.returncode == 2 and b"docs/p.md" in denied.stderr
    read = hook(gemini("read_file", {"file_path": "docs/x.md"}, bound), bound)
    assert read.returncode == 0 and json.loads(read.stdout) == {}


def test_an_oversized_hook_event_is_denied_unread(bound: Path) -> None:
    """A tool call past the documented 16 MiB is denied before it is parsed."""
    from integrator.limits import MAX_EVENT_BYTES

    big = codex_patch(f"{B}\n*** Add File: src/n.py\n" + "+x\n" * (MAX_EVENT_BYTES // 3) + E, bound)
    answer, decision = guard.run_hook(big, cwd=bound, now=NOW)
    assert not decision.allowed and "16 MiB" in decision.reason and answer.exit_code == 2
