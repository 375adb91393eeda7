"""The validation result cache: a final result, found again by what it validated.

A result is keyed by (tree, scope, command, toolchain): the tree the command saw (for a
scope, the part of it the scope's suite depends on: its paths and every path in no
scope), the scope's name, the command's argv and the policy's `toolchain` string. A head
whose key was validated before — a rebuilt head equal to one validated already, a revert
back to a known tree, a landing of another scope moved before it — reuses that result and
costs no run.

`refs/integrator/validations/<target>/cache/<key>` names the final result commit (the
commit on the head's chain, whose parents are every attempt before it). Entries are
created once and never moved; `prune` keeps the newest `CACHE_ENTRIES`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import cast

from integrator import refnames
from integrator.documents.promotion import ValidationResult
from integrator.errors import RefMovedError
from integrator.plumbing import git, transaction
from integrator.records import validations
from integrator.records.canonical import Canonical

CACHE_ENTRIES = 4096  # entries kept per target (the promoter prunes the oldest past this)
EJECTION_WALK = 500  # promotion records read back for the newest ejections
NEVER = datetime.min.replace(tzinfo=UTC)


def cache_prefix(target: str) -> str:
    return f"{refnames.VALIDATIONS}{target}/cache/"


def key_of(
    content: str, scope: str | None, command: Sequence[str] | str | None, toolchain: str | None
) -> str:
    """The cache key (hex SHA-256) of one validation."""
    document = {
        "content": content,
        "scope": scope,
        "command": command if isinstance(command, str) or command is None else list(command),
        "toolchain": toolchain,
    }
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()


def lookup(
    canonical: Canonical, target: str, key: str, *, fails_after: datetime | None = None
) -> tuple[str, ValidationResult] | None:
    """The final result recorded under `key` (None when there is none, or it is damaged).

    A failure is reused only when it was recorded after `fails_after` (the newest
    ejection): a candidate requeued because its failure was not its own (a flaky suite,
    a broken runner) is validated again, not refused by the failure that ejected it."""
    oid = canonical.ref(cache_prefix(target) + key)
    if oid is None:
        return None
    result = validations.read_result(canonical, oid)
    # Only a result recorded under this very key (and target) is one: a genuine signed
    # result of another head or scope put here by anyone who can write refs is not.
    if result is None or not result.final or result.key != key or result.target != target:
        return None
    if result.status != "pass" and (fails_after is None or result.at <= fails_after):
        return None
    return oid, result


def last_ejection(canonical: Canonical, target: str, scope: str | None = None) -> datetime:
    """When the newest ejection was recorded — with `scope`, the newest of a culprit that
    scope's suite found (another scope's culprit says nothing of this scope's failures);
    the oldest time when there was none."""
    return last_ejections(canonical, target).get(scope, NEVER)


def last_ejections(canonical: Canonical, target: str) -> dict[str | None, datetime]:
    """The newest ejection's time per scope whose suite found the culprit, and under None
    the newest of all, among the newest `EJECTION_WALK` promotion records."""
    out: dict[str | None, datetime] = {}
    for _, at, scopes in _walked(canonical, target):
        if at is None:
            continue
        out.setdefault(None, at)
        for scope in scopes:
            out.setdefault(scope, at)
    return out


_Seen = tuple[str, datetime | None, tuple[str, ...]]  # record, its time if an ejection, scopes


def _walked(canonical: Canonical, target: str) -> list[_Seen]:
    """The newest `EJECTION_WALK` promotion records, newest first, as the lookup needs them.

    Every round asks, and the chain only grows: the walk made at the last head is kept and
    only the records written since are read (parsing 500 records twice a round cost a
    daemon its CPU and a transient list that grew with its history). The result is the
    walk a fresh reader makes: the same chain below the last head, cut at the same place.
    """
    head = canonical.ref(validations.promotion_ref(target))
    memo = canonical.memos.get(("ejections", target))
    last, seen = cast(tuple[str, list[_Seen]], memo) if memo is not None else ("", [])
    fresh: list[_Seen] = []
    oid = head
    while oid and len(fresh) < EJECTION_WALK:
        if oid == last:
            fresh += seen[: EJECTION_WALK - len(fresh)]
            break
        record = validations.read_promotion(canonical, oid)
        if record is None:
            break
        ejected = record.action == "eject"
        scopes = tuple(i.scope for i in record.ejected if i.scope is not None)
        fresh.append((oid, record.at if ejected else None, scopes))
        parents = canonical.commit(oid).parent_ids
        oid = str(parents[0]) if parents else None
    if head is not None:
        canonical.memos[("ejections", target)] = (head, fresh)
    return fresh


def store(canonical: Canonical, target: str, key: str, commit: str) -> bool:
    """Name `commit` (a final result) under `key`, unless an entry is there already."""
    ref = cache_prefix(target) + key
    if canonical.ref(ref) is not None:
        return False
    try:
        canonical.updater.apply([transaction.update(ref, commit, None)])
    except RefMovedError:
        return False  # another promoter stored the same key first: either result is the truth
    return True


def prune(canonical: Canonical, target: str, keep: int = CACHE_ENTRIES) -> int:
    """Delete all but the newest `keep` entries (by the time of their result); returns how
    many were deleted."""
    entries = git.refs_under(canonical.repo, cache_prefix(target))
    if len(entries) <= keep:
        return 0
    dated = sorted(entries.items(), key=lambda item: canonical.commit(item[1]).commit_time)
    doomed = dated[: len(dated) - keep]
    try:
        canonical.updater.apply([transaction.delete(ref, oid) for ref, oid in doomed])
    except RefMovedError:
        return 0
    return len(doomed)
