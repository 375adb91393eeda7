"""What promotion recorded in git, reflected into a daemon's spool and registry mirror.

Promoters write only git (they may run on any host). Each daemon, between drains, reads
the promotion records it has not seen yet (`refs/integrator/promotion/<target>`, newest
first back to the one named in its spool's `promotion-seen`) and:

- holds every ejected landing it decided itself: the spool folder moves from `accepted/`
  to `fenced/` with a FENCED verdict carrying the ejection's code (VALIDATION_FAILED, or the
  rebuild's own), and `refs/integrator/held/<submission>` keeps it for review. The fence's
  ACCEPTED verdict stays beside it as `ownership.json` and in the registry: the ownership
  verdict and the validation verdict are separate records;
- mirrors promotions, ejections, rebuilds and every validation attempt they rest on into
  the registry, for `integrator history`.

Idempotent: a crash before `promotion-seen` moves replays the records, and each step
finds what it already did (a folder already in `fenced/`, rows keyed by record).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime

import structlog
from pydantic import ValidationError

from integrator import jsontext
from integrator.documents.promotion import Ejected, PromotionRecord
from integrator.documents.verdict import Decision, Verdict, Violation
from integrator.errors import IntegratorError
from integrator.files import atomic_write
from integrator.limits import SUBMISSION_BYTES, VERDICT_BYTES
from integrator.plumbing import git
from integrator.records import validations
from integrator.records.canonical import Canonical
from integrator.records.held import hold_op
from integrator.store.entries import MirrorRecord, review_record
from integrator.store.mirror import Mirror
from integrator.store.spool import (
    SUBMISSION_FILE,
    VERDICT_FILE,
    Spool,
    submitted,
)
from integrator.store.submitted import read_at_most_path, read_submitted

log = structlog.get_logger("integrator.promote")

SEEN_FILE = "promotion-seen"
OWNERSHIP_FILE = "ownership.json"  # the fence's verdict of an ejected landing, kept
SCAN_LIMIT = 50_000  # accepted submissions read (newest first) to find an ejected landing


def _seen(spool: Spool) -> dict[str, str]:
    try:
        doc = jsontext.loads(read_at_most_path(spool.root / SEEN_FILE, 1 << 16))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in doc.items() if isinstance(v, str)} if isinstance(doc, dict) else {}


def find_accepted(spool: Spool, names: set[str]) -> str | None:
    """The accepted submission whose verdict names one of `names` as its staging commit."""
    entries = spool.entries("accepted")
    for sid in reversed(entries[-SCAN_LIMIT:]):
        try:
            data = read_at_most_path(spool.folder("accepted") / sid / VERDICT_FILE, VERDICT_BYTES)
            verdict = Verdict.model_validate_json(data)
        except (OSError, ValidationError):
            continue
        if verdict.staging_commit in names:
            return sid
    return None


def hold_ejected(canonical: Canonical, spool: Spool, item: Ejected, now: datetime) -> str | None:
    """Hold an ejected landing this spool accepted; its submission id (None: not ours)."""
    sid = find_accepted(spool, {item.landing, item.staging})
    if sid is None:
        return None
    folder = spool.folder("accepted") / sid
    ownership = Verdict.model_validate_json(read_at_most_path(folder / VERDICT_FILE, VERDICT_BYTES))
    if ownership.decision is Decision.ACCEPTED:
        atomic_write(folder / OWNERSHIP_FILE, ownership.to_json().encode() + b"\n")
    verdict = ejection_verdict(ownership, item)
    raw = read_submitted(submitted(folder), SUBMISSION_FILE, SUBMISSION_BYTES)
    op = hold_op(canonical, sid, verdict, raw, now)
    if git.durable(canonical.repo):
        git.sync_objects(canonical.repo)  # the record on disk before a ref names it
    canonical.updater.apply([op])
    atomic_write(folder / VERDICT_FILE, verdict.to_json().encode() + b"\n")
    spool.move(sid, "accepted", "fenced")
    return sid


def ejection_verdict(ownership: Verdict, item: Ejected) -> Verdict:
    """The validation verdict of an ejected landing: FENCED with the ejection's code, beside
    the fence's own findings (observed ones), naming the queue commit it was ejected as."""
    document = ownership.model_dump(by_alias=False)
    document.update(
        decision=Decision.FENCED,
        violations=[
            *ownership.violations,
            Violation(code=item.code, detail=item.detail[:8000]),
        ],
        staging_commit=item.staging,
        recovered=None,
    )
    return Verdict.model_validate(document)


def reflect(
    canonical: Canonical,
    spool: Spool | None,
    mirror: Mirror | None,
    now: datetime,
    *,
    on_held: Callable[[str], None] | None = None,
) -> int:
    """Reflect the promotion records not seen yet; how many were. `on_held` is told each
    submission held here because its landing was ejected (its verdict changed: the daemon
    publishes it again where the submitter reads it)."""
    target = canonical.target
    seen = _seen(spool) if spool is not None else {}
    tip = canonical.ref(validations.promotion_ref(target))
    if tip is None or tip == seen.get(target):
        return 0
    records = validations.promotions(canonical, target, since=seen.get(target))
    rows: list[MirrorRecord] = []
    for commit, record in reversed(records):
        for item in record.ejected:
            sid = None
            if spool is not None:
                try:
                    sid = hold_ejected(canonical, spool, item, now)
                except (IntegratorError, OSError, ValidationError) as err:
                    log.warning("promote.hold_failed", landing=item.landing, error=str(err))
                    return 0  # tried again after the next drain
            if sid is not None:
                log.info("promote.held", submission=sid, task=item.task_id, code=item.code.value)
                if on_held is not None:
                    on_held(sid)
            rows.append(_ejection_row(sid, item, record, commit))
        rows.extend(_rows(canonical, commit, record))
    if mirror is not None and rows:
        mirror.record(rows)
    if spool is not None:
        atomic_write(
            spool.root / SEEN_FILE, json.dumps({**seen, target: tip}, indent=2).encode() + b"\n"
        )
    return len(records)


def _ejection_row(
    sid: str | None, item: Ejected, record: PromotionRecord, commit: str
) -> MirrorRecord:
    verdict = None
    row = review_record(
        sid or item.landing, "eject", record.actor, record.at, verdict, item.detail[:2000],
        task_id=item.task_id, attempt_id=item.attempt_id, candidate=item.candidate,
    )  # fmt: skip
    document = row.model_dump(by_alias=False)
    document.update(
        key=f"eject:{commit}:{item.landing}", decision=Decision.FENCED.value,
        codes=[item.code.value], staging_commit=item.staging,
    )  # fmt: skip
    return MirrorRecord.model_validate(document)


def _rows(canonical: Canonical, commit: str, record: PromotionRecord) -> list[MirrorRecord]:
    """The registry rows of one promotion record: the act, and each validation attempt."""
    out: list[MirrorRecord] = []
    if record.action == "promote":
        tasks = ", ".join(c.task_id or c.staging[:12] for c in record.landings)
        out.append(
            MirrorRecord(
                key=f"promotion:{commit}",
                kind="promotion",
                submission=record.after,
                at=record.at,
                action="promote",
                actor=record.actor,
                staging_commit=record.after,
                reason=f"{len(record.landings)} landings: {tasks}"[:2000],
            )
        )
    for item in record.rebuilt:
        out.append(
            MirrorRecord(
                key=f"rebuild:{commit}:{item.landing}",
                kind="promotion",
                submission=item.staging,
                at=record.at,
                action="rebuild",
                actor=record.actor,
                task_id=item.task_id,
                staging_commit=item.staging,
                reason=f"re-merged; replaces {item.replaces}",
            )
        )
    for result_commit in record.validations:
        for oid, result in validations.chain(canonical, result_commit):
            if result.status not in ("pass", "fail"):
                continue
            tasks = ", ".join(c.task_id or c.staging[:12] for c in result.landings)
            out.append(
                MirrorRecord(
                    key=f"validation:{oid}",
                    kind="validation",
                    submission=result.head,
                    at=result.at,
                    decision=result.status.upper(),
                    action=f"attempt {result.attempt}",
                    actor=result.runner,
                    staging_commit=result.head,
                    reason=(("final; " if result.final else "retried; ") + f"covers {tasks}")[
                        :2000
                    ],
                )
            )
    return out
