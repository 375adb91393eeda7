"""What the MCP tests share: a repository with two agents' claims, in-process sessions, and
`integrator mcp --http` as a real process (started by the test, stopped by PID)."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_types import TextContent

from integrator.fleet.assignments import Fleet
from integrator.fleet.taskqueue import Queue
from integrator.mcp.server import build_server
from integrator.mcp.tools import AgentTools
from integrator.records.prepare import prepare
from tests.factories import task_file
from tests.gitutil import GIT_ENV, commit_files, git, make_repo


def make_world(tmp_path: Path, *, policy: str | None = None) -> tuple[Path, Path, Path]:
    """An initialized repository (under `policy`, TOML, when given) whose queue holds CODE
    (src/**) and DOCS (docs/**), with CODE claimed by alice into worktree `.trees/alice`;
    returns (main, worktree, spool)."""
    main = make_repo(tmp_path / "repo")
    commit_files(main, {"src/a.py": "a\n", "docs/x.md": "x\n"}, "init")
    git("reset", "-q", "--hard", cwd=main)
    prepare(main, policy_text=policy, update_checkout=True)  # a fleet's main checkout, on main
    queue = Queue.find(main)
    queue.init()
    (queue.root / "workspaces.toml").write_text(
        '[agents.alice]\nworkspace = "alice"\n[agents.bob]\nworkspace = "bob"\n'
    )
    queue.add(task_file("CODE", ["src/**"]))
    queue.add(task_file("DOCS", ["docs/**"]))
    assignment = Fleet(main).claim("alice", task_id="CODE").assignment
    assert assignment is not None and assignment.worktree is not None
    return main, assignment.worktree, tmp_path / "spool"


def claim_for_bob(main: Path, *, in_place: bool = False) -> Path | None:
    """bob claims DOCS (into `.trees/bob`, or in the shared checkout); his worktree."""
    assignment = Fleet(main).claim("bob", task_id="DOCS", in_place=in_place).assignment
    assert assignment is not None
    return assignment.worktree


def session(tools: AgentTools, body: Callable[[Client], Awaitable[None]]) -> None:
    async def run() -> None:
        async with Client(build_server(tools)) as client:
            await body(client)

    anyio.run(run)


def text(result: Any) -> str:
    """The text of a tool result's first content block."""
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


def structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, text(result)
    doc = result.structured_content
    assert isinstance(doc, dict)
    return doc


def exit_code(result: Any) -> int:
    assert result.meta is not None
    code = result.meta["integrator/exitCode"]
    assert isinstance(code, int)
    return code


@dataclass(frozen=True)
class HttpServer:
    """A running `integrator mcp --http`: its URL, its log and the token file it named."""

    url: str
    log: Path
    token_file: Path | None  # None: the server named none (it had no token before hole 7)

    @property
    def token(self) -> str:
        return self.token_file.read_text().strip() if self.token_file else ""

    @property
    def port(self) -> int:
        port = urlsplit(self.url).port
        assert port is not None
        return port

    def request(
        self,
        *,
        host: str | None = None,
        headers: dict[str, str] | None = None,
        method: str = "POST",
    ) -> tuple[int, dict[str, str], bytes]:
        """One raw request to /mcp (an `initialize`), with the Host header `host` (default:
        the URL's) and `headers` beside it: (status, headers, body)."""
        where = urlsplit(self.url)
        assert where.hostname is not None
        conn = http.client.HTTPConnection(where.hostname, self.port, timeout=30)
        try:
            conn.putrequest(method, "/mcp", skip_host=True, skip_accept_encoding=True)
            conn.putheader("Host", host or where.netloc)
            body = json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-06-18",
                        "capabilities": {},
                        "clientInfo": {"name": "test", "version": "1"},
                    },
                }
            ).encode()
            sent = {
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
                **(headers or {}),
            }
            if method == "POST":
                sent["Content-Length"] = str(len(body))
            for name, value in sent.items():
                conn.putheader(name, value)
            conn.endheaders(body if method == "POST" else None)
            response = conn.getresponse()
            return (
                response.status,
                {k.lower(): v for k, v in response.getheaders()},
                response.read(200_000) if method == "POST" else b"",
            )
        finally:
            conn.close()

    def client(self, token: str | None = None) -> Client:
        """The SDK's client over Streamable HTTP, sending the bearer token."""
        token = token or self.token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        http_client = create_mcp_http_client(headers=headers)
        return Client(streamable_http_client(self.url, http_client=http_client))


@contextmanager
def http_server(
    tmp_path: Path, worktree: Path, *args: str, bind: str = "127.0.0.1:0"
) -> Iterator[HttpServer]:
    """`integrator mcp --http BIND --worktree W ARGS…` as a process, until the block ends
    (stopped by its PID)."""
    log = tmp_path / f"mcp-{time.monotonic_ns()}.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "integrator", "mcp", "--http", bind,
             "--worktree", str(worktree), *args],
            stdout=subprocess.DEVNULL,
            stderr=sink,
            env={**os.environ, **GIT_ENV},
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while "listening on" not in log.read_text() and time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()
            time.sleep(0.05)
        said = log.read_text()
        url = said.split("listening on ", 1)[1].split()[0]
        named = said.split("bearer token in ", 1)[1:]
        token_file = Path(named[0].split(" (", 1)[0]) if named else None
        yield HttpServer(url, log, token_file)
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=15)
