"""The submission document (`integrator.submission.v1`): one candidate handed to the daemon.

A submission names the candidate, carries the ownership contract as the coordinator issued
it, says who handed it in (self-reported: for people, never for authority) and, for agents
that do not share the canonical object store, names a git bundle beside it.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, AwareDatetime, Field

from integrator.documents.contract import Model, ObjectId
from integrator.documents.envelope import BUNDLE_NAME_RE, SUBMISSION_SCHEMA
from integrator.limits import (
    MAX_ID_CHARS,
    SIGNATURE_FIELD_CHARS,
    SUBMITTER_HOST_CHARS,
    SUBMITTER_REPO_CHARS,
    SUBMITTER_USER_CHARS,
)

__all__ = ["SUBMISSION_SCHEMA", "Submission", "SubmissionSignature", "Submitter"]


def _bundle_name(value: str) -> str:
    if not BUNDLE_NAME_RE.match(value):
        raise ValueError(f"{value!r} is not a plain file name ending in .bundle")
    return value


class Submitter(Model):
    """Who handed the candidate in. Self-reported: it is for people, never for authority."""

    user: Annotated[str, Field(min_length=1, max_length=SUBMITTER_USER_CHARS)]
    host: Annotated[str, Field(min_length=1, max_length=SUBMITTER_HOST_CHARS)]
    pid: Annotated[int, Field(ge=0)] | None = None
    repo: Annotated[str, Field(max_length=SUBMITTER_REPO_CHARS)] | None = None


class SubmissionSignature(Model):
    """The attempt key's signature over one submission (documents/attempt_key.py): which
    submission id it was made for, the public key that made it, and the signature."""

    submission: Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS)]
    key: Annotated[str, Field(min_length=1, max_length=SIGNATURE_FIELD_CHARS)]
    value: Annotated[str, Field(min_length=1, max_length=SIGNATURE_FIELD_CHARS)]


class Submission(Model):
    """`integrator.submission.v1`: one candidate handed to the daemon through the spool.

    `contract` is carried as the JSON object the coordinator issued; the gate validates it,
    and fences an invalid one with CONTRACT_INVALID (a malformed *envelope* is rejected).
    """

    schema_: Literal["integrator.submission.v1"] = Field(alias="schema")
    contract: dict[str, Any] = Field(
        description="The ownership contract (coding.workspace.ownership.v1) as issued; "
        "see ownership-contract.v1.schema.json. Validated by the gate, not by the spool."
    )
    candidate: ObjectId
    submitter: Submitter
    submitted_at: AwareDatetime
    bundle: Annotated[str, AfterValidator(_bundle_name)] | None = Field(
        default=None,
        description="A git bundle in the submission folder holding the candidate, for agents "
        "that do not share the canonical object store.",
    )
    signature: SubmissionSignature | None = Field(
        default=None,
        description="The signature by the attempt key issued with the contract over (task, "
        "attempt, generation, contract digest, submission id, candidate). Required when the "
        "claim recorded a key for the contract.",
    )
    urgent: bool | None = Field(
        default=None,
        description="The priority lane: the daemon lands it before the other submissions of "
        "its drain (integrator submit --urgent).",
    )

    def contract_bytes(self) -> bytes:
        """The contract as the engine reads it (its digest is over the parsed form)."""
        return json.dumps(self.contract, separators=(",", ":"), ensure_ascii=False).encode()
