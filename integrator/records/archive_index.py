"""The archive index: where a record folded into `refs/integrator/archive/<kind>` is found.

Each archive commit's tree holds `summary.json` (kind, record count) and an index,
`index/<shard>.jsonl`, one JSON object per line: `kind`, `name`, `ref`, `oid` (the tip the
record's ref had), `state`, `committedAt` (that tip's committer time), `archivedAt`,
`ageSeconds`, and for claims `generation`. The shard is the first three hex digits of
SHA-256 over the name's first component (the task id of `expansions` and `verdicts`, so
one task's records share a shard): a reader finds one record by reading one blob, without
walking any history. A name archived again later has a newer line below the older; the
last one is its latest. `integrator.records.archive` writes the archive.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime

import pygit2

from integrator import jsontext, refnames
from integrator.documents.claim import Claim
from integrator.plumbing import git
from integrator.records.canonical import Canonical

PREFIXES = refnames.ARCHIVE_PREFIXES
KINDS = tuple(PREFIXES)
INDEX = "index"
SUMMARY = "summary.json"
_OID = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")


def archive_ref(kind: str) -> str:
    return f"{refnames.ARCHIVE}{kind}"


def shard_of(name: str) -> str:
    """The index file holding `name`'s lines: `index/<3 hex digits>.jsonl`."""
    key = name.split("/", 1)[0]
    return f"{INDEX}/{hashlib.sha256(key.encode('utf-8', 'surrogateescape')).hexdigest()[:3]}.jsonl"


@dataclass(frozen=True)
class Entry:
    """One line of an archive index: a record as it was archived."""

    kind: str
    name: str
    ref: str
    oid: str
    state: str
    committed_at: datetime
    archived_at: datetime
    generation: int | None = None

    def wire(self) -> dict[str, object]:
        doc: dict[str, object] = {
            "kind": self.kind,
            "name": self.name,
            "ref": self.ref,
            "oid": self.oid,
            "state": self.state,
            "committedAt": self.committed_at.isoformat(),
            "archivedAt": self.archived_at.isoformat(),
            "ageSeconds": max(int((self.archived_at - self.committed_at).total_seconds()), 0),
        }
        if self.generation is not None:
            doc["generation"] = self.generation
        return doc

    def line(self) -> bytes:
        return json.dumps(self.wire(), sort_keys=True, separators=(",", ":")).encode() + b"\n"

    @classmethod
    def parse(cls, kind: str, line: bytes) -> Entry | None:
        """The entry of one index line; None for a line that is not one."""
        try:
            doc = jsontext.loads(line)
            name, ref, oid, state = doc["name"], doc["ref"], doc["oid"], doc["state"]
            committed = datetime.fromisoformat(doc["committedAt"])
            archived = datetime.fromisoformat(doc["archivedAt"])
        except (ValueError, KeyError, TypeError):
            return None
        generation = doc.get("generation")
        if not all(isinstance(v, str) for v in (name, ref, oid, state)) or not _OID.fullmatch(oid):
            return None
        if doc.get("kind") != kind or ref != PREFIXES[kind] + name:
            return None
        return cls(
            kind,
            name,
            ref,
            oid,
            state,
            committed,
            archived,
            generation if type(generation) is int else None,
        )


def _tree_at(canonical: Canonical, kind: str) -> pygit2.Tree | None:
    tip = canonical.ref(archive_ref(kind))
    if tip is None:
        return None
    commit = canonical.repo.get(tip)
    return commit.tree if isinstance(commit, pygit2.Commit) else None


def _lines(canonical: Canonical, tree: pygit2.Tree, path: str) -> list[bytes]:
    try:
        blob = canonical.repo[tree[path].id]
    except KeyError:
        return []
    return bytes(blob.data).splitlines() if isinstance(blob, pygit2.Blob) else []


def archived_entry(canonical: Canonical, kind: str, name: str) -> Entry | None:
    """The latest index entry for `name` in the archive of `kind`, or None."""
    tree = _tree_at(canonical, kind)
    if tree is None:
        return None
    for line in reversed(_lines(canonical, tree, shard_of(name))):
        entry = Entry.parse(kind, line)
        if entry is not None and entry.name == name and git.has_object(canonical.repo, entry.oid):
            return entry
    return None


def find_archived(canonical: Canonical, kind: str, name: str) -> str | None:
    """The tip commit `name`'s ref of `kind` had when it was archived, or None."""
    entry = archived_entry(canonical, kind, name)
    return entry.oid if entry is not None else None


def record_tip(canonical: Canonical, kind: str, name: str) -> str | None:
    """The tip of `name`'s record ref of `kind`, else the one it had when it was archived."""
    return canonical.ref(PREFIXES[kind] + name) or find_archived(canonical, kind, name)


def archived_claim(canonical: Canonical, task_id: str) -> Claim | None:
    """The claim of `task_id` as it was archived (its newest commit), or None."""
    oid = find_archived(canonical, "claims", task_id)
    return canonical.claim_at(oid) if oid is not None else None


def archived_entries(canonical: Canonical, kind: str, *, task: str | None = None) -> list[Entry]:
    """The latest entry of every name archived (with `task`: its records only, one shard)."""
    tree = _tree_at(canonical, kind)
    if tree is None:
        return []
    if task is not None:
        paths = [shard_of(task)]
    else:
        try:
            folder = canonical.repo[tree[INDEX].id]
        except KeyError:
            return []
        paths = [f"{INDEX}/{e.name}" for e in folder] if isinstance(folder, pygit2.Tree) else []
    latest: dict[str, Entry] = {}
    for path in paths:
        for line in _lines(canonical, tree, path):
            entry = Entry.parse(kind, line)
            if entry is None:
                continue
            if task is None or entry.name == task or entry.name.startswith(f"{task}/"):
                latest[entry.name] = entry
    return sorted(latest.values(), key=lambda e: e.name)


def archived_count(canonical: Canonical, kind: str) -> int:
    """How many records the archive of `kind` holds (from its summary: one blob read)."""
    tree = _tree_at(canonical, kind)
    if tree is None:
        return 0
    try:
        blob = canonical.repo[tree[SUMMARY].id]
        count = jsontext.loads(blob.data)["records"] if isinstance(blob, pygit2.Blob) else 0
    except (KeyError, ValueError, TypeError):
        return 0
    return count if type(count) is int else 0
