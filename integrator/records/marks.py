"""False-positive marks: `refs/integrator/false-positives/<subject>` and their history.

In observe mode the gate records what it would have fenced and lets the candidate through;
a release manager who finds the fence wrong about one marks it (`integrator review
mark-false-positive ID --reason …`). The subject is a landing (its staging commit) or a
held submission (its id). Each mark is a commit whose tree holds `mark.json` — who, when,
why, which codes (none named: all of them) — on its subject's own chain, so `git log` of
the ref is the subject's history of marks, and a withdrawal is one more commit.
`integrator report observe` counts them per category.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Literal

from pydantic import Field, ValidationError

from integrator import refnames
from integrator.documents.contract import Model
from integrator.errors import UsageError
from integrator.limits import ACTOR_CHARS, REASON_CHARS
from integrator.plumbing import git, transaction
from integrator.plumbing.packs import ObjectBuffer, commit_bytes, tree_bytes
from integrator.records.canonical import Canonical, signature

MARK_FILE = "mark.json"


class FalsePositive(Model):
    """`integrator.false-positive.v1`: one mark (or its withdrawal) on one subject."""

    schema_: Literal["integrator.false-positive.v1"] = Field(
        default="integrator.false-positive.v1", alias="schema"
    )
    subject: str  # a staging commit (a landing) or a submission id (held)
    kind: Literal["landing", "held"]
    candidate: str
    task_id: str | None = None
    codes: list[str] = Field(default_factory=list)  # empty: every code the fence found
    actor: str
    at: datetime
    reason: str
    withdrawn: bool = False

    def covers(self, code: str) -> bool:
        return not self.withdrawn and (not self.codes or code in self.codes)


def mark_ref(subject: str) -> str:
    return f"{refnames.FALSE_POSITIVES}{subject}"


def read_marks(canonical: Canonical) -> dict[str, FalsePositive]:
    """The newest mark of every subject (withdrawn ones included, so they read as such)."""
    out: dict[str, FalsePositive] = {}
    for ref, oid in git.refs_under(canonical.repo, refnames.FALSE_POSITIVES).items():
        try:
            mark = FalsePositive.model_validate_json(canonical.blob_at(oid, MARK_FILE))
        except (KeyError, ValidationError):
            continue  # a damaged mark counts as none: it can only make a category look ready
        out[ref.removeprefix(refnames.FALSE_POSITIVES)] = mark
    return out


def history(canonical: Canonical, subject: str) -> list[FalsePositive]:
    """Every mark of `subject`, newest first."""
    out: list[FalsePositive] = []
    oid = canonical.ref(mark_ref(subject))
    while oid is not None and len(out) < 1000:
        out.append(FalsePositive.model_validate_json(canonical.blob_at(oid, MARK_FILE)))
        parents = canonical.commit(oid).parent_ids
        oid = str(parents[0]) if parents else None
    return out


def write_mark(canonical: Canonical, mark: FalsePositive) -> str:
    """Append `mark` to its subject's chain (a compare-and-swap); the new commit."""
    if not mark.reason.strip() or len(mark.reason) > REASON_CHARS:
        raise UsageError(f"a mark needs a --reason of at most {REASON_CHARS} characters")
    if not mark.actor or len(mark.actor) > ACTOR_CHARS or any(ord(ch) < 0x20 for ch in mark.actor):
        raise UsageError(f"the actor must be one line of at most {ACTOR_CHARS} characters")
    canonical.refresh()
    ref = mark_ref(mark.subject)
    old = canonical.ref(ref)
    buffer = ObjectBuffer(canonical.repo)
    blob = buffer.add("blob", json.dumps(mark.wire(), indent=2).encode() + b"\n")
    tree = buffer.add("tree", tree_bytes({MARK_FILE.encode(): (b"100644", blob)}))
    sig = signature(mark.at)
    verb = "withdraw false positive" if mark.withdrawn else "false positive"
    codes = " ".join(mark.codes) or "all codes"
    message = (
        f"{verb}: {mark.kind} {mark.subject} ({codes})\n\n{mark.reason}\n\n"
        f"Integrator-Marked-Candidate: {mark.candidate}\nIntegrator-Actor: {mark.actor}\n"
    )
    parents = [bytes.fromhex(old)] if old else []
    commit = buffer.add("commit", commit_bytes(tree, parents, sig, sig, message)).hex()
    canonical.record(buffer, [transaction.update(ref, commit, old)])
    return commit
