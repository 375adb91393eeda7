"""The ownership contract `coding.workspace.ownership.v1`.

A contract is immutable: the coordinator issues it, the agent carries it, the gate checks
it against the live claim. A v1 reader rejects unknown fields and unknown resource kinds
(never ignores them), because a v2 resource it cannot interpret could widen the write set.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from integrator import paths
from integrator.caches import Shared
from integrator.documents.bounds import CEILING_LIMITS, DEFAULT_LIMITS, ContractLimits, where
from integrator.documents.digests import digest_of
from integrator.errors import ContractError
from integrator.limits import HOLDER_CHARS
from integrator.paths import PathMatcher
from integrator.refnames import refname_problem

# The largest integer every JSON reader holds exactly (and RFC 8785 can canonicalise).
JSON_SAFE_INT = 2**53 - 1

RESOURCE_KINDS: frozenset[str] = frozenset(
    {"api", "schema", "migration-slot", "lockfile", "codegen", "symbol", "submodule", "ci"}
)

DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
OID_RE = re.compile(r"^[0-9a-f]{40}$|^[0-9a-f]{64}$")


def _refname_component(value: str) -> str:
    problem = refname_problem(value)
    if problem:
        raise ValueError(f"{value!r} is not usable as a git ref name component: {problem}")
    return value


def _digest(value: str) -> str:
    if not DIGEST_RE.match(value):
        raise ValueError(f"{value!r} is not a digest of the form sha256:<64 hex digits>")
    return value


def _oid(value: str) -> str:
    if not OID_RE.match(value):
        raise ValueError(f"{value!r} is not a full lowercase hex object id")
    return value


def _glob(value: str) -> str:
    if len(value) > CEILING_LIMITS.max_glob_length:  # any policy's; `within_limits` applies its
        raise ValueError(
            f"a path pattern is longer than {CEILING_LIMITS.max_glob_length} characters"
        )
    problem = paths.glob_problem(value)
    if problem:
        raise ValueError(f"path pattern {value!r}: {problem}")
    return paths.normalize(value)


def parse_resource(value: str) -> tuple[str, str]:
    """Split `kind:name`, refusing kinds a v1 reader does not know."""
    kind, sep, name = value.partition(":")
    if not sep or not kind or not name:
        raise ValueError(f"resource {value!r} is not of the form kind:name")
    if kind not in RESOURCE_KINDS:
        known = ", ".join(sorted(RESOURCE_KINDS))
        raise ValueError(
            f"resource kind {kind!r} (in {value!r}) is unknown to a v1 reader; known: {known}"
        )
    if any(ord(ch) < 0x20 for ch in name):
        raise ValueError(f"resource {value!r} contains a control character")
    return kind, name


def _resource(value: str) -> str:
    parse_resource(value)
    return value


def admitted_under(info: ValidationInfo) -> ContractLimits | None:
    """The limits a document is being admitted under (`parse_contract` passes them as the
    validation context); None: only the model's own bounds, the ceilings of any policy."""
    context = info.context
    limits = context.get("limits") if isinstance(context, dict) else None
    return limits if isinstance(limits, ContractLimits) else None


def _past(text: str) -> PydanticCustomError:
    return PydanticCustomError("limit_exceeded", "{message}", {"message": text})


def check_globs(value: Any, info: ValidationInfo) -> Any:
    """A list of globs within the count and length it is admitted under, checked before
    any item is: a list past them costs its length, not a validation of each glob."""
    limits = admitted_under(info)
    if limits is None or not isinstance(value, list):
        return value
    if len(value) > limits.max_globs:
        key = where("max_globs", limits)
        raise _past(f"at most {limits.max_globs} patterns ({key}), not {len(value)}")
    for index, glob in enumerate(value):
        if isinstance(glob, str) and len(glob) > limits.max_glob_length:
            key = where("max_glob_length", limits)
            raise _past(
                f"pattern {index} is {len(glob)} characters, more than "
                f"{limits.max_glob_length} ({key})"
            )
    return value


def check_resources(value: Any, info: ValidationInfo) -> Any:
    """A list of resources within the count it is admitted under."""
    limits = admitted_under(info)
    if limits is not None and isinstance(value, list) and len(value) > limits.max_resources:
        key = where("max_resources", limits)
        raise _past(f"at most {limits.max_resources} resources ({key}), not {len(value)}")
    return value


RefComponent = Annotated[str, AfterValidator(_refname_component)]
Digest = Annotated[str, AfterValidator(_digest)]
ObjectId = Annotated[str, AfterValidator(_oid)]
Glob = Annotated[str, AfterValidator(_glob)]
Resource = Annotated[str, AfterValidator(_resource)]


class Model(BaseModel):
    """Strict, frozen, camelCase on the wire, unknown fields rejected."""

    model_config = ConfigDict(
        strict=True,
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
    )

    def wire(self) -> dict[str, Any]:
        """The JSON form (camelCase, RFC 3339 times), as written to files and digested."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

    def to_json(self) -> str:
        """The wire form as indented JSON, by pydantic's serializer (the same bytes as
        `json.dumps(wire, indent=2, ensure_ascii=False)`, a test pins it, at a fraction of
        the cost: every held record of a flood writes two of these)."""
        return self.model_dump_json(by_alias=True, exclude_none=True, indent=2)


class Lease(Model):
    holder: Annotated[str, Field(min_length=1, max_length=HOLDER_CHARS)]
    expires_at: AwareDatetime


GLOBS_NOTE = (
    f"At most the policy's limits.max_globs patterns (default {DEFAULT_LIMITS.max_globs:,}), "
    f"each of at most limits.max_glob_length characters (default "
    f"{DEFAULT_LIMITS.max_glob_length:,}); the bounds here are the ceilings of any policy."
)
RESOURCES_NOTE = (
    f"At most the policy's limits.max_resources (default {DEFAULT_LIMITS.max_resources:,})."
)


class OwnershipContract(Model):
    """`coding.workspace.ownership.v1` — who may change what, on which base, under which generation."""

    schema_: Literal["coding.workspace.ownership.v1"] = Field(alias="schema")
    repo: Digest
    task_id: RefComponent
    attempt_id: RefComponent
    base_commit: ObjectId
    ownership_generation: Annotated[int, Field(ge=1, le=JSON_SAFE_INT)]
    paths: Annotated[
        list[Glob],
        Field(min_length=1, max_length=CEILING_LIMITS.max_globs, description=GLOBS_NOTE),
        BeforeValidator(check_globs),
    ]
    deny: Annotated[
        list[Glob],
        Field(max_length=CEILING_LIMITS.max_globs, description=GLOBS_NOTE),
        BeforeValidator(check_globs),
    ] = Field(default_factory=list)
    resources: Annotated[
        list[Resource],
        Field(max_length=CEILING_LIMITS.max_resources, description=RESOURCES_NOTE),
        BeforeValidator(check_resources),
    ] = Field(default_factory=list)
    worktree_id: Annotated[str, Field(min_length=1, max_length=HOLDER_CHARS)] | None = None
    lease: Lease
    max_patch_bytes: Annotated[int, Field(ge=0, le=JSON_SAFE_INT)]
    policy_digest: Digest

    @cached_property
    def digest(self) -> str:
        return contract_digest(self)

    @cached_property
    def _matcher(self) -> PathMatcher:
        return PathMatcher.of(self.paths, self.deny)

    def matcher(self) -> PathMatcher:
        return self._matcher


def contract_digest(contract: OwnershipContract) -> str:
    """SHA-256 over the RFC 8785 canonical JSON of the contract's wire form."""
    return digest_of(contract.wire())


def _render(err: ValidationError) -> list[str]:
    out = []
    for item in err.errors():
        where = ".".join(str(p) for p in item["loc"]) or "(document)"
        msg = item["msg"]
        if item["type"] == "extra_forbidden":
            msg = "unknown field (a v1 reader rejects fields it does not know)"
        out.append(f"{where}: {msg}")
    return out


def parse_contract(
    data: str | bytes, *, limits: ContractLimits = DEFAULT_LIMITS
) -> OwnershipContract:
    """Parse and validate a contract document under `limits` (the policy in force's where
    a contract is admitted, `CEILING_LIMITS` where an admitted one is read back); raises
    ContractError listing every problem, a limit passed naming its key.

    Contracts are immutable, and a flood of submissions usually repeats a few documents
    byte for byte: those are parsed (and digested) once. A document over its byte limit is
    refused before it is parsed, which also bounds what the cache holds.
    """
    raw = data if isinstance(data, bytes) else data.encode("utf-8")
    if len(raw) > limits.contract_bytes:
        message = (
            f"the contract is {len(raw)} bytes, more than the limit of {limits.contract_bytes} "
            f"({where('contract_bytes', limits)})"
        )
        raise ContractError(f"contract is invalid: {message}", [message])
    return _parse_cached(raw, limits)


# Parsed contracts kept, counted by their documents' bytes (a parsed one holds a few times
# that): 256 documents were 64 KiB at the default limit and megabytes under raised ones.
PARSED_BYTES = 4 * 1024 * 1024
_PARSED: Shared[tuple[bytes, ContractLimits], tuple[OwnershipContract, int]] = Shared(
    PARSED_BYTES, lambda v: v[1]
)


def _parse_cached(data: bytes, limits: ContractLimits) -> OwnershipContract:
    found = _PARSED.get((data, limits))
    if found is None:
        found = _PARSED.put((data, limits), (_parse(data, limits), len(data)))
    return found[0]


def _parse(data: bytes, limits: ContractLimits) -> OwnershipContract:
    try:
        return OwnershipContract.model_validate_json(data, context={"limits": limits})
    except ValidationError as err:
        errors = _render(err)
        raise ContractError("contract is invalid: " + "; ".join(errors), errors) from err
