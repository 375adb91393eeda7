"""Factories with every argument defaulted, so a test states only what differs."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from integrator.documents.contract import OwnershipContract, parse_contract
from integrator.documents.policy import (
    PolicyState,
    default_policy,
    default_policy_text,
    parse_policy,
)
from integrator.documents.verdict import Verdict
from integrator.landing.engine import Integrator
from integrator.records.canonical import Canonical

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def contract_doc(**overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema": "coding.workspace.ownership.v1",
        "repo": "sha256:" + "0" * 64,
        "taskId": "task-1",
        "attemptId": "attempt-1",
        "baseCommit": "0" * 40,
        "ownershipGeneration": 1,
        "paths": ["src/**"],
        "deny": [],
        "resources": [],
        "lease": {"holder": "agent-a", "expiresAt": "2026-06-01T13:00:00Z"},
        "maxPatchBytes": 1_000_000,
        "policyDigest": "sha256:" + "1" * 64,
    }
    doc.update(overrides)
    return doc


def create_contract(**overrides: Any) -> OwnershipContract:
    return parse_contract(json.dumps(contract_doc(**overrides)))


class Gate:
    """A plain repository gated with the default (or a given) policy, clock frozen at NOW."""

    def __init__(self, repo: Path, policy_text: str | None = None) -> None:
        self.repo = repo
        text = policy_text or default_policy_text()
        self.policy = PolicyState(parse_policy(text) if policy_text else default_policy(), 0, text)

    def canonical(self) -> Canonical:
        return Canonical(self.repo, clock=lambda: NOW)

    def doc(self, base: str, **overrides: Any) -> dict[str, Any]:
        with self.canonical() as canonical:
            identity = canonical.identity
        return contract_doc(
            repo=identity, baseCommit=base, policyDigest=self.policy.digest, **overrides
        )

    def run(self, base: str, candidate: str, **overrides: Any) -> Verdict:
        data = json.dumps(self.doc(base, **overrides)).encode()
        return self.run_raw(data, candidate)

    def run_raw(self, data: bytes, candidate: str) -> Verdict:
        with self.canonical() as canonical:
            engine = Integrator(canonical, policy_override=self.policy, static=True)
            return engine.check(data, candidate)


def later(minutes: int) -> str:
    return (NOW + timedelta(minutes=minutes)).isoformat().replace("+00:00", "Z")


def task_file(
    task_id: str,
    owns: list[str] | None = None,
    *,
    blocked_by: list[str] | None = None,
    workspace: str | None = None,
) -> str:
    """A task file: cognitive without `owns`, writing (lock mode exclusive) with."""
    lines = [f"id: {task_id}"]
    if owns:
        lines += ["owns: [" + ", ".join(owns) + "]", "requires_filesystem: true"]
    if blocked_by:
        lines.append("blocked-by: [" + ", ".join(blocked_by) + "]")
    if workspace:
        lines.append(f"workspace: {workspace}")
    return "---\n" + "\n".join(lines) + f"\n---\n# Task {task_id}\n\nDo the thing.\n"
