"""An ownership contract's rules as plain data: what the write guard decides on.

The guard runs before every file write an agent makes, so it reads the contract without the
contract models (pydantic): `ContractRules` holds the fields it decides on, type-checked,
each glob checked as the contract model checks it. The guard then requires the rules'
digest to equal the live claim's `contractDigest`, so a document that passes here but is
not the one the coordinator issued writes nothing. For the same reason the guard reads up
to the ceilings of any policy (`CEILING_LIMITS`), never the policy itself: the live claim
was admitted under the policy in force when it was issued, and a policy change revokes it.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from integrator import jsontext
from integrator.documents.bounds import CEILING_LIMITS, ContractLimits
from integrator.errors import ContractError
from integrator.paths import PathMatcher, glob_problem
from integrator.refnames import refname_problem

CONTRACT_SCHEMA = "coding.workspace.ownership.v1"


class ContractRules:
    """What the guard needs of an ownership contract; `document` is the whole JSON object.

    Immutable; equal when the document and the fields read from it are (`raw` and the
    stated digest aside). A plain class, not a dataclass: the write guard imports this
    module on every hook call, and `dataclasses` brings `inspect` with it."""

    document: dict[str, Any]
    task_id: str
    worktree_id: str | None
    ownership_generation: int
    paths: tuple[str, ...]
    deny: tuple[str, ...]
    raw: bytes
    # The digest its claim states for it (a claim's contract.json): taken as given.
    stated_digest: str | None

    def __init__(
        self,
        document: dict[str, Any],
        task_id: str,
        worktree_id: str | None,
        ownership_generation: int,
        paths: tuple[str, ...],
        deny: tuple[str, ...],
        raw: bytes = b"",
        stated_digest: str | None = None,
    ) -> None:
        values = {
            "document": document,
            "task_id": task_id,
            "worktree_id": worktree_id,
            "ownership_generation": ownership_generation,
            "paths": paths,
            "deny": deny,
            "raw": raw,
            "stated_digest": stated_digest,
        }
        self.__dict__.update(values)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"ContractRules is immutable: cannot set {name}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"ContractRules is immutable: cannot delete {name}")

    def _compared(self) -> tuple[object, ...]:
        return (
            self.document, self.task_id, self.worktree_id, self.ownership_generation,
            self.paths, self.deny,
        )  # fmt: skip

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ContractRules):
            return NotImplemented
        return self._compared() == other._compared()

    __hash__ = None  # type: ignore[assignment]  # the document is a dict

    def __repr__(self) -> str:
        return (
            f"ContractRules(task_id={self.task_id!r}, worktree_id={self.worktree_id!r}, "
            f"ownership_generation={self.ownership_generation!r}, paths={self.paths!r}, "
            f"deny={self.deny!r}, stated_digest={self.stated_digest!r})"
        )

    @cached_property
    def digest(self) -> str:
        """The contract digest, as the contract model computes it over its wire form."""
        if self.stated_digest is not None:
            return self.stated_digest
        from integrator.documents.digests import digest_of  # only when it must be computed

        return digest_of(self.document)

    def same_document(self, other: ContractRules) -> bool:
        """Byte for byte the same document (a worktree's binding and its live claim are
        written from one `to_json`)."""
        return bool(self.raw) and self.raw == other.raw

    @cached_property
    def _matcher(self) -> PathMatcher:
        return PathMatcher.of(self.paths, self.deny)

    def matcher(self) -> PathMatcher:
        return self._matcher

    def wire(self) -> dict[str, Any]:
        return self.document


def _refused(problem: str) -> ContractError:
    return ContractError(f"contract is invalid: {problem}", [problem])


def _globs(
    document: dict[str, Any], key: str, limits: ContractLimits, *, required: bool
) -> tuple[str, ...]:
    value = document.get(key, [] if not required else None)
    most, longest = limits.max_globs, limits.max_glob_length
    if not isinstance(value, list) or (required and not value) or len(value) > most:
        raise _refused(f"{key}: not a list of 1 to {most} patterns")
    for glob in value:
        if not isinstance(glob, str) or len(glob) > longest:
            raise _refused(f"{key}: a pattern is not a string of at most {longest}")
        problem = glob_problem(glob)
        if problem:
            raise _refused(f"{key}: pattern {glob!r}: {problem}")
    return tuple(value)


def rules_from_bytes(
    data: bytes, *, stated_digest: str | None = None, limits: ContractLimits = CEILING_LIMITS
) -> ContractRules:
    """The rules of a contract document; ContractError when it is not one the guard reads.
    `stated_digest`: the digest the claim holding the document states for it."""
    if len(data) > limits.contract_bytes:
        raise _refused(f"the contract is {len(data)} bytes, more than {limits.contract_bytes}")
    try:
        document = jsontext.loads(data)
    except ValueError as err:
        raise _refused(f"not JSON: {err}") from err
    if not isinstance(document, dict) or document.get("schema") != CONTRACT_SCHEMA:
        raise _refused(f"not a {CONTRACT_SCHEMA} document")
    task, worktree = document.get("taskId"), document.get("worktreeId")
    generation = document.get("ownershipGeneration")
    if not isinstance(task, str) or refname_problem(task):
        raise _refused("taskId: not a task id")
    if worktree is not None and (not isinstance(worktree, str) or not worktree):
        raise _refused("worktreeId: not a worktree name")
    if type(generation) is not int or generation < 1:
        raise _refused("ownershipGeneration: not a positive integer")
    return ContractRules(
        document,
        task,
        worktree,
        generation,
        _globs(document, "paths", limits, required=True),
        _globs(document, "deny", limits, required=False),
        data,
        stated_digest,
    )
