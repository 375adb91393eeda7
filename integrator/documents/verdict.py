"""Verdicts: the decision, every violation with its code, and resource determinations.

The codes are a stable interface (README, "Verdict codes"): CI, review tools and tests read them.
Add codes when needed; never reuse one for another meaning.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from integrator.documents.contract import Model
from integrator.errors import EXIT_FENCED, EXIT_OK, EXIT_REVIEW
from integrator.paths import escape_undecodable, quote_path


class Decision(StrEnum):
    ACCEPTED = "ACCEPTED"
    FENCED = "FENCED"
    REVIEW = "REVIEW"

    @property
    def exit_code(self) -> int:
        return {
            Decision.ACCEPTED: EXIT_OK,
            Decision.FENCED: EXIT_FENCED,
            Decision.REVIEW: EXIT_REVIEW,
        }[self]


class Code(StrEnum):
    CONTRACT_INVALID = "CONTRACT_INVALID"
    REPO_MISMATCH = "REPO_MISMATCH"
    REPO_UNVERIFIED = "REPO_UNVERIFIED"
    CLAIM_MISSING = "CLAIM_MISSING"
    CLAIM_UNVERIFIED = "CLAIM_UNVERIFIED"
    CLAIM_REWRITTEN = "CLAIM_REWRITTEN"
    STALE_GENERATION = "STALE_GENERATION"
    CONTRACT_DIGEST_MISMATCH = "CONTRACT_DIGEST_MISMATCH"
    CLAIM_CONSUMED = "CLAIM_CONSUMED"
    CLAIM_REVOKED = "CLAIM_REVOKED"
    LEASE_EXPIRED = "LEASE_EXPIRED"
    POLICY_CHANGED = "POLICY_CHANGED"
    LEGACY_SUBMISSION = "LEGACY_SUBMISSION"
    CANDIDATE_MISSING = "CANDIDATE_MISSING"
    BASE_MISSING = "BASE_MISSING"
    BASE_NOT_ANCESTOR = "BASE_NOT_ANCESTOR"
    BASE_NOT_ON_QUEUE = "BASE_NOT_ON_QUEUE"
    PATH_NOT_OWNED = "PATH_NOT_OWNED"
    PATH_DENIED = "PATH_DENIED"
    RENAME_NOT_OWNED = "RENAME_NOT_OWNED"
    MODE_NOT_OWNED = "MODE_NOT_OWNED"
    SYMLINK_ESCAPE = "SYMLINK_ESCAPE"
    SUBMODULE_NOT_OWNED = "SUBMODULE_NOT_OWNED"
    CASE_COLLISION = "CASE_COLLISION"
    UNICODE_COLLISION = "UNICODE_COLLISION"
    UNSAFE_PATH = "UNSAFE_PATH"
    PATCH_TOO_LARGE = "PATCH_TOO_LARGE"
    EDIT_BEFORE_GRANT = "EDIT_BEFORE_GRANT"
    RESOURCE_NOT_OWNED = "RESOURCE_NOT_OWNED"
    RESOURCE_UNKNOWN = "RESOURCE_UNKNOWN"
    RESOURCE_CONFLICT = "RESOURCE_CONFLICT"
    MERGE_CONFLICT = "MERGE_CONFLICT"
    REF_MOVED = "REF_MOVED"
    VALIDATION_FAILED = "VALIDATION_FAILED"


# What a violation of each code decides when enforced; everything else fences.
REVIEW_CODES: frozenset[Code] = frozenset(
    {
        Code.BASE_MISSING,
        Code.RESOURCE_UNKNOWN,
        Code.LEGACY_SUBMISSION,
        Code.REPO_UNVERIFIED,
        Code.CLAIM_UNVERIFIED,
    }
)

CODE_SUMMARY: dict[Code, str] = {
    Code.CONTRACT_INVALID: "The contract does not validate under coding.workspace.ownership.v1.",
    Code.REPO_MISMATCH: "The contract was issued for another repository.",
    Code.REPO_UNVERIFIED: "The repository's identity cannot be derived here (shallow clone).",
    Code.CLAIM_MISSING: "No live claim exists for the contract's task.",
    Code.CLAIM_UNVERIFIED: "No claim refs here: the contract's own rules were checked, not "
    "that it is the authorized one.",
    Code.CLAIM_REWRITTEN: "The claim ref moved backwards or sideways on the server.",
    Code.STALE_GENERATION: "A newer ownership generation was issued for the task.",
    Code.CONTRACT_DIGEST_MISMATCH: "The contract differs from the one the claim holds.",
    Code.CLAIM_CONSUMED: "The claim was already consumed by a landing.",
    Code.CLAIM_REVOKED: "The claim was revoked by the coordinator or a policy change.",
    Code.LEASE_EXPIRED: "The claim's lease expired.",
    Code.POLICY_CHANGED: "The policy changed since the contract was issued.",
    Code.LEGACY_SUBMISSION: "A submission without an ownership generation goes to review only.",
    Code.CANDIDATE_MISSING: "The candidate commit is not in the repository.",
    Code.BASE_MISSING: "The base commit is missing (shallow clone or unknown object).",
    Code.BASE_NOT_ANCESTOR: "The base commit is not an ancestor of the candidate.",
    Code.BASE_NOT_ON_QUEUE: "The base commit is not an ancestor of the queue head.",
    Code.PATH_NOT_OWNED: "A changed path is not allowed by the contract.",
    Code.PATH_DENIED: "A changed path is denied by the contract.",
    Code.RENAME_NOT_OWNED: "One end of a rename is not allowed by the contract.",
    Code.MODE_NOT_OWNED: "A mode change on a path the contract does not allow.",
    Code.SYMLINK_ESCAPE: "A symlink points outside the repository or into .git.",
    Code.SUBMODULE_NOT_OWNED: "A submodule change without the path and submodule resource.",
    Code.CASE_COLLISION: "Two paths of the result differ only in case.",
    Code.UNICODE_COLLISION: "Two paths of the result differ only in Unicode normalisation.",
    Code.UNSAFE_PATH: "A path is absolute, escapes, names .git or holds control characters.",
    Code.PATCH_TOO_LARGE: "The change is larger than the contract's maxPatchBytes.",
    Code.EDIT_BEFORE_GRANT: "A granted path was changed before the grant: edit first, claim "
    "afterwards is refused.",
    Code.RESOURCE_NOT_OWNED: "A touched semantic resource is not owned by the contract.",
    Code.RESOURCE_UNKNOWN: "A touched resource's owner cannot be resolved statically.",
    Code.RESOURCE_CONFLICT: "The commits since base touched the same semantic resource.",
    Code.MERGE_CONFLICT: "The candidate does not merge cleanly onto the queue head.",
    Code.REF_MOVED: "A ref moved between the check and the transaction.",
    Code.VALIDATION_FAILED: "The landing passed the fence, but the queue head it made failed "
    "validation: it was ejected from the queue.",
}


class Determination(StrEnum):
    OWNED = "OWNED"
    SHARED = "SHARED"
    UNKNOWN = "UNKNOWN"
    NOT_OWNED = "NOT_OWNED"


def _written(value: object, info: ValidationInfo) -> object:
    """A path as a verdict writes it (`quote_path`): quoted once, where it enters from git;
    a verdict read back from JSON is already written so."""
    return quote_path(value) if isinstance(value, str) and info.mode == "python" else value


def _text(value: object) -> object:
    return escape_undecodable(value) if isinstance(value, str) else value


class Violation(Model):
    code: Code
    path: str | None = None
    resource: str | None = None
    detail: str
    mode: Literal["enforce", "observe"] = "enforce"

    _path = field_validator("path", mode="before")(_written)
    _free_text = field_validator("resource", "detail", mode="before")(_text)

    @property
    def enforced(self) -> bool:
        return self.mode == "enforce"

    @property
    def subject(self) -> str:
        return self.path or self.resource or "-"


class ResourceUse(Model):
    resource: str
    determination: Determination
    paths: list[str] = Field(default_factory=list)

    _resource = field_validator("resource", mode="before")(_text)

    @field_validator("paths", mode="before")
    @classmethod
    def _paths(cls, value: object, info: ValidationInfo) -> object:
        if isinstance(value, list):
            return [_written(p, info) for p in value]
        return value


class Verdict(Model):
    schema_: Literal["integrator.verdict.v1"] = Field(
        default="integrator.verdict.v1", alias="schema"
    )
    decision: Decision
    violations: list[Violation] = Field(default_factory=list)
    resources: list[ResourceUse] = Field(default_factory=list)
    candidate: str | None = None
    base: str | None = None
    task_id: str | None = None
    attempt_id: str | None = None
    generation: int | None = None
    contract_digest: str | None = None
    policy_digest: str | None = None
    changes: int | None = None
    patch_bytes: int | None = None
    tree: str | None = None
    staging_commit: str | None = None
    queue_head: str | None = None
    recovered: bool | None = None
    # True when asked for a static check: the contract's own rules, no live claim read.
    static: bool | None = None

    # A candidate or base named on a command line may hold bytes that are not UTF-8.
    _named = field_validator("candidate", "base", mode="before")(_text)

    @property
    def exit_code(self) -> int:
        return self.decision.exit_code

    @property
    def codes(self) -> list[Code]:
        return [v.code for v in self.violations]


def decide(violations: Iterable[Violation]) -> Decision:
    """FENCED if any enforced violation fences, else REVIEW if any asks for review."""
    decision = Decision.ACCEPTED
    for violation in violations:
        if not violation.enforced:
            continue
        if violation.code in REVIEW_CODES:
            decision = Decision.REVIEW if decision is Decision.ACCEPTED else decision
        else:
            return Decision.FENCED
    return decision
