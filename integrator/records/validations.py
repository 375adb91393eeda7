"""Validation results and promotion records in git: their refs, commits and reads.

- `refs/integrator/validations/<target>/<head>`: a chain of result commits for one queue
  head (`result.json`, and `log.txt` with the tail of a run's output, `details.json` from
  an external report). Each request, run attempt and final result is a new commit whose
  parent is the one before, so `git log` of the ref is every attempt. A final result ends
  the chain: whoever finds one adopts it, and every write is a compare-and-swap on the
  chain's tip, so two promoters can never both record the truth for one head.
- `refs/integrator/promotion/<target>`: every promotion and every ejection (with its queue
  rebuild), one `promotion.json` commit each. Promotions and rebuilds both move this ref
  with a lease, so they are serialized even where a `verify` cannot be pushed (remote
  mode). The result commits a record rests on are its extra parents: once a head is
  promoted or dropped its validation ref is deleted, and its history stays reachable here;
  a rebuild's last parent is the queue head it replaced (`rollback.rebuilt` reads it).
- `refs/integrator/ejected/<target>/<landing>`: one commit (`ejection.json`, `log.txt`)
  per ejected landing, named by the staging commit its consumed claim names, with that
  commit as parent (its objects stay alive for review).

Everything here writes objects only; the promoter moves refs in its own transactions.
"""

from __future__ import annotations

import pygit2
from pydantic import ValidationError

from integrator import refnames
from integrator.documents.promotion import EjectionRecord, PromotionRecord, ValidationResult
from integrator.errors import ConfigurationError
from integrator.limits import DETAILS_BYTES, LOG_TAIL_BYTES
from integrator.plumbing import git
from integrator.plumbing.packs import ObjectBuffer, commit_bytes, flush_loose, tree_bytes
from integrator.records.canonical import SIGNATURE_EMAIL, SIGNATURE_NAME, Canonical

RESULT_FILE = "result.json"
LOG_FILE = "log.txt"
DETAILS_FILE = "details.json"
PROMOTION_FILE = "promotion.json"
EJECTION_FILE = "ejection.json"
_CHAIN_LIMIT = 10_000  # result commits read back along one head's chain


def validation_ref(target: str, head: str, scope: str | None = None) -> str:
    """A head's result chain; one per scope when the policy declares scopes (a scope's name
    starts with a letter and is at most 32 characters: never a head's name)."""
    if scope is None:
        return f"{refnames.VALIDATIONS}{target}/{head}"
    return f"{refnames.VALIDATIONS}{target}/scope/{scope}/{head}"


def scoped_refs(canonical: Canonical, target: str, heads: set[str]) -> dict[str, str]:
    """Every scope's result ref of the heads `heads`: ref → tip."""
    prefix = f"{refnames.VALIDATIONS}{target}/scope/"
    return {
        ref: oid
        for ref, oid in git.refs_under(canonical.repo, prefix).items()
        if ref.rsplit("/", 1)[-1] in heads
    }


def settled_refs(
    canonical: Canonical, target: str, promoted: str, queue: str | None = None
) -> dict[str, str]:
    """Result refs (plain and per scope, never the cache's) of heads that are settled:
    the target already holds them (`promoted` or its ancestors), or the queue no longer
    does (`queue` given: a rebuild dropped them): ref → tip. A promotion or rebuild deletes
    its heads' refs, but a promoter that began a run of a head just before another
    promoted past it or rebuilt the queue without it (or was killed running it) leaves
    that head's record behind for ever. A head is only ever validated while the queue
    holds it, and the queue is read with the records, so one it does not hold is gone."""
    prefix = f"{refnames.VALIDATIONS}{target}/"
    out: dict[str, str] = {}
    for ref, oid in git.refs_under(canonical.repo, prefix).items():
        rest = ref.removeprefix(prefix)
        if rest.startswith("cache/"):
            continue
        head = rest.rsplit("/", 1)[-1]
        held = head == promoted or _holds(canonical, promoted, head)
        dropped = queue is not None and head != queue and not _holds(canonical, queue, head)
        if held or dropped:
            out[ref] = oid
    return out


def _holds(canonical: Canonical, promoted: str, head: str) -> bool:
    try:
        return bool(canonical.repo.descendant_of(pygit2.Oid(hex=promoted), pygit2.Oid(hex=head)))
    except (KeyError, ValueError, pygit2.GitError):  # not a commit id, or not here
        return False


def promotion_ref(target: str) -> str:
    return f"{refnames.PROMOTION}{target}"


def ejected_ref(target: str, landing: str) -> str:
    return f"{refnames.EJECTED}{target}/{landing}"


def tail(data: bytes, limit: int = LOG_TAIL_BYTES) -> bytes:
    """The last `limit` bytes of a log, marked as cut when it was longer."""
    if len(data) <= limit:
        return data
    return b"[... %d earlier bytes not kept ...]\n" % (len(data) - limit) + data[-limit:]


def _commit(
    canonical: Canonical,
    files: dict[str, bytes],
    parents: list[str],
    message: str,
    at_seconds: int,
    *,
    signed_for: str | None = None,
) -> str:
    """A record commit (objects only); one for the ref `signed_for` is an authority record,
    signed with this host's authority key when it has one."""
    buffer = ObjectBuffer(canonical.repo)
    entries = {name.encode(): (b"100644", buffer.add("blob", data)) for name, data in files.items()}
    tree = buffer.add("tree", tree_bytes(entries))
    sig = pygit2.Signature(SIGNATURE_NAME, SIGNATURE_EMAIL, at_seconds, 0)
    raw_parents = [bytes.fromhex(p) for p in parents]
    if signed_for is not None:
        commit = canonical.authority_commit(buffer, signed_for, tree, raw_parents, sig, message)
    else:
        commit = buffer.add("commit", commit_bytes(tree, raw_parents, sig, sig, message)).hex()
    flush_loose(buffer)
    return commit


def write_result(
    canonical: Canonical,
    result: ValidationResult,
    parent: str | None,
    *,
    log: bytes | None = None,
    details: bytes | None = None,
) -> str:
    """The commit recording `result` after `parent` (objects only, no ref)."""
    files = {RESULT_FILE: result.to_json().encode() + b"\n"}
    if log:
        files[LOG_FILE] = tail(log)
    if details:
        files[DETAILS_FILE] = details[:DETAILS_BYTES]
    word = result.status if not result.final else f"{result.status} (final)"
    message = f"validation {result.head[:12]}: {word}"
    if result.attempt:
        message += f", attempt {result.attempt}"
    message += f"\n\nIntegrator-Head: {result.head}\nIntegrator-Tree: {result.tree}\n"
    return _commit(
        canonical, files, [parent] if parent else [], message, int(result.at.timestamp()),
        signed_for=validation_ref(result.target, result.head, result.scope),
    )  # fmt: skip


def _blob(canonical: Canonical, commit: str, name: str) -> bytes | None:
    try:
        return canonical.blob_at(commit, name)
    except (KeyError, ValueError, pygit2.GitError, ConfigurationError):
        return None


def read_result(canonical: Canonical, commit: str) -> ValidationResult | None:
    """The result a commit records (None when it holds none, a damaged one, or one no
    trusted authority key signed for its head, where such keys are trusted)."""
    data = _blob(canonical, commit, RESULT_FILE)
    if data is None:
        return None
    try:
        result = ValidationResult.model_validate_json(data)
    except ValidationError:
        return None
    ref = validation_ref(result.target, result.head, result.scope)
    return result if canonical.authority_problem(ref, commit) is None else None


def log_of(canonical: Canonical, commit: str) -> bytes:
    return _blob(canonical, commit, LOG_FILE) or b""


def latest(
    canonical: Canonical, target: str, head: str, scope: str | None = None
) -> tuple[str, ValidationResult] | None:
    """The tip of a head's result chain (None when nothing was recorded for it)."""
    oid = canonical.ref(validation_ref(target, head, scope))
    if oid is None:
        return None
    result = read_result(canonical, oid)
    if result is None or (result.target, result.head, result.scope) != (target, head, scope):
        return None  # a result of another head, scope or target moved here is none
    return oid, result


def chain(canonical: Canonical, commit: str) -> list[tuple[str, ValidationResult]]:
    """Every record of a head's chain ending at `commit`, oldest first."""
    out: list[tuple[str, ValidationResult]] = []
    oid: str | None = commit
    while oid and len(out) < _CHAIN_LIMIT:
        result = read_result(canonical, oid)
        if result is None:
            break
        out.append((oid, result))
        parents = canonical.commit(oid).parent_ids
        oid = str(parents[0]) if parents else None
    out.reverse()
    return out


def write_promotion(canonical: Canonical, record: PromotionRecord, parent: str | None) -> str:
    """The next commit of `refs/integrator/promotion/<target>` (objects only)."""
    parents = [parent] if parent else []
    parents += [v for v in dict.fromkeys(record.validations) if git.has_object(canonical.repo, v)]
    if record.action != "promote" and git.has_object(canonical.repo, record.before):
        # The queue head a rebuild replaced, kept reachable: a mirror that never fetched it
        # needs its history to tell this rebuild from a queue forced back (rollback.py).
        parents.append(record.before)
    if record.action == "promote":
        summary = (
            f"promote {record.target} to {record.after[:12]} ({len(record.landings)} landings)"
        )
    elif record.action == "reorder":
        summary = (
            f"reorder {record.target}: {len(record.rebuilt)} landings re-merged, those of "
            f"scopes not failing first; queue rebuilt at {record.after[:12]}"
        )
    else:
        names = ", ".join(e.task_id or e.landing[:12] for e in record.ejected)
        summary = f"eject {names} from {record.target}; queue rebuilt at {record.after[:12]}"
    message = f"{summary}\n\nIntegrator-Before: {record.before}\nIntegrator-After: {record.after}\n"
    files = {PROMOTION_FILE: record.to_json().encode() + b"\n"}
    return _commit(canonical, files, parents, message, int(record.at.timestamp()),
                   signed_for=promotion_ref(record.target))  # fmt: skip


def read_promotion(canonical: Canonical, commit: str) -> PromotionRecord | None:
    data = _blob(canonical, commit, PROMOTION_FILE)
    if data is None:
        return None
    try:
        return PromotionRecord.model_validate_json(data)
    except ValidationError:
        return None


def promotions(
    canonical: Canonical, target: str, *, since: str | None = None, limit: int = 10_000
) -> list[tuple[str, PromotionRecord]]:
    """Promotion records newest first, back to (not including) `since`."""
    out: list[tuple[str, PromotionRecord]] = []
    oid = canonical.ref(promotion_ref(target))
    while oid and oid != since and len(out) < limit:
        record = read_promotion(canonical, oid)
        if record is None:
            break
        out.append((oid, record))
        parents = canonical.commit(oid).parent_ids
        oid = str(parents[0]) if parents else None
    return out


def write_ejection(canonical: Canonical, record: EjectionRecord, log: bytes | None) -> str:
    """The commit of `refs/integrator/ejected/<target>/<landing>` (objects only)."""
    ejected = record.ejected
    files = {EJECTION_FILE: record.to_json().encode() + b"\n"}
    if log:
        files[LOG_FILE] = tail(log)
    parents = [ejected.staging] if git.has_object(canonical.repo, ejected.staging) else []
    message = (
        f"eject {ejected.task_id or '-'} ({ejected.code.value}) from {record.target}\n\n"
        f"Integrator-Landing: {ejected.landing}\n"
    )
    if ejected.candidate:
        message += f"Integrator-Candidate: {ejected.candidate}\n"
    return _commit(canonical, files, parents, message, int(record.at.timestamp()),
                   signed_for=ejected_ref(record.target, ejected.landing))  # fmt: skip


def read_ejection(canonical: Canonical, target: str, landing: str) -> EjectionRecord | None:
    """The ejection of the landing its claim names `landing`, or None."""
    oid = canonical.ref(ejected_ref(target, landing))
    if oid is None:
        return None
    data = _blob(canonical, oid, EJECTION_FILE)
    if data is None:
        return None
    try:
        return EjectionRecord.model_validate_json(data)
    except ValidationError:
        return None


def ejections(canonical: Canonical, target: str) -> dict[str, str]:
    """Every ejection record of a target: landing → record commit."""
    prefix = f"{refnames.EJECTED}{target}/"
    return {
        ref.removeprefix(prefix): oid for ref, oid in git.refs_under(canonical.repo, prefix).items()
    }
