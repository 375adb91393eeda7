"""The expansion request (`integrator.expansion.v1`) and the record of one not granted.

An agent that must touch an undeclared path sends a request *before* writing it; the
coordinator grants it (generation + 1 of the claim) or records it for review. See
`integrator.records.expansions` for where those records live.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from integrator.documents.bounds import CEILING_LIMITS, DEFAULT_LIMITS, ContractLimits, where
from integrator.documents.contract import (
    DIGEST_RE,
    JSON_SAFE_INT,
    Digest,
    Glob,
    Model,
    ObjectId,
    RefComponent,
    Resource,
    check_globs,
    check_resources,
)
from integrator.documents.digests import digest_of
from integrator.errors import UsageError

# The pattern is in the JSON Schema too, so an agent in any language can check its request;
# the validator gives a pydantic reader the clearer message.
RequestDigest = Annotated[Digest, Field(json_schema_extra={"pattern": DIGEST_RE.pattern})]


class ExpansionRequest(Model):
    """The expansion request (`integrator.expansion.v1`).

    Sent by an agent that must touch an undeclared path *before* writing it: the contract
    it holds (digest, generation), digests of its current tree and diff, what to add, and —
    so that integrator can verify nothing was written first — the git tree id of the
    workspace's whole current state (`workspaceTree`, untracked files included, as
    `integrator contract request-expansion` builds it) and its HEAD (`workspaceHead`). A
    request without `workspaceTree` is never granted automatically.
    """

    schema_: Literal["integrator.expansion.v1"] = Field(alias="schema")
    task_id: RefComponent
    contract_digest: RequestDigest
    expected_generation: Annotated[int, Field(ge=1, le=JSON_SAFE_INT)]
    tree_digest: RequestDigest
    diff_digest: RequestDigest
    add_paths: Annotated[
        list[Glob],
        Field(
            max_length=CEILING_LIMITS.max_globs,
            description=f"At most the policy's limits.max_globs (default "
            f"{DEFAULT_LIMITS.max_globs:,}).",
        ),
        BeforeValidator(check_globs),
    ] = Field(default_factory=list)
    add_resources: Annotated[
        list[Resource],
        Field(
            max_length=CEILING_LIMITS.max_resources,
            description=f"At most the policy's limits.max_resources (default "
            f"{DEFAULT_LIMITS.max_resources:,}).",
        ),
        BeforeValidator(check_resources),
    ] = Field(default_factory=list)
    workspace_tree: ObjectId | None = None
    workspace_head: ObjectId | None = None

    @property
    def request_id(self) -> str:
        """16 hex digits of the request's canonical digest: the same request, the same id."""
        return digest_of(self.wire()).removeprefix("sha256:")[:16]


def parse_request(data: bytes, *, limits: ContractLimits = DEFAULT_LIMITS) -> ExpansionRequest:
    """An expansion request read from a file an agent wrote, under `limits` (the policy in
    force's): refused (UsageError, naming each problem) past its size limit or when it is
    not a valid request."""
    if len(data) > limits.expansion_bytes:
        raise UsageError(
            f"the expansion request is more than {limits.expansion_bytes} bytes "
            f"({where('expansion_bytes', limits)})"
        )
    try:
        return ExpansionRequest.model_validate_json(data, context={"limits": limits})
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors()
        )
        raise UsageError(f"invalid expansion request: {problems}") from err


ExpansionState = Literal["pending", "granted", "dismissed"]


class ExpansionRecord(Model):
    """`expansion.json`: one event (request: filed by the agent for the coordinator; refuse,
    grant, dismiss) of a recorded expansion request."""

    schema_: Literal["integrator.expansion-record.v1"] = Field(
        default="integrator.expansion-record.v1", alias="schema"
    )
    task_id: str
    request_id: str
    state: ExpansionState
    event: Literal["request", "refuse", "grant", "dismiss"]
    at: datetime
    reason: str
    live_generation: int | None = None
    live_contract_digest: str | None = None
    live_state: str | None = None
    conflicts_with: list[str] = Field(default_factory=list)


# What the policy's `[expansion] auto_grant` may name: path categories (`source` is every
# path no `[categories]` line claims) and the resource kinds of one. The rest — CI,
# migrations, codegen, lockfiles and submodules — is always the coordinator's decision.
AUTO_GRANTABLE = ("source", "schemas")
NEVER_AUTOMATIC = ("ci", "migrations", "codegen", "lockfiles", "submodules")


def _auto_grantable(names: list[str]) -> list[str]:
    for name in names:
        if name in NEVER_AUTOMATIC:
            raise ValueError(
                f"{name!r} is never granted automatically: an expansion into "
                f"{', '.join(NEVER_AUTOMATIC)} always goes to the coordinator"
            )
        if name not in AUTO_GRANTABLE:
            raise ValueError(f"{name!r} is not a category ({', '.join(AUTO_GRANTABLE)})")
    return names


class ExpansionPolicy(BaseModel):
    """The policy's `[expansion]`: which categories an agent's expansion request is granted
    in without the coordinator (`auto_grant`, empty by default: every request waits)."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")
    auto_grant: Annotated[
        list[Annotated[str, Field(json_schema_extra={"enum": list(AUTO_GRANTABLE)})]],
        AfterValidator(_auto_grantable),
    ] = Field(default_factory=list)
