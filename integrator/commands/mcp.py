"""`integrator mcp` — an MCP server for coding agents (tools over the CLI's operations).

The SDK is imported only here, when the command runs: `guard` and `submit`, which agents
call in tight loops, never load it.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from integrator.commands._common import say
from integrator.docpath import doc
from integrator.errors import UsageError


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "mcp",
        help="serve the agent tools (claim, contract, check, expand, submit, verdict, plan) over MCP",
        description=(
            "A Model Context Protocol server for a coding agent working in this repository. "
            "Tools: claim_task, show_contract, check_paths, request_expansion, submit, "
            "read_verdict, ready_tasks; each returns the document the matching command "
            "prints with --json and refuses what that command refuses (the error carries "
            "its exit code). The server acts for one agent (--agent, else $INTEGRATOR_AGENT, "
            "else the agent the worktree is bound to) and refuses any other agent's worktree "
            "or task. stdio by default (the agent starts it); --transport http serves "
            "Streamable HTTP at /mcp on 127.0.0.1, every request with the bearer token "
            "(--token-file, else a fresh one written 0600 into the worktree's git folder) "
            "and a Host naming the bound address; a non-loopback address needs "
            f"--allow-remote. See {doc('agents.md')}."
        ),
    )
    parser.add_argument("--transport", choices=("stdio", "http"), default=None)
    parser.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="listen here (implies --transport http; default 127.0.0.1:8765, port 0 picks one)",
    )
    parser.add_argument(
        "--allow-remote", action="store_true", help="allow --http on a non-loopback address"
    )
    parser.add_argument(
        "--token-file",
        type=Path,
        metavar="FILE",
        help="HTTP: the bearer token every request must carry, from this file (mode 0600: "
        "refused when its group or others may read it); default: a fresh token written to "
        "<worktree git dir>/integrator/mcp-http.token, whose path is printed",
    )
    parser.add_argument(
        "--worktree",
        type=Path,
        default=Path(),
        metavar="PATH",
        help="the agent's worktree or any checkout of the repository (default: here)",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--spool", type=Path, metavar="DIR", help="the daemon's spool (submit)")
    where.add_argument(
        "--intake",
        metavar="URL",
        help="an intake the daemons serve (submit pushes there, read_verdict reads it back)",
    )
    parser.add_argument(
        "--canonical",
        metavar="URL",
        help="with --intake: the canonical repository read_verdict reads the landing from "
        "(default: the clone's origin when it holds the queue, else the intake)",
    )
    parser.add_argument(
        "--agent",
        metavar="NAME",
        help="the one agent this server acts for (default: $INTEGRATOR_AGENT, else the agent "
        "the worktree is bound to, else host-pid)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from integrator.daemon import logs
    from integrator.fleet.bound import checkout_of
    from integrator.mcp import http
    from integrator.mcp.server import build_server, http_app
    from integrator.mcp.tools import AgentTools, IntakeTransport, SpoolTransport, Transport

    logs.configure(stream=logs.STDERR)  # stdout may be the protocol's channel
    transport = args.transport or ("http" if args.http else "stdio")
    if transport == "stdio" and (args.http or args.token_file):
        raise UsageError("--http and --token-file need --transport http")
    if args.canonical and not args.intake:
        raise UsageError("--canonical is for --intake: a spool's daemon reads its own repository")
    bind = http.parse_http(args.http or "127.0.0.1:8765", allow_remote=args.allow_remote)
    spool = args.spool or (
        Path(os.environ["INTEGRATOR_SPOOL"]) if os.environ.get("INTEGRATOR_SPOOL") else None
    )
    worktree = args.worktree.resolve()
    carrier: Transport | None = SpoolTransport(spool.resolve()) if spool else None
    if args.intake:
        carrier = IntakeTransport(args.intake, worktree, args.canonical)
    tools = AgentTools(worktree, transport=carrier, agent=args.agent)
    server = build_server(tools)
    if transport == "stdio":
        server.run()  # stdout is the protocol channel from here on
        return 0
    generated = checkout_of(tools.root).binding_dir / "mcp-http.token"
    token, where = http.server_token(args.token_file, generated)
    sock = http.listen(*bind)
    say(f"mcp: acting for agent {tools.agent} in {tools.root}", err=True)
    say(f"mcp: bearer token in {where} (send Authorization: Bearer <its contents>)", err=True)
    say(f"mcp: listening on {http.url_of(sock)}", err=True)
    http.serve(http_app(server), sock, token)
    return 0
