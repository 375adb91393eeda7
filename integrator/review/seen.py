"""What a reviewer was shown of a task's live claim, and the refusal when it moved since.

A review page is read at one moment and acted on at another. Between the two the
coordinator may reclaim, expand or re-issue the task: an approval must then not run under
a claim the reviewer never saw. The page carries the claim's generation and contract
digest into each action; the action compares them with the live claim before doing
anything, under the review lock, and approves under exactly the claim it compared.
"""

from __future__ import annotations

from dataclasses import dataclass

from integrator.documents.claim import Claim
from integrator.errors import ClaimConflictError


@dataclass(frozen=True)
class ClaimMark:
    """A claim as shown: its generation and contract digest (both None: no claim)."""

    generation: int | None
    digest: str | None
    attempt: str | None = None  # shown in the refusal, not compared (the digest covers it)

    @classmethod
    def of(cls, claim: Claim | None) -> ClaimMark:
        if claim is None:
            return cls(None, None)
        view = claim.view
        return cls(view.generation, view.contract_digest, view.attempt_id)

    def same(self, other: ClaimMark) -> bool:
        return (self.generation, self.digest) == (other.generation, other.digest)

    def describe(self) -> str:
        if self.generation is None:
            return "no claim"
        digest = (self.digest or "-")[:12]
        return f"generation {self.generation} (attempt {self.attempt or '-'}, contract {digest})"


NO_CLAIM = ClaimMark(None, None)


class ClaimMoved(ClaimConflictError):
    """The task's live claim is not the one the reviewer was shown: nothing was done."""

    def __init__(self, task: str | None, seen: ClaimMark, live: ClaimMark) -> None:
        self.task = task
        self.seen = seen
        self.live = live
        super().__init__(
            f"the claim of task {task or '-'} moved since the page was shown: it showed "
            f"{seen.describe()}, the live claim is {live.describe()}; nothing was done — "
            "reload the page to review the candidate under the claim as it is now"
        )


def check(task: str | None, seen: ClaimMark | None, claim: Claim | None) -> None:
    """Raise ClaimMoved when `seen` is given and `claim` (the live one) is another."""
    if seen is None:
        return
    live = ClaimMark.of(claim)
    if not seen.same(live):
        raise ClaimMoved(task, seen, live)
