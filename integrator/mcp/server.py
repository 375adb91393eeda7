"""The MCP server agents talk to (`integrator mcp`), on the official MCP SDK.

Seven tools, each the CLI's operation with the CLI's `--json` document as its structured
output (output schemas in `integrator.mcp.models`):

| tool | the CLI it answers as |
|---|---|
| `claim_task` | `integrator task claim --json` |
| `show_contract` | `integrator guard show --json` |
| `check_paths` | `integrator guard --path P … --json` |
| `request_expansion` | `integrator contract request-expansion --send --json` (filed, not granted) |
| `submit` | `integrator submit --json` (the bound contract, into the server's spool or intake) |
| `read_verdict` | `integrator submit --wait --json` for a submission (its task and its id) |
| `ready_tasks` | `integrator plan .agents --json` |

A refusal is a tool error (`isError`) whose text is the CLI's error line and whose
structured content is `{"error": {"type", "message", "exitCode"}}`; every result carries
the CLI's exit code in `_meta["integrator/exitCode"]` (a denied path or a FENCED verdict is
an answer, exit 1, and a filed expansion request one with exit 3, not an error).

The server acts for one agent (`integrator.mcp.identity`); over HTTP every request needs
its bearer token and a Host naming the bound address (`integrator.mcp.http`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver.tools.base import Tool
from mcp_types import CallToolResult, TextContent
from pydantic import Field

from integrator.clock import parse_duration
from integrator.errors import IntegratorError, UsageError
from integrator.limits import (
    MAX_ID_CHARS,
    MCP_ID_CHARS,
    MCP_MAX_ADDITIONS,
    MCP_MAX_PATHS,
    MCP_WAIT_SECONDS,
)
from integrator.mcp import models
from integrator.mcp.tools import AgentTools, Result
from integrator.version import __version__

EXIT_META = "integrator/exitCode"
INSTRUCTIONS = (
    "integrator fences what coding agents write. Claim a task (claim_task), write only inside "
    "its contract (show_contract, check_paths before writing), ask before writing anywhere "
    "else (request_expansion), then submit your candidate commit (submit) and read its verdict "
    "(read_verdict). The write guard and the gate re-check everything."
)

Worktree = Annotated[
    str | None,
    Field(description="absolute path of a worktree of this repository (default: the server's)"),
]


def result(call: Callable[[], Result]) -> CallToolResult:
    """Run one tool body; an IntegratorError becomes the tool error the CLI's refusal is."""
    try:
        document, code = call()
    except IntegratorError as err:
        failure = {"type": type(err).__name__, "message": str(err), "exitCode": err.exit_code}
        return CallToolResult(
            content=[TextContent(type="text", text=f"integrator: error: {err}")],
            structured_content={"error": failure},
            is_error=True,
            _meta={EXIT_META: err.exit_code},
        )
    text = json.dumps(document, indent=2, ensure_ascii=False, default=str)
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=document,
        _meta={EXIT_META: code},
    )


def _lease(text: str) -> timedelta:
    try:
        return parse_duration(text)
    except ValueError as err:
        raise UsageError(f"lease: {err}") from err


def _tools(
    tools: AgentTools,
) -> list[tuple[Callable[..., CallToolResult], type[models.Document] | None, str]]:
    def claim_task(
        task: Annotated[
            str | None, Field(description="claim this task only, if it is ready")
        ] = None,
        lease: Annotated[str, Field(description="contract lease, e.g. 45m or 2h")] = "1h",
        in_place: Annotated[bool, Field(description="shared checkout: no worktree")] = False,
        install_guard: Annotated[bool, Field(description="install the write guard")] = True,
    ) -> CallToolResult:
        return result(lambda: tools.claim_task(task, _lease(lease), in_place, install_guard))

    def show_contract(worktree: Worktree = None) -> CallToolResult:
        return result(lambda: tools.show_contract(worktree))

    def check_paths(
        paths: Annotated[
            list[str],
            Field(
                description="paths, relative to the worktree root or absolute",
                max_length=MCP_MAX_PATHS,
            ),
        ],
        worktree: Worktree = None,
    ) -> CallToolResult:
        return result(lambda: tools.check_paths(paths, worktree))

    def request_expansion(
        add_paths: Annotated[
            list[str] | None,
            Field(description="globs to add to the write set", max_length=MCP_MAX_ADDITIONS),
        ] = None,
        add_resources: Annotated[
            list[str] | None,
            Field(description="KIND:NAME resources to add", max_length=MCP_MAX_ADDITIONS),
        ] = None,
        worktree: Worktree = None,
    ) -> CallToolResult:
        return result(
            lambda: tools.request_expansion(add_paths or [], add_resources or [], worktree)
        )

    def submit(
        candidate: Annotated[str, Field(description="the candidate commit (a revision)")] = "HEAD",
        bundle: Annotated[bool, Field(description="ship the commits as a git bundle")] = False,
        worktree: Worktree = None,
    ) -> CallToolResult:
        return result(lambda: tools.submit(candidate, bundle, worktree))

    def read_verdict(
        submission: Annotated[
            str, Field(description="the id `submit` returned", max_length=MCP_ID_CHARS)
        ],
        wait_seconds: Annotated[
            float, Field(ge=0, le=MCP_WAIT_SECONDS, description="wait this long for it")
        ] = 0,
        task: Annotated[
            str | None,
            Field(
                description="the task it was submitted under (default: the one this server "
                "submitted it under, else the bound contract's)",
                max_length=MAX_ID_CHARS,
            ),
        ] = None,
    ) -> CallToolResult:
        return result(lambda: tools.read_verdict(submission, wait_seconds, task))

    def ready_tasks() -> CallToolResult:
        return result(tools.ready_tasks)

    return [
        (claim_task, models.ClaimDocument, "Claim the first ready task (or `task`): its contract, worktree and brief, as `integrator task claim --json`."),
        (show_contract, models.BoundContract, "The contract this worktree writes under, its live claim, and whether writes are allowed now."),
        (check_paths, models.GuardDecision, "Would the write guard allow writing these paths? Per path: allowed, why, and the contract line that decided."),
        (request_expansion, models.ExpansionAnswer, "Ask to add paths or resources to the contract BEFORE writing them. The request is filed for the coordinator (state pending, exit 3): do not write them until a later call answers granted (it binds the coordinator's grant here). Only what the policy grants automatically is granted at once (state granted, exit 0)."),
        (submit, models.Submitted, "Submit a candidate commit under the bound contract to the daemon's spool or intake."),
        (read_verdict, models.Filed, "The daemon's verdict on a submission of a task (ACCEPTED, FENCED or REVIEW with every violation), waiting up to wait_seconds; a verdict on another candidate than the one submitted is an error."),
        (ready_tasks, models.Plan, "The task plan of this repository's queue: the ready set, what waits and why, the partition ceiling."),
    ]  # fmt: skip


def build_server(tools: AgentTools) -> MCPServer[Any]:
    """An MCP server whose tools act for `tools`' repository and agent."""
    registered = []
    for fn, model, description in _tools(tools):
        tool = Tool.from_function(fn, name=fn.__name__, description=description)
        # The tool builds its own CallToolResult; publish the document's schema for it.
        tool.fn_metadata.output_schema = models.output_schema(model)
        registered.append(tool)
    return MCPServer(
        "integrator",
        version=__version__,
        instructions=INSTRUCTIONS,
        tools=registered,
        log_level="WARNING",
    )


def http_app(server: MCPServer[Any]) -> Any:
    """The SDK's Streamable HTTP app at `/mcp`, its own Host/Origin check off: the gate in
    `integrator.mcp.http` checks those for every bound address, and the token."""
    from mcp.server.transport_security import TransportSecuritySettings

    off = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    return server.streamable_http_app(transport_security=off)
