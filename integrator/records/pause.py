"""Pausing new claims: `refs/integrator/pause` and its history.

During an incident (a false block, a bad landing) the coordinator stops new contracts from
being issued with `integrator contract pause --reason …` and lifts that with `contract
resume`. Each pause and resume is a commit on `refs/integrator/pause` whose tree holds
`pause.json` (state, reason, actor, time), so `git log refs/integrator/pause` is the
history. Existing claims keep working: renewals, revocations and landings do not look at
it; everything that makes a claim live (issue, reclaim, expand, reissue) refuses while it
says paused, naming the reason.

A pause moves the claims index (`refs/integrator/claims-index`) in the same transaction.
Every operation that makes a claim live compares-and-swaps the index it read *before*
reading the pause, so one that raced a pause loses its swap, reads the index and the pause
again, and is refused — in remote mode too, where a `verify` cannot be pushed.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Literal

from pydantic import Field, ValidationError

from integrator import refnames
from integrator.docpath import doc
from integrator.documents.contract import Model
from integrator.errors import (
    ClaimConflictError,
    ClaimsPausedError,
    ConfigurationError,
    UsageError,
)
from integrator.limits import ACTOR_CHARS, REASON_CHARS
from integrator.plumbing import transaction
from integrator.plumbing.packs import ObjectBuffer, tree_bytes
from integrator.records.canonical import Canonical, signature

PAUSE_FILE = "pause.json"

PauseName = Literal["paused", "resumed"]


class PauseState(Model):
    """`integrator.pause.v1`: one pause or resume, as `pause.json` holds it."""

    schema_: Literal["integrator.pause.v1"] = Field(default="integrator.pause.v1", alias="schema")
    state: PauseName
    reason: str
    actor: str
    at: datetime

    @property
    def paused(self) -> bool:
        return self.state == "paused"

    def describe(self) -> str:
        verb = "paused" if self.paused else "resumed"
        return f"claims {verb} by {self.actor} at {self.at.isoformat()}: {self.reason}"


def read_pause(canonical: Canonical, oid: str | None = None) -> PauseState | None:
    """The pause document at `oid` (default: the pause ref); None when never paused."""
    oid = oid if oid is not None else canonical.ref(refnames.PAUSE)
    if oid is None:
        return None
    try:
        return PauseState.model_validate_json(canonical.blob_at(oid, PAUSE_FILE))
    except (KeyError, ValidationError) as err:
        # A damaged pause record must not read as "not paused": refuse until repaired.
        raise ConfigurationError(
            f"{refnames.PAUSE} at {oid[:12]} holds no readable {PAUSE_FILE} ({type(err).__name__}); "
            f"repair it by hand (git log {refnames.PAUSE})"
        ) from err


def refuse_if_paused(canonical: Canonical) -> str | None:
    """Raise ClaimsPausedError while claims are paused; else the pause ref's value (for a
    `verify` in the caller's transaction)."""
    if canonical.rolled_back is not None:  # a record forced back on the server
        raise ConfigurationError(canonical.rolled_back)
    oid = canonical.ref(refnames.PAUSE)
    problem = canonical.authority_problem(refnames.PAUSE, oid) if oid is not None else None
    if problem is not None:
        assert oid is not None
        raise ConfigurationError(
            f"{refnames.PAUSE} at {oid[:12]} is not a record a trusted authority key signed "
            f"({problem}): no claim is made live until the coordinator pauses or resumes "
            f'claims again with its key ({doc("security.md")}, "Authority keys")'
        )
    state = read_pause(canonical, oid) if oid is not None else None
    if state is not None and state.paused:
        raise ClaimsPausedError(
            f"new claims are paused ({state.describe()}); existing contracts keep working, "
            "`integrator contract resume` lifts the pause"
        )
    return oid


def history(canonical: Canonical) -> list[tuple[str, PauseState]]:
    """(commit, state) of every pause and resume, newest first."""
    out: list[tuple[str, PauseState]] = []
    oid = canonical.ref(refnames.PAUSE)
    while oid is not None and len(out) < 10_000:
        state = read_pause(canonical, oid)
        assert state is not None
        out.append((oid, state))
        parents = canonical.commit(oid).parent_ids
        oid = str(parents[0]) if parents else None
    return out


def _serial(
    canonical: Canonical, parent: str | None, event: str, now: datetime, objects: ObjectBuffer
) -> str:
    """The next commit of the claims index (an empty tree: a serial), as claims write it."""
    tree = objects.add("tree", b"")
    parents = [bytes.fromhex(parent)] if parent else []
    return canonical.authority_commit(
        objects, refnames.CLAIMS_INDEX, tree, parents, signature(now), event + "\n"
    )


def set_pause(canonical: Canonical, state: PauseName, reason: str, actor: str) -> PauseState:
    """Pause or resume new claims: one commit on the pause ref and one on the claims index,
    in one compare-and-swap transaction. Pausing twice (or resuming when not paused) is
    refused, so the history says what each step changed."""
    if not reason.strip() or len(reason) > REASON_CHARS:
        raise UsageError(f"a {state[:-1]} needs a reason of at most {REASON_CHARS} characters")
    if not actor or len(actor) > ACTOR_CHARS or any(ord(ch) < 0x20 for ch in actor):
        raise UsageError(f"the actor must be one line of at most {ACTOR_CHARS} characters")
    canonical.refresh()
    index = canonical.ref(refnames.CLAIMS_INDEX)
    old = canonical.ref(refnames.PAUSE)
    current = read_pause(canonical, old) if old is not None else None
    paused_now = current is not None and current.paused
    if state == "paused" and paused_now:
        assert current is not None
        raise ClaimConflictError(f"claims are already paused ({current.describe()})")
    if state == "resumed" and not paused_now:
        raise ClaimConflictError("claims are not paused; nothing to resume")
    now = canonical.clock()
    doc = PauseState(state=state, reason=reason, actor=actor, at=now)
    buffer = ObjectBuffer(canonical.repo)
    blob = buffer.add("blob", json.dumps(doc.wire(), indent=2).encode() + b"\n")
    tree = buffer.add("tree", tree_bytes({PAUSE_FILE.encode(): (b"100644", blob)}))
    sig = signature(now)
    verb = "pause" if state == "paused" else "resume"
    message = f"{verb}: new claims {state} by {actor}\n\n{reason}\n"
    parents = [bytes.fromhex(old)] if old else []
    commit = canonical.authority_commit(buffer, refnames.PAUSE, tree, parents, sig, message)
    serial = _serial(canonical, index, f"{verb} claims", now, buffer)
    canonical.record(
        buffer,
        [
            transaction.update(refnames.PAUSE, commit, old),
            transaction.update(refnames.CLAIMS_INDEX, serial, index),
        ],
    )
    return doc
