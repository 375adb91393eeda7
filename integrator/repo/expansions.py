"""Expansion requests (`integrator.expansion.v1`) and the record of those not granted.

`Claims.expand` grants a request by issuing generation + 1 of the claim. One it cannot grant
(the claim moved on, or another live claim holds the paths) leaves the claim untouched and
is recorded on its own chain, `refs/integrator/expansions/<taskId>/<requestId>`: each commit
holds `request.json` and `expansion.json` (pending, granted or dismissed, and why), so the
coordinator finds it (`integrator contract list`, `integrator review list`) and `git log`
of the ref is its history. These refs take no part in authorization.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Literal

import structlog
from pydantic import Field, ValidationError

from integrator.documents.contract import (
    DIGEST_RE,
    JSON_SAFE_INT,
    Digest,
    Glob,
    Model,
    RefComponent,
    Resource,
)
from integrator.documents.digests import digest_of
from integrator.errors import ConfigurationError
from integrator.repo import git
from integrator.repo.canonical import Canonical, signature
from integrator.repo.packs import ObjectBuffer, commit_bytes, flush_loose, tree_bytes

log = structlog.get_logger("integrator.expansions")

EXPANSIONS_PREFIX = "refs/integrator/expansions/"


# The pattern is in the JSON Schema too, so an agent in any language can check its request;
# the validator gives a pydantic reader the clearer message.
RequestDigest = Annotated[Digest, Field(json_schema_extra={"pattern": DIGEST_RE.pattern})]


class ExpansionRequest(Model):
    """The seed's expansion request (`integrator.expansion.v1`).

    Sent by an agent that must touch an undeclared path *before* writing it: the contract
    it holds (digest, generation), digests of its current tree and diff, and what to add.
    """

    schema_: Literal["integrator.expansion.v1"] = Field(alias="schema")
    task_id: RefComponent
    contract_digest: RequestDigest
    expected_generation: Annotated[int, Field(ge=1, le=JSON_SAFE_INT)]
    tree_digest: RequestDigest
    diff_digest: RequestDigest
    add_paths: list[Glob] = Field(default_factory=list)
    add_resources: list[Resource] = Field(default_factory=list)

    @property
    def request_id(self) -> str:
        """16 hex digits of the request's canonical digest: the same request, the same id."""
        return digest_of(self.wire()).removeprefix("sha256:")[:16]


ExpansionState = Literal["pending", "granted", "dismissed"]


class ExpansionRecord(Model):
    """`expansion.json`: one event (refuse, grant, dismiss) of a recorded expansion request."""

    schema_: Literal["integrator.expansion-record.v1"] = Field(
        default="integrator.expansion-record.v1", alias="schema"
    )
    task_id: str
    request_id: str
    state: ExpansionState
    event: Literal["refuse", "grant", "dismiss"]
    at: datetime
    reason: str
    live_generation: int | None = None
    live_contract_digest: str | None = None
    live_state: str | None = None
    conflicts_with: list[str] = Field(default_factory=list)


@dataclass(frozen=True)
class ExpansionEntry:
    """A recorded expansion request: its ref, the newest record and the request itself."""

    ref: str
    commit: str
    record: ExpansionRecord
    request: ExpansionRequest

    def summary(self) -> dict[str, object]:
        """The JSON form `contract list`, `contract show` and `review` print."""
        return {
            "requestId": self.record.request_id,
            "taskId": self.record.task_id,
            "state": self.record.state,
            "at": self.record.at.isoformat(),
            "reason": self.record.reason,
            "expectedGeneration": self.request.expected_generation,
            "liveGeneration": self.record.live_generation,
            "addPaths": list(self.request.add_paths),
            "addResources": list(self.request.add_resources),
            "conflictsWith": list(self.record.conflicts_with),
            "ref": self.ref,
            "commit": self.commit,
        }

    def describe(self) -> str:
        """One line for people."""
        added = ", ".join([*self.request.add_paths, *self.request.add_resources]) or "nothing"
        return (
            f"{self.record.request_id}  {self.record.task_id:<20} {self.record.state:<9} "
            f"adds {added}: {self.record.reason}"
        )


def expansion_ref(task_id: str, request_id: str) -> str:
    return f"{EXPANSIONS_PREFIX}{task_id}/{request_id}"


def write_expansion_commit(
    canonical: Canonical, request: ExpansionRequest, record: ExpansionRecord, parent: str | None
) -> str:
    """Write (objects only, no ref) the commit holding `request.json` and `expansion.json`."""
    buffer = ObjectBuffer(canonical.repo)
    files = {
        b"request.json": request.to_json().encode() + b"\n",
        b"expansion.json": record.to_json().encode() + b"\n",
    }
    tree = buffer.add(
        "tree",
        tree_bytes({name: (b"100644", buffer.add("blob", data)) for name, data in files.items()}),
    )
    message = (
        f"{record.event}: expansion {record.request_id} of {record.task_id} "
        f"({record.state})\n\n{record.reason}\n"
    )
    sig = signature(record.at)
    parents = [bytes.fromhex(parent)] if parent else []
    commit = buffer.add("commit", commit_bytes(tree, parents, sig, sig, message)).hex()
    flush_loose(buffer)
    return commit


def expansions(
    canonical: Canonical, task_id: str | None = None, *, pending_only: bool = False
) -> list[ExpansionEntry]:
    """Recorded expansion requests (of one task), oldest first; a damaged one is logged."""
    prefix = EXPANSIONS_PREFIX if task_id is None else f"{EXPANSIONS_PREFIX}{task_id}/"
    out = []
    for ref, oid in git.refs_under(canonical.repo, prefix).items():
        try:
            record = ExpansionRecord.model_validate_json(canonical.blob_at(oid, "expansion.json"))
            request = ExpansionRequest.model_validate_json(canonical.blob_at(oid, "request.json"))
        except (KeyError, ConfigurationError, ValidationError) as err:
            log.warning("expansion.unreadable", ref=ref, error=str(err))
            continue
        if not pending_only or record.state == "pending":
            out.append(ExpansionEntry(ref, oid, record, request))
    return sorted(out, key=lambda e: (e.record.at, e.ref))


def find_expansion(canonical: Canonical, request_id: str) -> ExpansionEntry | None:
    for entry in expansions(canonical):
        if entry.record.request_id == request_id:
            return entry
    return None
