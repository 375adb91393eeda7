"""The JSON Schemas of what the MCP tools return: the documents the CLI prints with `--json`.

Each tool's output schema is one of these models' schemas, with the ownership contract and
the verdict referring to the project's own document schemas (`contracts/`), so an agent
reads the same shapes through MCP as from `integrator … --json`. The models describe the
documents; the documents themselves are built by the same code the CLI runs.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema

from integrator.documents.schemas import schema_for

# Placeholders pydantic leaves alone; `output_schema` turns them into references.
_REF = "x-integrator-document"
ContractDoc = Annotated[dict[str, Any], WithJsonSchema({_REF: "OwnershipContract"})]
VerdictDoc = Annotated[dict[str, Any], WithJsonSchema({_REF: "Verdict"})]


class Document(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class WriteSetEntry(Document):
    pattern: str
    origin: str
    because: str | None = None


class ClaimDocument(Document):
    """`integrator task claim --json`: the claimed task, or `claimed: null` and why."""

    claimed: str | None = Field(description="the claimed task file, null when none was")
    skipped: list[str]
    state: str | None = Field(None, description="inbox:empty, inbox:blocked (nothing claimed)")
    waiting: dict[str, list[str]] | None = None
    task: str | None = None
    title: str | None = None
    agent: str | None = None
    lock_mode: str | None = Field(None, alias="lockMode")
    reason: str | None = None
    workspace: str | None = None
    workspace_source: str | None = Field(None, alias="workspaceSource")
    worktree: str | None = None
    write_set: list[WriteSetEntry] | None = Field(None, alias="writeSet")
    resources: list[str] | None = None
    brief: str | None = None
    worktree_id: str | None = Field(None, alias="worktreeId")
    contract_digest: str | None = Field(None, alias="contractDigest")
    contract: ContractDoc | None = None


class LiveClaim(Document):
    generation: int
    attempt_id: str = Field(alias="attemptId")
    state: str
    lease_expires_at: str = Field(alias="leaseExpiresAt")
    contract_digest: str = Field(alias="contractDigest")


class BoundContract(Document):
    """`integrator guard show --json`: the contract this checkout writes under."""

    worktree: str
    worktree_id: str | None = Field(alias="worktreeId")
    task: str | None
    binding: dict[str, str] | None
    contract: ContractDoc | None
    live: LiveClaim | None
    writable: bool
    problem: str | None


class PathDecision(Document):
    path: str
    relative: str | None
    allowed: bool
    reason: str
    rule: str | None = Field(description="the contract line that decided")


class GuardDecision(Document):
    """`integrator guard --path P … --json`: allow or deny, per path with its rule."""

    decision: str = Field(description="allow or deny")
    reason: str
    task: str | None
    paths: list[PathDecision]


class ExpansionAnswer(Document):
    """`integrator contract request-expansion --send`: the request filed for the coordinator
    (pending), or granted by the policy's `[expansion] auto_grant` and bound here."""

    state: str = Field(description="granted (bound here: write), pending or dismissed (do not)")
    task_id: str = Field(alias="taskId")
    request_id: str | None = Field(alias="requestId")
    add_paths: list[str] = Field(alias="addPaths")
    add_resources: list[str] = Field(alias="addResources")
    reason: str
    generation: int = Field(description="the generation of the contract bound here now")
    contract: ContractDoc | None = Field(description="the bound contract, when granted")
    ref: str | None = Field(description="where the request waits (`contract list` shows it)")


class Submitted(Document):
    """`integrator submit --json`: the spool folder it went to, or the intake."""

    submission: str
    candidate: str
    path: str | None = Field(None, description="the submission's folder in the spool")
    intake: str | None = Field(None, description="the intake it was pushed to")
    unsigned: str | None = Field(None, description="why it went in without an attempt key")


class Filed(Document):
    """`integrator submit --wait --json`: the verdict, or the spool's rejection."""

    submission: str
    folder: str | None = Field(None, description="accepted, fenced or review")
    verdict: VerdictDoc | None = None
    schema_: str | None = Field(None, alias="schema", description="a rejection's schema")
    reason: str | None = None
    rejected_at: str | None = Field(None, alias="rejectedAt")
    landing: dict[str, Any] | None = Field(
        None,
        description="where a landed submission's landing is now: state queued, promoted, "
        "ejected, reverted (revertedBy) or gone (docs/lifecycle.md); on the target only when "
        "promoted",
    )


class Plan(Document):
    """`integrator plan QUEUE --json`: tasks, edges, the ready set, the ceiling."""

    model_config = ConfigDict(extra="forbid")
    tasks: list[dict[str, Any]]
    edges: list[dict[str, Any]]
    ready: list[str]
    running: list[str]
    ceiling: int
    fleet: int | None
    split: list[dict[str, Any]]
    warnings: list[str]


def _definitions() -> dict[str, Any]:
    defs: dict[str, Any] = {}
    for name, stem in (("OwnershipContract", "ownership-contract.v1"), ("Verdict", "verdict.v1")):
        schema = schema_for(stem)
        defs.update(schema.pop("$defs", {}))
        schema.pop("$schema", None)
        schema.pop("$id", None)
        defs[name] = schema
    return defs


def output_schema(model: type[Document] | None) -> dict[str, Any]:
    """`model`'s JSON Schema (None: the ownership contract itself, as `contract expand`
    prints it) with the contract's and verdict's definitions beside it."""
    if model is None:
        schema: dict[str, Any] = {
            "type": "object",
            "allOf": [{"$ref": "#/$defs/OwnershipContract"}],
        }
    else:
        schema = _link(model.model_json_schema(by_alias=True, mode="serialization"))
    schema.setdefault("$defs", {}).update(_definitions())
    return schema


def _link(node: Any) -> Any:
    if isinstance(node, dict):
        if set(node) == {_REF}:
            return {"$ref": f"#/$defs/{node[_REF]}"}
        return {key: _link(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_link(item) for item in node]
    return node
