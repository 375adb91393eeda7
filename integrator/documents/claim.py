"""The claim document (`integrator.claim.v1`): the state a claim ref's commit records.

Each commit of `refs/integrator/claims/<taskId>` holds `contract.json` (the live contract)
and `claim.json` (this document: state, generation, lease, and what consumed or revoked
it). `ClaimView` is its parsed form, the input the gate's live checks decide on.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Literal, NamedTuple

from integrator import jsontext
from integrator.errors import ConfigurationError

if TYPE_CHECKING:
    from integrator.documents.contract import OwnershipContract

CLAIM_SCHEMA = "integrator.claim.v1"
ClaimStateName = Literal["live", "revoked", "consumed"]
_STATES: tuple[ClaimStateName, ...] = ("live", "revoked", "consumed")


class Grant(NamedTuple):
    """Paths an expansion added at `generation`, and the workspace head it inspected: edits
    to those paths must build on that head (written after the grant, not before)."""

    generation: int
    paths: tuple[str, ...]
    head: str | None = None

    def wire(self) -> dict[str, object]:
        return {"generation": self.generation, "paths": list(self.paths), "head": self.head}


class ClaimView(NamedTuple):
    """The live claim as the claim ref holds it."""

    task_id: str
    generation: int
    attempt_id: str
    contract_digest: str
    state: ClaimStateName
    lease_expires_at: datetime
    policy_digest: str
    staging_commit: str | None = None
    candidate: str | None = None
    reason: str | None = None
    grants: tuple[Grant, ...] = ()
    event: str = ""  # what made this claim commit: issue, renew, consume, revoke, …
    # The public half of the key issued with this contract (ed25519:…): submissions under
    # it must carry its signature. None on a claim written before attempt keys existed.
    attempt_key: str | None = None


# The event of a revocation `policy set` made. Only integrator writes it: an agent's own
# release or a coordinator's revoke records `revoke`, whatever reason text they chose.
POLICY_REVOKE_EVENT = "policy-revoke"


def claim_state(
    contract: OwnershipContract,
    *,
    state: ClaimStateName,
    lease_expires_at: datetime,
    event: str,
    staging_commit: str | None = None,
    candidate: str | None = None,
    reason: str | None = None,
    grants: Sequence[Grant] = (),
    attempt_key: str | None = None,
) -> dict[str, object]:
    """The `claim.json` document of one claim event (`grants` and `attempt_key` carried
    from event to event while the contract stays the same)."""
    doc: dict[str, object] = {
        "schema": CLAIM_SCHEMA,
        "event": event,
        "taskId": contract.task_id,
        "attemptId": contract.attempt_id,
        "generation": contract.ownership_generation,
        "contractDigest": contract.digest,
        "policyDigest": contract.policy_digest,
        "state": state,
        "leaseExpiresAt": lease_expires_at.isoformat(),
    }
    if staging_commit:
        doc["stagingCommit"] = staging_commit
    if candidate:
        doc["candidate"] = candidate
    if reason:
        doc["reason"] = reason
    if grants:
        doc["grants"] = [g.wire() for g in grants]
    if attempt_key:
        doc["attemptKey"] = attempt_key
    return doc


def parse_claim_state(data: bytes) -> dict[str, object]:
    """The `claim.json` document; ConfigurationError when it is not one."""
    try:
        doc = jsontext.loads(data)
    except ValueError as err:
        raise ConfigurationError(f"claim commit holds no JSON claim.json: {err}") from err
    if not isinstance(doc, dict) or doc.get("schema") != CLAIM_SCHEMA:
        raise ConfigurationError(f"claim commit does not hold an {CLAIM_SCHEMA} document")
    return doc


def view_from_state(doc: dict[str, object]) -> ClaimView:
    """The `ClaimView` of a parsed `claim.json`; ConfigurationError names a bad field."""

    def text(key: str) -> str:
        value = doc.get(key)
        if not isinstance(value, str):
            raise ConfigurationError(f"claim.json: {key} is not a string")
        return value

    def optional(key: str) -> str | None:
        value = doc.get(key)
        return value if isinstance(value, str) else None

    generation = doc.get("generation")
    if type(generation) is not int:
        raise ConfigurationError("claim.json: generation is not an integer")
    state = text("state")
    if state not in _STATES:
        raise ConfigurationError(f"claim state {state!r} is not live, revoked or consumed")
    try:
        expires = datetime.fromisoformat(text("leaseExpiresAt"))
    except ValueError as err:
        raise ConfigurationError("claim.json: leaseExpiresAt is not an RFC 3339 time") from err
    return ClaimView(
        task_id=text("taskId"),
        generation=generation,
        attempt_id=text("attemptId"),
        contract_digest=text("contractDigest"),
        state=state,
        lease_expires_at=expires,
        policy_digest=text("policyDigest"),
        staging_commit=optional("stagingCommit"),
        candidate=optional("candidate"),
        reason=optional("reason"),
        grants=_grants(doc.get("grants", [])),
        event=optional("event") or "",
        attempt_key=optional("attemptKey"),
    )


def _grants(value: object) -> tuple[Grant, ...]:
    if not isinstance(value, list):
        raise ConfigurationError("claim.json: grants is not a list")
    out = []
    for item in value:
        if not isinstance(item, dict):
            raise ConfigurationError("claim.json: a grant is not an object")
        generation, globs, head = item.get("generation"), item.get("paths"), item.get("head")
        if type(generation) is not int or not isinstance(globs, list):
            raise ConfigurationError("claim.json: a grant lacks its generation or paths")
        if not all(isinstance(g, str) for g in globs) or not (
            head is None or isinstance(head, str)
        ):
            raise ConfigurationError("claim.json: a grant's paths or head are not strings")
        out.append(Grant(generation, tuple(globs), head))
    return tuple(out)


class Claim:
    """A claim ref's commit (`oid`): the live contract and the claim's state."""

    __slots__ = ("contract", "oid", "view")

    def __init__(self, oid: str, view: ClaimView, contract: OwnershipContract) -> None:
        self.oid = oid
        self.view = view
        self.contract = contract
