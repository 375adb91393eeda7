"""The documents of held candidates: what `review list --json` and `review show --json`
print, and what the review pages' /api/held and /api/held/ID return."""

from __future__ import annotations

from typing import Any

from integrator.records.held import ReviewAction, history
from integrator.review.actions import Held, Review
from integrator.review.changes import FileDiff


def summary_document(h: Held) -> dict[str, Any]:
    """One held candidate as `review list --json` prints it."""
    v = h.verdict
    return {
        "submission": h.sid,
        "folder": h.folder,
        "decision": v.decision.value,
        "codes": list(dict.fromkeys(x.code.value for x in v.violations)),
        "taskId": v.task_id,
        "attemptId": v.attempt_id,
        "generation": v.generation,
        "candidate": h.submission.candidate,
        "submittedAt": h.submission.submitted_at.isoformat(),
        "submitter": h.submission.submitter.wire(),
    }


def show_document(review: Review, held: Held) -> dict[str, Any]:
    """A held candidate with its verdict, history and diff, as `review show --json` prints it."""
    base, files = review.diff(held)
    records = history(review.canonical, held.sid)
    return show_document_of(held, base, files, records)


def show_document_of(
    held: Held, base: str | None, files: list[FileDiff], records: list[tuple[str, ReviewAction]]
) -> dict[str, Any]:
    """`show_document` of a diff and history already read."""
    return {
        **summary_document(held),
        "verdict": held.verdict.wire(),
        "diffBase": base,
        "history": [{"commit": c, **a.wire()} for c, a in records],
        "files": [
            {
                "path": f.path,
                "oldPath": f.old_path,
                "status": f.status,
                "violations": [v.wire() for v in f.violations],
                "patch": f.patch,
            }
            for f in files
        ],
    }
