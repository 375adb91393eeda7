"""A queue, target or record moved back on the server: what a mirror checks after every
fetch (the policy, the claims pause and queue control only move forward too: each change
is a child of the one before, so an older signed record replayed is caught here).

The target only moves forward (landings, promotions). The queue moves forward too, except
when a promoter ejects a landing or reorders the queue: then it is rebuilt on an earlier
head, and the promotion record (`refs/integrator/promotion/<target>`, signed when the
repository trusts authority keys) says from which head to which. A mirror remembers the
queue and target it last saw (`refs/integrator/seen/heads/queue|target/<target>`); a fetch
that finds either moved to a commit that does not descend from it, with no chain of
rebuild records that explains the move, means someone forced it back (on a server that
cannot guard its refs, any writer), and nothing lands on that target — an earlier landing
would silently vanish under an ACCEPTED verdict — until an operator looks.
"""

from __future__ import annotations

from collections.abc import Callable

import pygit2
from pydantic import ValidationError

from integrator import refnames
from integrator.documents.promotion import PromotionRecord
from integrator.limits import AUTHORITY_COMMIT_BYTES
from integrator.plumbing import git
from integrator.plumbing.transaction import RefOp

SEEN_HEADS = refnames.SEEN + "heads/"
RECORD_WALK = 1_000  # promotion records read back to explain one move
REBUILDS = ("eject", "reorder")

Signed = Callable[[str, str], str | None]  # (ref, commit) → why no trusted key signed it


def seen_ref(kind: str, target: str) -> str:
    return f"{SEEN_HEADS}{kind}/{target}"


def descends(repo: pygit2.Repository, oid: str, ancestor: str) -> bool:
    """Whether commit `oid` is `ancestor` or descends from it (False when either is not
    here or not a commit id)."""
    if oid == ancestor:
        return True
    try:
        return bool(repo.descendant_of(pygit2.Oid(hex=oid), pygit2.Oid(hex=ancestor)))
    except (KeyError, ValueError, pygit2.GitError):
        return False


def _record(repo: pygit2.Repository, oid: str) -> tuple[PromotionRecord | None, str | None]:
    """The promotion record at `oid` and its first parent."""
    try:
        commit = repo[oid]
        if not isinstance(commit, pygit2.Commit):
            return None, None
        parent = str(commit.parent_ids[0]) if commit.parent_ids else None
        entry = commit.tree["promotion.json"]
        if repo.odb.read_header(entry.id)[1] > AUTHORITY_COMMIT_BYTES:  # before it is read
            return None, parent
        blob = repo[entry.id]
        if not isinstance(blob, pygit2.Blob):
            return None, parent
        return PromotionRecord.model_validate_json(blob.data), parent
    except (KeyError, ValueError, ValidationError, pygit2.GitError):
        return None, None


def rebuilt(repo: pygit2.Repository, target: str, before: str, now: str, signed: Signed) -> bool:
    """Whether promotion records explain the queue's move from `before` to `now`: walking
    them newest first, each rebuild whose new head `now` (or what it was rebuilt from)
    descends from leads back to the head it replaced, until one descends from `before`.
    A record no trusted key signed explains nothing, and ends the walk before it is read
    (each record is measured before it is read, too)."""
    ref = f"{refnames.PROMOTION}{target}"
    oid = git.ref_target(repo, ref)
    current = now
    for _ in range(RECORD_WALK):
        if oid is None:
            return False
        if signed(ref, oid) is not None:
            return False
        record, parent = _record(repo, oid)
        if record is None:
            return False
        if record.action in REBUILDS and descends(repo, current, record.after):
            current = record.before
            if descends(repo, current, before):
                return True
        oid = parent
    return False


def heads_problem(
    repo: pygit2.Repository,
    target: str,
    watched: dict[str, str],
    signed: Signed,
) -> tuple[str | None, list[RefOp]]:
    """Why one of the `watched` refs (ref → kind: queue, target, policy, pause, control)
    moved back since this mirror last saw it, or None; and the moves of the seen refs to
    make when none did."""
    ops: list[RefOp] = []
    for ref, kind in watched.items():
        now = git.ref_target(repo, ref)
        before = git.ref_target(repo, seen_ref(kind, target))
        if now is None or before == now:
            continue
        if (
            before is None
            or descends(repo, now, before)
            or (kind == "queue" and rebuilt(repo, target, before, now, signed))
        ):
            ops.append(RefOp("set", seen_ref(kind, target), now))
            continue
        explained = {
            "queue": ", and no promotion record a trusted key signed rebuilt it there",
            "target": "",
        }.get(kind, " (an older record replayed)")
        lost = (
            f"landings made since {before[:12]} would vanish"
            if kind in ("queue", "target")
            else "what was decided since would be undone"
        )
        return (
            f"{ref} moved from {before[:12]} to {now[:12]} on the server, which does not "
            f"descend from it{explained}: someone forced it back, and {lost}. Nothing lands "
            f"on {target} and no claim is made live until it is restored, or an operator who "
            f"made that move deliberately runs `git --git-dir {repo.path.rstrip('/')} "
            f"update-ref -d {seen_ref(kind, target)}` on this mirror",
            [],
        )
    return None, ops
