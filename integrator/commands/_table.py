"""The command table: every `integrator` command, the module that registers it, and
its one line in `integrator --help` (importing no command module)."""

from __future__ import annotations

# Every command: the module that registers it and its one line in `integrator --help`.
# `integrator --help` and `--version` are built from this table alone, without importing a
# command module (they pull in pydantic and pygit2): only the command being run, or whose
# own --help is asked, is imported. tests/commands/test_cli_parser.py pins the table to
# what each module registers.
COMMANDS: dict[str, tuple[str, str]] = {
    "commit": ("commit", "commit only a task's owned paths, serialized under one repository-wide lock"),
    "completion": ("completion", "print a shell completion script (bash, zsh or fish)"),
    "config": ("config", "show the effective configuration and where each value came from"),
    "contract": ("contract", "issue, renew, reclaim, expand, revoke, show and list ownership contracts"),
    "gate": ("gate", "one-shot, read-only verdict on a candidate (for CI)"),
    "guard": ("guard", "allow or deny file writes against the contract bound to this worktree"),
    "history": ("history", "decisions and review actions recorded in the registry mirror"),
    "init": ("init", "prepare a canonical repository (queue ref, policy ref, durable settings)"),
    "integrate": ("gate", "gate, merge onto the queue head and land a candidate atomically"),
    "mcp": ("mcp", "serve the agent tools (claim, contract, check, expand, submit, verdict, plan) over MCP"),
    "plan": ("plan", "derive blocking edges, the ready set and the partition ceiling of task files"),
    "policy": ("policy", "print the default policy, show or set the repository's policy"),
    "promote": ("promote", "validate queue heads and promote the target to those that pass"),
    "queue": ("queue", "pause or resume landings on the target, and show the queue's state"),
    "refs": ("refs", "count integrator's refs and fold finished records into archive refs"),
    "report": ("report", "reports read from the repository's records (observe mode)"),
    "revert": ("revert", "revert a landed staging commit through the same gate (never a force-push)"),
    "review": ("review", "list, show, approve or reject candidates held as FENCED or REVIEW"),
    "schema": ("schema", "export the JSON Schemas of contracts, verdicts, policies and other documents"),
    "serve": ("serve", "run the integration daemon on a spool"),
    "server-hook": ("server_hook", "protect authority refs on the git server (a pre-receive hook)"),
    "shadow": ("shadow", "decide recorded submissions again (another policy or version) and compare"),
    "status": ("status", "the overview (queue, spool, held, claims); with --submission, its verdict"),
    "submit": ("submit", "submit a candidate commit to the daemon's spool"),
    "sync": ("sync", "fetch the queue so a contract's base is in this clone"),
    "task": ("task", "the shared task queue (.agents/inbox|claimed|done in the main checkout)"),
    "validation": ("validation", "what CI should validate, and its results (external validation)"),
}  # fmt: skip
