"""Queue controls in git: `refs/integrator/queue-control/<target>`.

A chain of commits, each holding `control.json` (paused or running, the reason, who, when),
so `git log` of the ref is the queue's pause history. Every daemon reads it before it
claims a batch (in remote mode after fetching, with the rest of `refs/integrator/`), and
the engine reads it again before it lands: a paused queue keeps its submissions waiting.
"""

from __future__ import annotations

from datetime import datetime

import pygit2
from pydantic import ValidationError

from integrator import refnames
from integrator.documents.promotion import QueueControl
from integrator.errors import ConfigurationError, UsageError
from integrator.limits import ACTOR_CHARS, RECORD_TEXT_CHARS
from integrator.plumbing import transaction
from integrator.plumbing.packs import ObjectBuffer, tree_bytes
from integrator.records.canonical import SIGNATURE_EMAIL, SIGNATURE_NAME, Canonical

CONTROL_FILE = "control.json"


def control_ref(target: str) -> str:
    return f"{refnames.QUEUE_CONTROL}{target}"


def read_control(canonical: Canonical) -> QueueControl | None:
    """The queue's control as its ref holds it now (None: never paused)."""
    ref = control_ref(canonical.target)
    oid = canonical.ref(ref)
    if oid is None:
        return None
    problem = canonical.authority_problem(ref, oid)
    if problem is not None:  # a control nobody trusted wrote: paused, as a damaged one
        return QueueControl(
            target=canonical.target,
            paused=True,
            reason=f"{ref} at {oid[:12]} is not a record a trusted authority key signed "
            f"({problem}); pause or resume with the key to replace it",
            actor="integrator",
            at=canonical.clock(),
        )
    try:
        return QueueControl.model_validate_json(canonical.blob_at(oid, CONTROL_FILE))
    except (KeyError, ValidationError, pygit2.GitError, ConfigurationError):
        # A damaged control reads as paused: landing past a pause nobody can read is the
        # unsafe side.
        return QueueControl(
            target=canonical.target,
            paused=True,
            reason=f"{control_ref(canonical.target)} holds no readable control.json",
            actor="integrator",
            at=canonical.clock(),
        )


def paused(canonical: Canonical) -> QueueControl | None:
    """The control when landings are paused, else None."""
    control = read_control(canonical)
    return control if control is not None and control.paused else None


def set_control(
    canonical: Canonical, *, paused: bool, reason: str | None, actor: str, now: datetime
) -> QueueControl:
    """Pause or resume landings on the target (one compare-and-swap on the control ref)."""
    if reason is not None and len(reason) > RECORD_TEXT_CHARS:
        raise UsageError(f"the reason is longer than {RECORD_TEXT_CHARS} characters")
    if not actor or len(actor) > ACTOR_CHARS or any(ord(ch) < 0x20 for ch in actor):
        raise UsageError(f"the actor must be one line of at most {ACTOR_CHARS} characters")
    canonical.refresh()
    ref = control_ref(canonical.target)
    old = canonical.ref(ref)
    control = QueueControl(
        target=canonical.target, paused=paused, reason=reason, actor=actor, at=now
    )
    buffer = ObjectBuffer(canonical.repo)
    blob = buffer.add("blob", control.to_json().encode() + b"\n")
    tree = buffer.add("tree", tree_bytes({CONTROL_FILE.encode(): (b"100644", blob)}))
    sig = pygit2.Signature(SIGNATURE_NAME, SIGNATURE_EMAIL, int(now.timestamp()), 0)
    word = "pause" if paused else "resume"
    message = f"{word} {canonical.target}: {reason or '-'}\n\nIntegrator-Actor: {actor}\n"
    parents = [bytes.fromhex(old)] if old else []
    commit = canonical.authority_commit(buffer, ref, tree, parents, sig, message)
    canonical.record(buffer, [transaction.update(ref, commit, old)])
    return control


def control_history(canonical: Canonical, limit: int = 50) -> list[QueueControl]:
    """The control's changes, newest first."""
    out: list[QueueControl] = []
    oid = canonical.ref(control_ref(canonical.target))
    while oid and len(out) < limit:
        try:
            out.append(QueueControl.model_validate_json(canonical.blob_at(oid, CONTROL_FILE)))
        except (KeyError, ValidationError):
            break
        parents = canonical.commit(oid).parent_ids
        oid = str(parents[0]) if parents else None
    return out
