"""The integration policy: resource rules, shared paths, enforcement modes, merge options.

A policy is a TOML document (`integrator policy init` prints the default). In a canonical
repository it lives under `refs/integrator/policy` with a generation number; the policy
digest, which every contract names, covers both the document and its generation.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cached_property
from importlib import resources as importlib_resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.config import JsonDict
from pydantic_core import PydanticCustomError

from integrator import limits as fixed
from integrator import paths
from integrator.documents.bounds import DEFAULT_LIMITS, KEYS, ContractLimits
from integrator.documents.categories import Category
from integrator.documents.contract import parse_resource
from integrator.documents.digests import digest_of
from integrator.documents.expansion import ExpansionPolicy
from integrator.errors import ConfigurationError
from integrator.limits import CEILINGS, POLICY_BYTES

POLICY_SCHEMA = "integrator.policy.v1"


Mode = Literal["enforce", "observe"]


def _glob(value: str) -> str:
    problem = paths.glob_problem(value)
    if problem:
        raise ValueError(f"pattern {value!r}: {problem}")
    return value


def _resource_template(value: str) -> str:
    parse_resource(value.replace("{path}", "x"))
    return value


def _resource(value: str) -> str:
    parse_resource(value)
    return value


PolicyGlob = Annotated[str, AfterValidator(_glob)]


class _Section(BaseModel):
    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")


class Integration(_Section):
    target_follows_queue: bool = True
    resource_conflict: Literal["review", "fence"] = "review"
    queue_retries: Annotated[int, Field(ge=0, le=100)] = 16
    rename_limit: Annotated[int, Field(ge=0)] = 1000


class Enforcement(_Section):
    migrations: Mode = "enforce"
    schemas: Mode = "enforce"
    codegen: Mode = "enforce"
    ci: Mode = "enforce"
    source: Mode = "enforce"


class Categories(_Section):
    migrations: list[PolicyGlob] = Field(default_factory=list)
    schemas: list[PolicyGlob] = Field(default_factory=list)
    codegen: list[PolicyGlob] = Field(default_factory=list)
    ci: list[PolicyGlob] = Field(default_factory=list)


class ResourceRule(_Section):
    paths: Annotated[list[PolicyGlob], Field(min_length=1)]
    resource: Annotated[str, AfterValidator(_resource_template)]
    unknown: bool = False


class Shared(_Section):
    resources: list[Annotated[str, AfterValidator(_resource)]] = Field(default_factory=list)
    paths: list[PolicyGlob] = Field(default_factory=list)


class WriteSetRule(_Section):
    inputs: Annotated[list[PolicyGlob], Field(min_length=1)]
    outputs: Annotated[list[PolicyGlob], Field(min_length=1)]


class Planner(_Section):
    repo_wide: list[PolicyGlob] = Field(default_factory=list)


Command = (
    Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)]
    | (Annotated[str, Field(min_length=1)])
)


class ValidationScope(_Section):
    """`[[validation.scope]]`: a part of the tree with a suite of its own. A landing belongs
    to every scope its diff touches; a path in no scope belongs to every scope."""

    # A letter first, at most 32 characters: never mistaken for a head in a ref name.
    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,31}$")]
    paths: Annotated[list[PolicyGlob], Field(min_length=1)]
    command: Command | None = None  # default: [validation].command


class Validation(_Section):
    """`[validation]`: what proves a queue head builds before the target is promoted to it
    (docs/validation.md). With this section the target no longer follows the queue."""

    mode: Literal["command", "external"] = "command"
    # An argv list, or a string run with `sh -c`, in a clean checkout of the head's tree.
    command: (
        Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)]
        | (Annotated[str, Field(min_length=1)])
        | None
    ) = None
    # Seconds one run may take (external: how long to wait for a report) before it fails.
    timeout: Annotated[float, Field(gt=0, le=7 * 24 * 3600)] = 1800.0
    # A failure is run again this often before it counts; every attempt is recorded.
    retries: Annotated[int, Field(ge=0, le=10)] = 0
    # The newest queue head covering at most this many unpromoted landings is validated.
    max_batch: Annotated[int, Field(ge=1, le=1024)] = 8
    # Queue heads validated at once (bisection points, or the next batches speculatively).
    concurrency: Annotated[int, Field(ge=1, le=64)] = 1
    # A failed run is rerun this often on the same tree; a pass on rerun is flaky (recorded,
    # counted) and ejects nothing.
    flaky_reruns: Annotated[int, Field(ge=0, le=10)] = 0
    # The window (landings one validation covers) grows after passes and halves after a
    # failure, between 1 and max_batch.
    adaptive: bool = False
    # A digest of what the suite runs with (compilers, images): part of the result cache's key.
    toolchain: Annotated[str, Field(max_length=256)] | None = None
    # Command runs at once over every scope (default: concurrency × the number of scopes).
    budget: Annotated[int, Field(ge=1, le=256)] | None = None
    # Seconds a batch smaller than its window waits for more landings before it is
    # validated (counted from its oldest landing); 0: it starts at once. Never a bisection.
    linger: Annotated[float, Field(ge=0, le=24 * 3600)] = 0.0
    # Seconds between two `validation.running` events of one run (the promoter's log).
    heartbeat: Annotated[float, Field(ge=0.1, le=24 * 3600)] = 30.0
    scope: Annotated[list[ValidationScope], Field(max_length=64)] = Field(default_factory=list)

    @model_validator(mode="after")
    def _needs_a_command(self) -> Validation:
        if self.mode == "command" and self.command is None:
            raise ValueError('mode "command" needs a command (an argv list or a string)')
        if self.mode == "external" and self.command is not None:
            raise ValueError('mode "external" runs no command: CI reports results instead')
        if self.scope and self.mode != "command":
            raise ValueError('[[validation.scope]] needs mode "command"')
        names = [s.name for s in self.scope]
        if len(set(names)) != len(names):
            raise ValueError("two [[validation.scope]] tables share a name")
        return self

    def command_of(self, scope: str | None) -> Command | None:
        """The command a scope runs (the section's own without a scope of its own)."""
        for item in self.scope:
            if item.name == scope and item.command is not None:
                return item.command
        return self.command


# Why each ceiling is where it is: what a higher value would make false.
_CEILING_REASONS = {
    "contract_bytes": "a contract as `contract issue` writes it must fit a submission "
    f"(SUBMISSION_BYTES, {fixed.SUBMISSION_BYTES} bytes, which the daemon reads before "
    "any policy)",
    "max_globs": "a contract naming that many globs must still fit a submission",
    "max_resources": "a contract naming that many resources must still fit a submission",
    "max_glob_length": "a glob of the longest path git checks out (4,096 bytes), "
    "its wildcards escaped, is the longest one that names anything",
    "expansion_bytes": "a request may add at most what a contract holds",
}


def _refused(text: str) -> PydanticCustomError:
    return PydanticCustomError("limits", "{message}", {"message": text})


_FLOORS = {"contract_bytes": 1024, "expansion_bytes": 1024, "max_globs": 1, "max_glob_length": 1}


def _limit(key: str, what: str) -> Any:
    """A `[limits]` field: its default, and its floor and ceiling in the JSON Schema (the
    validator below refuses past them, saying why)."""
    bounds: JsonDict = {"minimum": _FLOORS.get(key, 0), "maximum": CEILINGS[key]}
    return Field(default=getattr(DEFAULT_LIMITS, key), description=what, json_schema_extra=bounds)


class Limits(_Section):
    """`[limits]`: the limits contracts and expansion requests are admitted under, each
    up to its ceiling (docs/security.md). Every other limit is fixed."""

    contract_bytes: int = _limit("contract_bytes", "Bytes of one contract document.")
    max_globs: int = _limit(
        "max_globs", "Globs in `paths`, and in `deny`, of one contract; an expansion's addPaths."
    )
    max_resources: int = _limit(
        "max_resources", "`resources` of one contract; an expansion's addResources."
    )
    max_glob_length: int = _limit("max_glob_length", "Characters in one glob.")
    expansion_bytes: int = _limit("expansion_bytes", "Bytes of one expansion request document.")

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        for key in data:
            if key in KEYS:
                continue
            if isinstance(key, str) and isinstance(getattr(fixed, key.upper(), None), int):
                raise _refused(
                    f"{key} is fixed: no policy changes it (docs/security.md says why); "
                    f"[limits] sets {', '.join(KEYS)}"
                )
            raise _refused(f"unknown key {key!r}; [limits] sets {', '.join(KEYS)}")
        return data

    @model_validator(mode="after")
    def _within_ceilings(self) -> Limits:
        for key in KEYS:
            value = getattr(self, key)
            floor = _FLOORS.get(key, 0)
            if value < floor:
                raise _refused(f"limits.{key} = {value} is below its floor of {floor}")
            if value > CEILINGS[key]:
                raise _refused(
                    f"limits.{key} = {value} is above its ceiling of {CEILINGS[key]}: "
                    f"{_CEILING_REASONS[key]}"
                )
        return self

    def contract_limits(self) -> ContractLimits:
        return ContractLimits(**{key: getattr(self, key) for key in KEYS})


class Policy(_Section):
    """The policy document (`integrator.policy.v1`, written as TOML)."""

    version: Literal[1] = 1
    integration: Integration = Field(default_factory=Integration)
    enforcement: Enforcement = Field(default_factory=Enforcement)
    categories: Categories = Field(default_factory=Categories)
    resource: list[ResourceRule] = Field(default_factory=list)
    shared: Shared = Field(default_factory=Shared)
    writeset: list[WriteSetRule] = Field(default_factory=list)
    planner: Planner = Field(default_factory=Planner)
    validation: Validation | None = None
    expansion: ExpansionPolicy = Field(default_factory=ExpansionPolicy)
    limits: Limits = Field(default_factory=Limits)

    @model_validator(mode="before")
    @classmethod
    def _validated_target_waits(cls, data: Any) -> Any:
        """With `[validation]` the target is moved by promotion only: `target_follows_queue`
        defaults to false, and an explicit true is refused (it would move the target to
        heads nobody validated)."""
        if not isinstance(data, dict) or data.get("validation") is None:
            return data
        integration = data.get("integration", {})
        if not isinstance(integration, dict):
            return data
        if integration.get("target_follows_queue") is True:
            raise ValueError(
                "integration.target_follows_queue = true contradicts [validation]: the target "
                "would move with every landing, before any validation; remove the line (with "
                "a [validation] section it defaults to false, and the promoter moves the target)"
            )
        return {**data, "integration": {**integration, "target_follows_queue": False}}

    @cached_property
    def contract_limits(self) -> ContractLimits:
        """The limits contracts are admitted under with this policy in force."""
        return self.limits.contract_limits()

    def mode_for(self, category: Category) -> Mode:
        if category is Category.SOURCE:
            return self.enforcement.source
        mode: Mode = getattr(self.enforcement, category.value)
        return mode

    @cached_property
    def shared_paths(self) -> paths.PathMatcher:
        return paths.PathMatcher.of(self.shared.paths)

    @cached_property
    def _category_matchers(self) -> list[tuple[Category, paths.PathMatcher]]:
        return [
            (Category.MIGRATIONS, paths.PathMatcher.of(self.categories.migrations)),
            (Category.SCHEMAS, paths.PathMatcher.of(self.categories.schemas)),
            (Category.CODEGEN, paths.PathMatcher.of(self.categories.codegen)),
            (Category.CI, paths.PathMatcher.of(self.categories.ci)),
        ]

    def category_of_path(self, path: str) -> Category:
        for category, matcher in self._category_matchers:
            if matcher.covers(path):
                return category
        return Category.SOURCE

    @cached_property
    def resource_matchers(self) -> list[tuple[ResourceRule, paths.PathMatcher]]:
        return [(rule, paths.PathMatcher.of(rule.paths)) for rule in self.resource]


def category_of_resource(resource: str) -> Category:
    kind = resource.partition(":")[0]
    return {
        "migration-slot": Category.MIGRATIONS,
        "api": Category.SCHEMAS,
        "schema": Category.SCHEMAS,
        "codegen": Category.CODEGEN,
        "ci": Category.CI,
    }.get(kind, Category.SOURCE)


def default_policy_text() -> str:
    return (importlib_resources.files("integrator.documents") / "default_policy.toml").read_text(
        "utf-8"
    )


def parse_policy(text: str, *, source: str = "policy") -> Policy:
    """Parse a TOML policy; raises ConfigurationError naming every problem."""
    if len(text) > POLICY_BYTES:
        raise ConfigurationError(f"{source}: more than the limit of {POLICY_BYTES} characters")
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ConfigurationError(f"{source}: not valid TOML: {err}") from err
    try:
        return Policy.model_validate(data)
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(document)'}: {e['msg']}"
            for e in err.errors()
        )
        raise ConfigurationError(f"{source}: invalid policy: {problems}") from err


def read_policy_file(path: Path) -> tuple[Policy, str]:
    """A policy file and its text; ConfigurationError when it cannot be read, is not UTF-8,
    is too long (checked before it is all read: a path may name a device) or is invalid."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(4 * POLICY_BYTES + 1)  # POLICY_BYTES characters, 4 bytes each
    except OSError as err:
        raise ConfigurationError(f"cannot read policy {path}: {err.strerror or err}") from err
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigurationError(f"policy {path} is not UTF-8 text ({err.reason})") from err
    return parse_policy(text, source=str(path)), text


def load_policy_file(path: Path) -> Policy:
    return read_policy_file(path)[0]


def default_policy() -> Policy:
    return parse_policy(default_policy_text(), source="default policy")


@dataclass(frozen=True)
class PolicyState:
    """A policy with its generation, as read from `refs/integrator/policy` (or a file)."""

    policy: Policy
    generation: int
    text: str

    @cached_property
    def digest(self) -> str:
        return policy_digest(self.policy, self.generation)


_VALIDATION_LATER: dict[str, object] = {
    "flaky_reruns": 0, "adaptive": False, "toolchain": None, "budget": None, "scope": [],
    "linger": 0.0, "heartbeat": 30.0,
}  # fmt: skip


def policy_digest(policy: Policy, generation: int) -> str:
    """`sha256:` over RFC 8785 JSON of the policy and its generation."""
    document = policy.model_dump(mode="json")
    if document.get("validation") is None:
        document.pop("validation", None)  # policies without it keep the digest they had
    else:
        for key, default in _VALIDATION_LATER.items():  # likewise, before issue Q's keys
            if document["validation"].get(key) == default:
                document["validation"].pop(key, None)
    if not document.get("expansion", {}).get("auto_grant"):
        document.pop("expansion", None)  # likewise
    if not policy.contract_limits.changed():
        document.pop("limits", None)  # the default limits: the digest it had before [limits]
    return digest_of({"schema": POLICY_SCHEMA, "generation": generation, "policy": document})
