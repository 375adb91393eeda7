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
    the newest of all."""
    out: dict[str | None, datetime] = {}
    for _, record in validations.promotions(canonical, target, limit=EJECTION_WALK):
        if record.action != "eject":
            continue
        out.setdefault(None, record.at)
        for item in record.ejected:
            if item.scope is not None:
                out.setdefault(item.scope, record.at)
    return out


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
