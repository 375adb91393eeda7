"""Issue #21 hole 7: the MCP server acted for whoever called it. Over HTTP it now wants its
bearer token on every request and a Host naming the address it is bound to (every
address, not only 127.0.0.1); whatever the transport, it acts for one agent and refuses
another agent's worktree or task."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import anyio
import pytest

from integrator.errors import UsageError
from integrator.fleet.workspace import binding_dir
from integrator.mcp.tools import AgentTools, SpoolTransport
from tests.gitutil import git
from tests.gitutil import run_integrator as cli
from tests.mcp.world import (
    claim_for_bob,
    exit_code,
    http_server,
    make_world,
    session,
    structured,
    text,
)

INITIALIZED = 200


def test_http_wants_the_bearer_token_on_every_request(tmp_path: Path) -> None:
    """A fresh token is written 0600 and the log names its file, never the token; a request
    without it, or with another, is 401 with a Bearer challenge and the JSON error body MCP
    clients read; with it, the SDK's client lists and calls the tools."""
    _, worktree, _ = make_world(tmp_path)
    with http_server(tmp_path, worktree) as server:
        token = server.token
        for headers in ({}, {"Authorization": "Bearer " + "x" * 43},
                        {"Authorization": f"Basic {token}"}, {"Authorization": "Bearer"}):  # fmt: skip
            status, answer, body = server.request(headers=headers)
            assert status == 401, (headers, status)
            assert answer["www-authenticate"].startswith('Bearer error="invalid_token"')
            assert json.loads(body)["error"] == "invalid_token"
        status, _, _ = server.request(method="GET")  # the SSE stream too
        assert status == 401
        assert server.token_file is not None
        assert stat.S_IMODE(os.stat(server.token_file).st_mode) == 0o600
        git_dir = Path(git("rev-parse", "--absolute-git-dir", cwd=worktree).strip())
        assert server.token_file.is_relative_to(git_dir)
        assert len(token) >= 32 and token not in server.log.read_text()
        status, _, _ = server.request(headers={"Authorization": f"Bearer {token}"})
        assert status == INITIALIZED
        seen: dict[str, Any] = {}

        async def run() -> None:
            async with server.client() as client:
                seen["tools"] = {t.name for t in (await client.list_tools()).tools}
                seen["show"] = structured(await client.call_tool("show_contract", {}))

        anyio.run(run)
        assert "submit" in seen["tools"] and seen["show"]["task"] == "CODE"


def test_http_checks_the_host_of_every_bound_address(tmp_path: Path) -> None:
    """Even with the token: a Host of evil.example (a DNS-rebinding page), of another
    loopback address or port, or an Origin that is not the server's is refused. A server
    bound to 127.0.0.5 gets the same check (the SDK's applied to 127.0.0.1, localhost and
    ::1 only), and there `localhost` is another address."""
    _, worktree, _ = make_world(tmp_path)
    with http_server(tmp_path, worktree) as server:
        auth = {"Authorization": f"Bearer {server.token}"}
        port = server.port
        for host in ("evil.example", f"evil.example:{port}", f"127.0.0.2:{port}",
                     f"[::1]:{port}", f"127.0.0.1:{port + 1}", f"localhost.evil.example:{port}",
                     "127.0.0.1"):  # fmt: skip
            status, _, _ = server.request(host=host, headers=auth)
            assert status == 421, (host, status)
        for origin in ("http://evil.example", f"http://evil.example:{port}", "null",
                       f"https://127.0.0.1:{port}", f"http://127.0.0.2:{port}"):  # fmt: skip
            status, _, _ = server.request(headers={**auth, "Origin": origin})
            assert status == 403, (origin, status)
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}"):
            own = {"Origin": f"http://{host.lower()}"}
            status, _, _ = server.request(host=host, headers={**auth, **own})
            assert status == INITIALIZED, host
    with http_server(tmp_path, worktree, bind="127.0.0.5:0") as server:
        auth = {"Authorization": f"Bearer {server.token}"}
        port = server.port
        assert server.url.startswith("http://127.0.0.5:")
        for host in (f"evil.example:{port}", f"localhost:{port}", f"127.0.0.1:{port}"):
            status, _, _ = server.request(host=host, headers=auth)
            assert status == 421, (host, status)
        status, _, _ = server.request(headers=auth)
        assert status == INITIALIZED
        status, _, _ = server.request()
        assert status == 401


def test_the_operators_token_file_must_be_private(tmp_path: Path) -> None:
    """--token-file readable by group or others is refused (exit 2, nothing listens); a
    0600 one is the token requests must carry, and no token is written beside it."""
    _, worktree, _ = make_world(tmp_path)
    token_file = tmp_path / "mcp.token"
    token_file.write_text("operator-chosen-token-0123456789\n")
    token_file.chmod(0o640)
    refused = cli("mcp", "--http", "127.0.0.1:0", "--worktree", str(worktree),
                  "--token-file", str(token_file), timeout=60)  # fmt: skip
    assert refused.returncode == 2 and "chmod 600" in refused.stderr, refused.stderr
    assert "listening" not in refused.stderr
    stdio = cli("mcp", "--token-file", str(token_file), "--worktree", str(worktree))
    assert stdio.returncode == 2 and "--transport http" in stdio.stderr
    token_file.chmod(0o600)
    with http_server(tmp_path, worktree, "--token-file", str(token_file)) as server:
        assert server.token_file == token_file
        status, _, _ = server.request(
            headers={"Authorization": "Bearer operator-chosen-token-0123456789"}
        )
        assert status == INITIALIZED
    assert not (binding_dir(worktree) / "mcp-http.token").exists()


def test_the_http_server_refuses_another_agents_worktree(tmp_path: Path) -> None:
    """alice's server (a real process, with its token) answers for alice's worktree and
    refuses bob's, by path or through a link to it, with exit code 2: no submission is
    spooled under bob's task."""
    main, worktree, spool = make_world(tmp_path)
    bob = claim_for_bob(main)
    assert bob is not None
    (bob / "docs/x.md").write_text("bob\n")
    git("commit", "-qam", "bob's work", cwd=bob)
    link = tmp_path / "looks-like-mine"
    link.symlink_to(bob)
    answers: dict[str, Any] = {}
    with http_server(tmp_path, worktree, "--spool", str(spool)) as server:

        async def run() -> None:
            async with server.client() as client:
                answers["own"] = structured(await client.call_tool("show_contract", {}))
                for name, where in (("show_contract", bob), ("submit", bob),
                                    ("request_expansion", link), ("check_paths", link)):  # fmt: skip
                    arguments: dict[str, Any] = {"worktree": str(where)}
                    if name == "request_expansion":
                        arguments["add_paths"] = ["src/**"]
                    if name == "check_paths":
                        arguments["paths"] = ["docs/x.md"]
                    answers[name] = await client.call_tool(name, arguments)

        anyio.run(run)
        said = server.log.read_text()
    assert answers["own"]["task"] == "CODE"
    for name in ("show_contract", "submit", "request_expansion", "check_paths"):
        result = answers[name]
        assert result.is_error and exit_code(result) == 2, (name, text(result))
        assert "bound to agent bob" in text(result) and "acts for agent alice" in text(result)
    assert not spool.exists() or not any(spool.rglob("submission.json"))
    assert f"acting for agent alice in {worktree}" in said


def test_a_server_is_bound_to_one_agent(tmp_path: Path) -> None:
    """The agent comes from --agent, $INTEGRATOR_AGENT or the worktree's binding; a server
    named for bob in alice's worktree does not start. A server in the main checkout for
    alice may name her worktree (bound to her), not bob's, nor a worktree bound to nobody."""
    main, worktree, spool = make_world(tmp_path)
    bob = claim_for_bob(main)
    assert bob is not None
    assert AgentTools(worktree).agent == "alice"
    assert AgentTools(worktree, env={"INTEGRATOR_AGENT": "alice"}).agent == "alice"
    for agent, env in (("bob", {}), (None, {"INTEGRATOR_AGENT": "bob"})):
        with pytest.raises(UsageError, match=r"bound to agent alice.*acts for agent bob only"):
            AgentTools(worktree, agent=agent, env=env)
    started = cli("mcp", "--agent", "bob", "--worktree", str(worktree), "--http", "127.0.0.1:0")
    assert started.returncode == 2 and "bound to agent alice" in started.stderr
    git("worktree", "add", "-q", "--detach", str(tmp_path / "free"), cwd=main)
    seen: dict[str, Any] = {}

    async def body(client: Any) -> None:
        for name, where in (("alice", worktree), ("bob", bob), ("free", tmp_path / "free")):
            seen[name] = await client.call_tool("show_contract", {"worktree": str(where)})

    session(AgentTools(main, agent="alice", transport=SpoolTransport(spool)), body)
    assert structured(seen["alice"])["task"] == "CODE"
    for name in ("bob", "free"):
        assert seen[name].is_error and exit_code(seen[name]) == 2, text(seen[name])
    assert "bound to agent bob" in text(seen["bob"])
    assert "not bound to agent alice" in text(seen["free"])


def test_a_shared_checkout_task_held_by_another_agent_is_refused(tmp_path: Path) -> None:
    """bob holds DOCS in the shared checkout; alice's server started with
    INTEGRATOR_TASK=DOCS refuses show_contract and check_paths under it; bob's answers."""
    main, _, _ = make_world(tmp_path)
    claim_for_bob(main, in_place=True)
    env = {"INTEGRATOR_TASK": "DOCS"}
    seen: dict[str, Any] = {}

    async def body(client: Any) -> None:
        seen["show"] = await client.call_tool("show_contract", {})
        seen["check"] = await client.call_tool("check_paths", {"paths": ["docs/x.md"]})

    session(AgentTools(main, agent="alice", env=env), body)
    for result in seen.values():
        assert result.is_error and exit_code(result) == 2, text(result)
        assert "held by agent bob" in text(result)
    session(AgentTools(main, agent="bob", env=env), body)
    assert structured(seen["show"])["task"] == "DOCS"
    assert structured(seen["check"])["decision"] == "allow"


def test_an_absurd_lease_on_the_command_line_is_a_usage_error(tmp_path: Path) -> None:
    """`task claim --lease 99999999999d` died with an OverflowError traceback: exit 2 now,
    naming the limit, and nothing claimed."""
    main, _, _ = make_world(tmp_path)
    done = cli("task", "claim", "--agent", "bob", "--lease", "99999999999d", "--json", cwd=main)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "longer than 36500 days" in done.stderr
    listed = json.loads(cli("task", "list", "--json", cwd=main).stdout)
    assert [c["id"] for c in listed["claimed"]] == ["CODE"]


def test_the_hosts_that_name_an_address() -> None:
    """`localhost` names 127.0.0.1 and ::1 only; an IP literal in any spelling (an
    IPv4-mapped address is its IPv4 too); never a name, another port, or a v4 in brackets."""
    from integrator.mcp.http import names_address

    yes = [("127.0.0.1:8765", "127.0.0.1"), ("localhost:8765", "127.0.0.1"),
           ("[::1]:8765", "::1"), ("LocalHost:8765", "::1"), ("[0:0::1]:8765", "::1"),
           ("127.0.0.5:8765", "127.0.0.5"), ("127.0.0.1:8765", "::ffff:127.0.0.1"),
           ("[::ffff:7f00:1]:8765", "::ffff:127.0.0.1"), ("10.1.2.3:8765", "10.1.2.3")]  # fmt: skip
    no = [("localhost:8765", "127.0.0.5"), ("127.0.0.1:8766", "127.0.0.1"),
          ("127.0.0.1", "127.0.0.1"), ("[127.0.0.1]:8765", "127.0.0.1"),
          ("evil.example:8765", "127.0.0.1"), ("127.0.0.1.nip.io:8765", "127.0.0.1"),
          ("[::1]:8765", "127.0.0.1"), ("::1:8765", "::1"), ("127.0.0.1:+8765", "127.0.0.1"),
          ("2130706433:8765", "127.0.0.1"), (":8765", "127.0.0.1"), ("", "127.0.0.1")]  # fmt: skip
    assert [h for h, a in yes if not names_address(h, a, 8765)] == []
    assert [h for h, a in no if names_address(h, a, 8765)] == []
