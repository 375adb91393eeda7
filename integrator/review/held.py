"""The held candidates of one spool: its `fenced/` and `review/` folders, read (no git).

A folder is one submission: its `submission.json`, the `verdict.json` that held it, and,
once a release manager decided it, the `review.json` of that decision.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from dataclasses import dataclass

import structlog
from pydantic import ValidationError

from integrator.documents.submission import Submission
from integrator.documents.verdict import Verdict
from integrator.errors import ConfigurationError, IntegratorError
from integrator.limits import SUBMISSION_BYTES, VERDICT_BYTES
from integrator.store.spool import SUBMISSION_FILE, VERDICT_FILE, Spool, submitted
from integrator.store.submitted import read_at_most_path, read_submitted

log = structlog.get_logger("integrator.review")

REVIEW_FILE = "review.json"
REVIEW_LOCK = "review.lock"
HELD_FOLDERS = ("fenced", "review")

__all__ = ["HELD_FOLDERS", "REVIEW_FILE", "Held", "exclusive", "pending", "read_held"]


@dataclass(frozen=True)
class Held:
    """A candidate waiting in `fenced/` or `review/`."""

    sid: str
    folder: str
    verdict: Verdict
    submission: Submission
    raw: bytes

    def subject(self) -> tuple[str | None, str | None, int | None]:
        """(task, attempt, generation): from the verdict, else from the submitted contract.

        A verdict names them only when the contract parsed; the submission still carries the
        contract as sent, so even a CONTRACT_INVALID candidate's review is found by task.
        """
        v, contract = self.verdict, self.submission.contract
        task, attempt = contract.get("taskId"), contract.get("attemptId")
        generation = v.generation
        if generation is None:
            sent = contract.get("ownershipGeneration")
            generation = sent if type(sent) is int else None  # not a bool, not a string
        return (
            v.task_id or (task if isinstance(task, str) else None),
            v.attempt_id or (attempt if isinstance(attempt, str) else None),
            generation,
        )


def read_held(spool: Spool, folder: str, sid: str) -> Held:
    """A held submission and its verdict; ConfigurationError when the folder is damaged."""
    path = spool.folder(folder) / sid
    try:
        raw = read_submitted(submitted(path), SUBMISSION_FILE, SUBMISSION_BYTES)
        verdict = Verdict.model_validate_json(read_at_most_path(path / VERDICT_FILE, VERDICT_BYTES))
        submission = Submission.model_validate_json(raw)
    except (OSError, ValidationError, IntegratorError) as err:
        raise ConfigurationError(
            f"{path} is not a complete held submission ({type(err).__name__}); "
            "move it out of the spool and look at it by hand"
        ) from err
    return Held(sid, folder, verdict, submission, raw)


def pending(spool: Spool) -> list[Held]:
    """Every held candidate of a spool, in submission order (reads no repository).

    A damaged folder is logged and left out, so one bad entry does not hide the others.
    """
    items = []
    for folder in HELD_FOLDERS:
        for sid in spool.entries(folder):
            try:
                items.append(read_held(spool, folder, sid))
            except ConfigurationError as err:
                log.warning("review.unreadable", submission=sid, error=str(err))
    return sorted(items, key=lambda h: h.sid)


@contextlib.contextmanager
def exclusive(spool: Spool) -> Iterator[None]:
    """One review action at a time on this spool: an approve that is integrating and a
    reject of the same submission must not both act (the reject would be recorded while
    the approve lands the code), nor two readers file another host's decision at once.
    Held across the whole action, re-reading the submission inside; the kernel drops the
    lock if the process dies."""
    fd = os.open(spool.root / REVIEW_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
