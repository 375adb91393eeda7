"""The ref census behind `integrator refs`: how many refs there are and whose, archiving
finished records kind by kind, and one record's history, live or archived."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from integrator import refnames
from integrator.errors import InfrastructureError, RefMovedError, UsageError
from integrator.records.archive import Archiver, KindReport
from integrator.records.archive_index import (
    PREFIXES,
    archive_ref,
    archived_count,
    archived_entry,
)
from integrator.records.canonical import Canonical

# GitHub recommends at most 5,000 branches, and a push of ~10,000 refs failed there.
ADVISE_AT = 5000


def ref_count(canonical: Canonical) -> int:
    """How many refs the repository holds (under refs/)."""
    return sum(1 for name in canonical.repo.references if name.startswith("refs/"))


def count_document(canonical: Canonical) -> dict[str, Any]:
    """The ref counts `refs count` prints: all refs, integrator's by folder, each archive."""
    total = 0
    folders: Counter[str] = Counter()
    for name in canonical.repo.references:
        if not name.startswith("refs/"):
            continue
        total += 1
        if name.startswith(refnames.NAMESPACE):
            folders[name.removeprefix(refnames.NAMESPACE).split("/", 1)[0]] += 1
    records = {
        kind: {
            "refs": folders.get(prefix.removeprefix(refnames.NAMESPACE).rstrip("/"), 0),
            "archived": archived_count(canonical, kind),
            "archiveRef": archive_ref(kind) if canonical.ref(archive_ref(kind)) else None,
        }
        for kind, prefix in PREFIXES.items()
    }
    advice = None
    if total > ADVISE_AT:
        advice = (
            f"{total} refs: hosts slow down past a few thousand (GitHub recommends at most "
            f"{ADVISE_AT}); fold finished records with `integrator refs archive`"
        )
    return {
        "total": total,
        "integrator": sum(folders.values()),
        "byFolder": dict(sorted(folders.items())),
        "records": records,
        "archivePrefix": refnames.ARCHIVE,
        "advice": advice,
    }


@dataclass(frozen=True)
class ArchiveRun:
    """One `refs archive`: each kind's report, and the repository's ref count around it."""

    dry_run: bool
    older_than: timedelta
    reports: list[KindReport]
    before: int
    after: int
    seconds: float

    def wire(self) -> dict[str, Any]:
        return {
            "dryRun": self.dry_run,
            "olderThanSeconds": int(self.older_than.total_seconds()),
            "refsBefore": self.before,
            "refsAfter": self.after,
            "seconds": round(self.seconds, 3),
            "kinds": [r.wire() for r in self.reports],
        }


def archive_kinds(
    canonical: Canonical, kinds: Sequence[str], older_than: timedelta, *, dry_run: bool
) -> ArchiveRun:
    """Archive the finished records of `kinds` older than `older_than`, kind by kind."""
    before = ref_count(canonical)
    started = time.monotonic()
    archiver = Archiver(canonical)
    reports: list[KindReport] = []
    for kind in kinds:
        try:
            reports.append(archiver.run(kind, older_than, dry_run=dry_run))
        except RefMovedError as err:
            raise InfrastructureError(
                f"{kind}: records kept moving while being archived ({err}); run it again"
            ) from err
    seconds = time.monotonic() - started
    return ArchiveRun(dry_run, older_than, reports, before, ref_count(canonical), seconds)


def record_history(
    canonical: Canonical, kind: str, name: str, oid: str, limit: int
) -> list[dict[str, str]]:
    """The record's commits, newest first: first parents, except that a review chain's
    first record has the candidate as its parent, so its records are followed instead."""
    if kind == "archived":
        from integrator.records.held import history

        oids = [c for c, _ in reversed(history(canonical, name))][:limit]
    else:
        oids, commit = [], canonical.commit(oid)
        while len(oids) < limit:
            oids.append(str(commit.id))
            if not commit.parent_ids:
                break
            commit = canonical.commit(str(commit.parent_ids[0]))
    return [{"commit": c, "subject": canonical.commit(c).message.split("\n", 1)[0]} for c in oids]


def show_document(canonical: Canonical, kind: str, name: str, limit: int) -> dict[str, Any]:
    """One record, live or archived, and its commits (at most `limit`, newest first), as
    `refs show --json` prints it."""
    ref = PREFIXES[kind] + name
    oid = canonical.ref(ref)
    doc: dict[str, Any] = {"kind": kind, "name": name, "ref": ref}
    if oid is not None:
        doc.update({"where": "ref", "oid": oid})
    else:
        entry = archived_entry(canonical, kind, name)
        if entry is None:
            raise UsageError(
                f"no {kind} record {name!r}: neither {ref} nor an entry of {archive_ref(kind)}"
            )
        oid = entry.oid
        doc.update({"where": archive_ref(kind), **entry.wire()})
    doc["history"] = record_history(canonical, kind, name, oid, limit)
    return doc
