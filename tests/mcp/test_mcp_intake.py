"""The MCP server on an intake (`integrator mcp --intake URL`, a real stdio subprocess and a
real `serve --intake` daemon): `read_verdict` reads a submission by its task and its id, and
a verdict on another candidate than the one the server submitted is an error."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from integrator.mcp.tools import AgentTools, SpoolTransport
from tests.gitutil import GIT_ENV, git, make_repo
from tests.gitutil import run_integrator as cli
from tests.intake_pushes import accepted, push_verdict
from tests.mcp.world import make_world, session, structured, text


def _commit(worktree: Path, content: str) -> str:
    (worktree / "src/a.py").write_text(content)
    git("commit", "-qam", content.strip(), cwd=worktree)
    return git("rev-parse", "HEAD", cwd=worktree)


def _call(client: Client, name: str, **arguments: Any) -> Any:
    return client.call_tool(name, arguments)


def test_read_verdict_on_an_intake_is_the_task_and_the_id_and_the_candidate(
    tmp_path: Path,
) -> None:
    main, worktree, _ = make_world(tmp_path)
    intake = make_repo(tmp_path / "intake.git", bare=True)
    url = f"file://{intake}"
    first, second = _commit(worktree, "one\n"), None
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "integrator", "mcp", "--worktree", str(worktree), "--intake", url],
        env={**os.environ, **GIT_ENV},
        cwd=str(worktree),
    )
    seen: dict[str, Any] = {}

    async def run() -> None:
        nonlocal second
        async with Client(params) as client:
            sent = structured(await _call(client, "submit"))
            assert sent["candidate"] == first and sent["intake"] == url
            sid = seen["sid"] = sent["submission"]
            # The same id under another task, naming this candidate: not its verdict.
            push_verdict(worktree, url, "DOCS", sid, accepted(first, "DOCS"))
            early = await _call(client, "read_verdict", submission=sid)
            assert early.is_error and early.meta["integrator/exitCode"] == 4, text(early)
            other = await _call(client, "read_verdict", submission=sid, task="DOCS")
            assert other.is_error and other.meta["integrator/exitCode"] == 2, text(other)
            assert "submitted by this server under task 'CODE'" in text(other)

            served = cli("serve", "--repo", str(main), "--spool", str(tmp_path / "spool"),
                         "--intake", url, "--once", cwd=main)  # fmt: skip
            assert served.returncode == 0, served.stderr
            done = await _call(client, "read_verdict", submission=sid)
            seen["verdict"] = structured(done)
            assert done.meta["integrator/exitCode"] == 0

            # Its own name, another candidate (its id reused by someone): an error.
            second = _commit(worktree, "two\n")
            sid2 = structured(await _call(client, "submit"))["submission"]
            push_verdict(worktree, url, "CODE", sid2, accepted(first, "CODE"))
            foreign = await _call(client, "read_verdict", submission=sid2)
            assert foreign.is_error and foreign.meta["integrator/exitCode"] == 2
            seen["foreign"] = text(foreign)

    anyio.run(run)
    assert seen["verdict"]["verdict"]["decision"] == "ACCEPTED"
    assert seen["verdict"]["verdict"]["candidate"] == first
    assert f"is the verdict on candidate '{first}', not on {second}" in seen["foreign"]

    # A server that did not submit it reads the bound contract's task (CODE).
    async def later(client: Client) -> None:
        result = await client.call_tool("read_verdict", {"submission": seen["sid"]})
        assert structured(result)["verdict"]["candidate"] == first

    from integrator.mcp.tools import IntakeTransport

    session(AgentTools(worktree, transport=IntakeTransport(url, worktree)), later)


def test_read_verdict_on_a_spool_refuses_another_task(tmp_path: Path) -> None:
    """Through the spool too: a verdict filed for a submission of CODE is not the answer
    for DOCS (named by an agent that did not submit it through this server)."""
    main, worktree, spool = make_world(tmp_path)
    _commit(worktree, "one\n")
    tools = AgentTools(worktree, transport=SpoolTransport(spool))
    sids: dict[str, str] = {}

    async def submit(client: Client) -> None:
        sids["sid"] = structured(await client.call_tool("submit", {}))["submission"]

    session(tools, submit)
    served = cli("serve", "--repo", str(main), "--spool", str(spool), "--once", cwd=main)
    assert served.returncode == 0, served.stderr

    async def read(client: Client) -> None:
        result = await client.call_tool("read_verdict", {"submission": sids["sid"], "task": "DOCS"})
        assert result.is_error and result.meta is not None
        assert result.meta["integrator/exitCode"] == 2
        assert "of task 'CODE', not of DOCS" in text(result)
        mine = await client.call_tool("read_verdict", {"submission": sids["sid"], "task": "CODE"})
        assert structured(mine)["verdict"]["decision"] == "ACCEPTED"

    session(AgentTools(worktree, transport=SpoolTransport(spool)), read)
