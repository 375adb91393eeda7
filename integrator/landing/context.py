"""What a landing works through: the repository's parts, and the head it merges onto.

The landing (`batch`) and the proof of what it lands (`proof`) receive a `LandingContext`
(the repository, the object buffer, the tree reader, claims, the queue's history), never
the engine that drives them.
"""

from __future__ import annotations

from dataclasses import dataclass

import pygit2

from integrator.fence.trees import TreeReader
from integrator.landing.history import QueueHistory
from integrator.plumbing.packs import ObjectBuffer
from integrator.records.canonical import Canonical
from integrator.records.claims import Claims


@dataclass(frozen=True, kw_only=True)
class LandingContext:
    """What a landing reads and writes through: nothing else of the engine."""

    canonical: Canonical
    objects: ObjectBuffer
    trees: TreeReader
    claims: Claims
    history: QueueHistory
    durable: bool

    @property
    def repo(self) -> pygit2.Repository:
        return self.canonical.repo


@dataclass(frozen=True)
class Head:
    """The queue head a candidate merges onto: real, or a staging commit of this batch."""

    oid: str
    tree: bytes  # raw id, maybe still pending in the object buffer
    queue: pygit2.Commit  # the real queue head the batch started from

    def tree_object(self, ctx: LandingContext) -> pygit2.Tree:
        ctx.objects.flush()  # for the rare readers that need it through libgit2
        tree = ctx.repo[pygit2.Oid(raw=self.tree)]
        assert isinstance(tree, pygit2.Tree)
        return tree
