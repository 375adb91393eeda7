"""The MCP server: the CLI's documents and refusals through the official SDK's clients."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from mcp import Client, StdioServerParameters

from integrator.fleet.workspace import binding_dir
from integrator.mcp.tools import AgentTools, SpoolTransport
from tests.gitutil import GIT_ENV, git, make_repo
from tests.gitutil import run_integrator as cli
from tests.mcp.world import http_server, make_world, session, structured, text
from tests.test_api import _modules_loaded

TOOLS = {
    "claim_task", "show_contract", "check_paths", "request_expansion", "submit",
    "read_verdict", "ready_tasks",
}  # fmt: skip


def test_tools_publish_input_and_output_schemas_and_answer_with_the_cli_documents(
    tmp_path: Path,
) -> None:
    """Every tool has both schemas; show_contract, check_paths and ready_tasks return the
    very documents `guard show`, `guard --path` and `plan .agents` print with --json, and
    each validates against its published output schema."""
    main, worktree, spool = make_world(tmp_path)
    tools = AgentTools(worktree, transport=SpoolTransport(spool))
    seen: dict[str, Any] = {}

    async def body(client: Client) -> None:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert set(listed) == TOOLS
        for tool in listed.values():
            assert tool.input_schema["type"] == "object" and tool.output_schema is not None
            jsonschema.Draft202012Validator.check_schema(tool.output_schema)
        calls = {
            "show_contract": {},
            "check_paths": {"paths": ["src/a.py", "docs/x.md", "../outside"]},
            "ready_tasks": {},
        }
        for name, arguments in calls.items():
            result = await client.call_tool(name, arguments)
            seen[name] = structured(result)
            jsonschema.validate(seen[name], listed[name].output_schema)
        assert result.meta is not None and result.meta["integrator/exitCode"] == 0

    session(tools, body)
    shown = cli("guard", "show", "--json", cwd=worktree)
    assert json.loads(shown.stdout) == seen["show_contract"]
    checked = cli(
        "guard",
        "--json",
        "--path",
        "src/a.py",
        "--path",
        "docs/x.md",
        "--path",
        "../outside",
        cwd=worktree,
    )
    assert checked.returncode == 1 and json.loads(checked.stdout) == seen["check_paths"]
    verdicts = {p["path"]: p for p in seen["check_paths"]["paths"]}
    assert verdicts["src/a.py"]["rule"] == "src/**" and not verdicts["docs/x.md"]["allowed"]
    planned = cli("plan", str(main / ".agents"), "--json", cwd=main)
    assert json.loads(planned.stdout) == seen["ready_tasks"]
    assert seen["ready_tasks"]["ready"] == ["DOCS"]


def test_a_denied_path_is_an_answer_with_exit_code_1(tmp_path: Path) -> None:
    """check_paths denying is not a tool error: the document says deny, _meta says exit 1."""
    _, worktree, _ = make_world(tmp_path)

    async def body(client: Client) -> None:
        result = await client.call_tool("check_paths", {"paths": ["docs/x.md"]})
        assert structured(result)["decision"] == "deny"
        assert result.meta is not None and result.meta["integrator/exitCode"] == 1

    session(AgentTools(worktree), body)


def test_claim_task_returns_the_claim_document_and_refuses_as_the_cli_does(tmp_path: Path) -> None:
    """claim_task claims DOCS for bob with the document `task claim --json` prints; claiming a
    task that does not exist fails with the CLI's message and exit code 2."""
    main, _, _ = make_world(tmp_path)
    refused = cli("task", "claim", "--agent", "bob", "--task", "NOPE", "--json", cwd=main)
    assert refused.returncode == 2
    documents: dict[str, Any] = {}

    async def body(client: Client) -> None:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        bad = await client.call_tool("claim_task", {"task": "NOPE"})
        assert bad.is_error and bad.meta is not None and bad.meta["integrator/exitCode"] == 2
        assert bad.structured_content is not None
        documents["error"] = bad.structured_content["error"]
        assert text(bad) == refused.stderr.strip()
        lease = await client.call_tool("claim_task", {"lease": "forever"})
        assert lease.is_error and "lease" in text(lease)
        claimed = await client.call_tool("claim_task", {"task": "DOCS"})
        documents["claim"] = structured(claimed)
        jsonschema.validate(documents["claim"], listed["claim_task"].output_schema)

    session(AgentTools(main, agent="bob"), body)
    assert documents["error"] == json.loads(refused.stdout)["error"]
    claim = documents["claim"]
    assert (
        claim["task"] == "DOCS"
        and claim["agent"] == "bob"
        and claim["contract"]["paths"] == ["docs/**"]
    )
    assert (Path(claim["worktree"]) / ".claude/settings.local.json").exists()  # guard installed
    again = cli("task", "claim", "--agent", "carol", "--json", cwd=main)
    assert json.loads(again.stdout).keys() <= set(claim) | {"state", "waiting"}


def test_a_stale_agent_is_fenced_the_same_through_mcp_and_the_cli(tmp_path: Path) -> None:
    """After a reclaim to generation 2, the agent still bound to generation 1 submits through
    MCP and through `integrator submit`; `serve --once` fences both STALE_GENERATION, and
    read_verdict returns what `submit --wait --json` would print."""
    main, worktree, spool = make_world(tmp_path)
    (worktree / "src/a.py").write_text("changed\n")
    git("commit", "-qam", "work", cwd=worktree)
    old = tmp_path / "gen1.json"
    old.write_bytes((binding_dir(worktree) / "contract.json").read_bytes())
    reclaimed = cli(
        "contract", "reclaim", "--repo", str(main), "--task", "CODE", "--force", cwd=main
    )
    assert reclaimed.returncode == 0, reclaimed.stderr
    tools = AgentTools(worktree, transport=SpoolTransport(spool))
    sids: dict[str, str] = {}

    async def submit(client: Client) -> None:
        sids["mcp"] = structured(await client.call_tool("submit", {}))["submission"]

    session(tools, submit)
    by_cli = cli(
        "submit",
        "--spool",
        str(spool),
        "--contract",
        str(old),
        "--candidate",
        "HEAD",
        "--json",
        cwd=worktree,
    )
    assert by_cli.returncode == 0, by_cli.stderr
    sids["cli"] = json.loads(by_cli.stdout)["submission"]
    served = cli("serve", "--repo", str(main), "--spool", str(spool), "--once", cwd=main)
    assert served.returncode == 0, served.stderr
    verdicts: dict[str, Any] = {}

    async def read(client: Client) -> None:
        for how, sid in sids.items():
            result = await client.call_tool("read_verdict", {"submission": sid})
            verdicts[how] = structured(result)
            assert result.meta is not None and result.meta["integrator/exitCode"] == 1
        missing = await client.call_tool(
            "read_verdict", {"submission": "20260101T000000000000Z-00000000"}
        )
        assert (
            missing.is_error
            and missing.meta is not None
            and missing.meta["integrator/exitCode"] == 4
        )

    session(tools, read)
    for doc in verdicts.values():
        assert doc["folder"] == "fenced" and doc["verdict"]["decision"] == "FENCED"
        assert [v["code"] for v in doc["verdict"]["violations"]] == ["STALE_GENERATION"]
    strip = {"submission", "submissionId"}
    assert {k: v for k, v in verdicts["mcp"]["verdict"].items() if k not in strip} == {
        k: v for k, v in verdicts["cli"]["verdict"].items() if k not in strip
    }


def test_submit_and_verdict_refuse_without_a_spool_or_a_binding(tmp_path: Path) -> None:
    """No spool configured, no contract bound, a worktree of another repository, a bad
    submission id, a NUL or a line break in an argument, a lease past the limit: each is a
    usage or configuration error, exit 2."""
    main, worktree, spool = make_world(tmp_path)
    other = make_repo(tmp_path / "other")

    async def body(client: Client) -> None:
        for name, arguments in (
            ("submit", {"worktree": str(main)}),
            ("read_verdict", {"submission": "../../etc/passwd"}),
            ("show_contract", {"worktree": str(other)}),
            ("show_contract", {"worktree": "relative/path"}),
            # odd values: the documented error shape, never an error of their own
            ("show_contract", {"worktree": str(worktree) + "\u0000"}),
            ("check_paths", {"paths": ["src/a\u0000.py"]}),
            ("request_expansion", {"add_paths": ["docs/\u0000**"]}),
            ("read_verdict", {"submission": "20260101T000000000000Z-0000000\n"}),
            ("claim_task", {"lease": "99999999999d"}),
            ("claim_task", {"task": "T\u0000", "lease": "1h"}),
        ):
            result = await client.call_tool(name, arguments)
            assert result.is_error and result.meta is not None, name
            assert result.meta["integrator/exitCode"] == 2, (name, text(result))

    session(AgentTools(worktree, transport=SpoolTransport(spool)), body)

    async def no_spool(client: Client) -> None:
        result = await client.call_tool("submit", {})
        assert result.is_error and "no spool" in text(result)

    session(AgentTools(worktree), no_spool)


def test_stdio_server_as_a_real_subprocess(tmp_path: Path) -> None:
    """`integrator mcp` over stdio, spawned by the SDK's client: the same answers in-process."""
    _, worktree, spool = make_world(tmp_path)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "integrator", "mcp", "--worktree", str(worktree), "--spool", str(spool)],
        env={**os.environ, **GIT_ENV},
        cwd=str(worktree),
    )
    seen: dict[str, Any] = {}

    async def run() -> None:
        async with Client(params) as client:
            seen["tools"] = {t.name for t in (await client.list_tools()).tools}
            seen["check"] = structured(
                await client.call_tool("check_paths", {"paths": ["docs/x.md"]})
            )
            seen["show"] = structured(await client.call_tool("show_contract", {}))

    anyio.run(run)
    assert seen["tools"] == TOOLS
    assert seen["check"]["decision"] == "deny" and seen["show"]["task"] == "CODE"


def test_http_transport_listens_on_loopback_only(tmp_path: Path) -> None:
    """`--http 127.0.0.1:0` serves Streamable HTTP at /mcp (stopped by PID) to a client with
    its token (tests/mcp/test_identity.py has the refusals); a non-loopback address is
    refused with exit 2 unless --allow-remote."""
    _, worktree, _ = make_world(tmp_path)
    refused = cli("mcp", "--http", "0.0.0.0:0", "--worktree", str(worktree), cwd=worktree)
    assert refused.returncode == 2 and "loopback" in refused.stderr
    with http_server(tmp_path, worktree) as server:
        assert server.url.startswith("http://127.0.0.1:") and server.url.endswith("/mcp")
        names: set[str] = set()

        async def run() -> None:
            async with server.client() as client:
                names.update(t.name for t in (await client.list_tools()).tools)

        anyio.run(run)
        assert names == TOOLS


@pytest.mark.parametrize(
    ("args", "stdin"),
    [
        (["guard"], b'{"hook_event_name": "PreToolUse", "tool_name": "Read", "tool_input": {}}'),
        (["submit", "--help"], b""),
        (["guard", "doctor", "--help"], b""),
    ],
)
def test_agent_commands_do_not_load_the_mcp_sdk(args: list[str], stdin: bytes) -> None:
    """The commands agents run in tight loops never import the MCP SDK."""
    loaded = _modules_loaded(args, stdin)
    assert "integrator" in loaded
    assert not loaded & {"mcp", "mcp_types", "uvicorn", "starlette"}


def test_read_verdict_carries_the_landing_as_status_does(tmp_path: Path) -> None:
    """An accepted submission read through MCP says where its landing is — the same
    `landing` document `status --spool --json` prints (docs/lifecycle.md)."""
    main, worktree, spool = make_world(tmp_path)
    (worktree / "src/a.py").write_text("changed\n")
    git("commit", "-qam", "work", cwd=worktree)
    tools = AgentTools(worktree, transport=SpoolTransport(spool))
    found: dict[str, Any] = {}

    async def submit(client: Client) -> None:
        found["sid"] = structured(await client.call_tool("submit", {}))["submission"]

    session(tools, submit)
    served = cli("serve", "--repo", str(main), "--spool", str(spool), "--once", cwd=main)
    assert served.returncode == 0, served.stderr

    async def read(client: Client) -> None:
        found["doc"] = structured(
            await client.call_tool("read_verdict", {"submission": found["sid"]})
        )

    session(tools, read)
    status = cli("status", "--spool", str(spool), "--submission", found["sid"], "--json")
    assert found["doc"]["verdict"]["decision"] == "ACCEPTED"
    assert found["doc"]["landing"] == json.loads(status.stdout)["landing"]
    assert found["doc"]["landing"]["state"] == "promoted"  # no validation: the target follows
