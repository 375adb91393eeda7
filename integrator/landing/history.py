"""The queue's history: which commits are on the queue, and landings that already happened.

A base on the queue's first-parent chain needs no merge-base computation (the common case:
agents start from a queue head), so the chain is cached and extended as the queue moves
forward. A candidate whose claim was already consumed by this very landing is answered
with that landing (recovery after a crash, or a concurrent integrator that won).
"""

from __future__ import annotations

import time

import pygit2

from integrator.documents.claim import Claim
from integrator.documents.contract import OwnershipContract
from integrator.documents.trailers import TRAILER_CANDIDATE, trailers
from integrator.documents.verdict import Decision, Verdict, Violation
from integrator.fence.checks import recovered_verdict
from integrator.records.canonical import Canonical
from integrator.records.landings import locate

# Pauses (seconds) before re-reading refs that disagree: a torn read of another
# integrator's commit (its lock files are renamed one by one) lasts microseconds, a move
# made by hand persists.
HEAD_SETTLE = (0.002, 0.01, 0.05)
# In remote mode the mirror's refs move only when it fetches: read the server again after
# these pauses (the server's transaction may have renamed the claim, not yet the queue).
REMOTE_SETTLE = (0.05, 0.25)
_CHAIN_LIMIT = 1_000_000  # cached chain commits before the cache starts over
_WALK_LIMIT = 10_000  # first parents walked per queue move


class QueueHistory:
    """Ancestry questions about one canonical repository's queue, with a chain cache."""

    def __init__(self, canonical: Canonical) -> None:
        self.canonical = canonical
        self.repo = canonical.repo
        self._chain: set[str] = set()
        self._tip: str | None = None

    def commit(self, rev: str) -> pygit2.Commit | None:
        """The commit `rev` names, or None when it names none here."""
        try:
            commit = self.repo.revparse_single(rev).peel(pygit2.Commit)
        except (KeyError, ValueError, pygit2.GitError):
            return None
        return commit if isinstance(commit, pygit2.Commit) else None

    def is_ancestor(self, base: str, commit: pygit2.Commit) -> bool:
        """Whether `base` is `commit` or one of its ancestors (cheap when it is a parent)."""
        if str(commit.id) == base or any(str(p) == base for p in commit.parent_ids):
            return True
        return bool(self.repo.descendant_of(commit.id, pygit2.Oid(hex=base)))

    def on_queue(self, base: str, head: pygit2.Commit) -> bool:
        """Whether `base` is an ancestor of (or equal to) the queue head `head`."""
        tip = str(head.id)
        if tip != self._tip:
            # Walk the first-parent chain back to the part already known. The cache holds
            # the chain of the previous tip: reaching that tip means the queue only moved
            # forward; reaching any other known commit means it was moved back or rewritten
            # (by hand), and what the cache holds past that point is no longer on it.
            walked, joined = self._first_parents(head, self._chain)
            if joined != self._tip:
                walked, _ = self._first_parents(head, set())
                self._chain.clear()
            if len(self._chain) > _CHAIN_LIMIT:
                self._chain.clear()
            self._chain.update(walked)
            self._tip = tip
        if base in self._chain:
            return True
        return self.is_ancestor(base, head)

    def _first_parents(self, head: pygit2.Commit, known: set[str]) -> tuple[list[str], str | None]:
        """First-parent ids from `head` back to the first in `known` (returned apart)."""
        walked: list[str] = []
        commit: pygit2.Commit | None = head
        while commit is not None and len(walked) < _WALK_LIMIT:
            oid = str(commit.id)
            if oid in known:
                return walked, oid
            walked.append(oid)
            parents = commit.parent_ids
            nxt = self.repo.get(parents[0]) if parents else None
            commit = nxt if isinstance(nxt, pygit2.Commit) else None
        return walked, None

    def earlier_landing(
        self, contract: OwnershipContract, claim: Claim, candidate: str
    ) -> Verdict | None:
        """The ACCEPTED verdict of a landing that already happened for this candidate.

        Only when `claim` was consumed by this very candidate under this very contract:
        the same commit under another generation's contract is not the same landing.
        """
        staging = claim.view.staging_commit
        if staging is None or claim.view.candidate is None:
            return None
        if claim.view.contract_digest != contract.digest:
            return None
        cand = self.commit(candidate)
        if cand is None or str(cand.id) != claim.view.candidate:
            return None
        commit = self.commit(staging)
        if commit is None and self.canonical.remote is not None:
            # The fetch saw the claim consumed before the queue that holds the landing (the
            # objects come with the queue): read the server once more.
            self.canonical.refresh()
            commit = self.commit(staging)
        if commit is None or trailers(commit.message).get(TRAILER_CANDIDATE) != str(cand.id):
            return None
        return self._as_landed(contract, str(cand.id), staging, str(commit.tree_id))

    def _as_landed(
        self, contract: OwnershipContract, candidate: str, staging: str, tree: str
    ) -> Verdict | None:
        """The landing that made `staging`, as the queue holds it now.

        A landing the queue no longer holds (moved back by hand) is not a landing to
        report: the claim stays consumed, and the live checks say so. Another
        integrator's transaction renames the claim ref before the queue ref, so a queue
        that does not hold it yet is read again before it is believed. A landing rebuilt
        after an ejection is the queue commit that names it. One ejected by validation
        after it passed the fence happened (its claim stays consumed) and the queue no
        longer holds it: the answer is its ejection, FENCED with the ejection's code.
        """
        canonical = self.canonical
        remote = canonical.remote is not None
        for pause in (0.0, *(REMOTE_SETTLE if remote else HEAD_SETTLE)):
            time.sleep(pause)
            if pause and remote:
                canonical.refresh()
            queue = canonical.ref(canonical.queue_ref)
            if queue is not None and self.on_queue(staging, canonical.commit(queue)):
                return recovered_verdict(contract, candidate, tree, staging)
        where = locate(canonical, staging)
        if where.commit is not None and where.tree is not None:
            return recovered_verdict(contract, candidate, where.tree, where.commit)
        if where.ejection is None:
            return None
        ejected = where.ejection.ejected
        verdict = recovered_verdict(contract, candidate, tree, staging)
        violation = Violation(code=ejected.code, detail=ejected.detail)
        return verdict.model_copy(update={"decision": Decision.FENCED, "violations": [violation]})
