"""Bounded refs: finished records folded into one archive ref per kind.

Every claim, review record chain, expansion request and verdict is a ref of its own, and a
year of agents makes 100,000 of them; hosts slow down past a few thousand. `Archiver`
folds the finished ones older than an age into `refs/integrator/archive/<kind>`, a chain
of commits: each has the previous archive commit as first parent and the archived
records' tip commits as further parents (at most `MAX_PARENTS` in all), so every archived
chain stays reachable and `git log` of the archive ref shows it. The first archive commit
of a kind is a root, so `git log --first-parent` of the ref lists archive commits only.
Each archive commit's tree holds the index a reader finds one record by
(`integrator.records.archive_index`).

A batch — the archive ref's update and the deletion of every record it folds in, each
with the value it was read at — is ONE ref transaction through `canonical.updater`, at
most `BATCH_REFS` ref updates, so a crash leaves either the refs or the archive, never
neither; a record that moved since it was read fails its batch, which is read again and
retried. Running twice archives nothing new: an archived record has no ref any more.

Which records are finished (`decide`): a claim consumed or revoked whose task has no held
candidate and no expansion request still waiting; every chain under
`refs/integrator/archived/` (its review ended); an expansion request granted or dismissed;
a verdict on an intake repository (read, approximated by its age). Held candidates,
pending requests and live claims are never archived.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pygit2

from integrator import faults, jsontext, refnames
from integrator.documents.claim import parse_claim_state, view_from_state
from integrator.errors import IntegratorError, RefMovedError, UsageError
from integrator.plumbing import git, transaction
from integrator.plumbing.packs import ObjectBuffer, commit_bytes, maybe_repack, tree_bytes
from integrator.records.archive_index import (
    INDEX,
    KINDS,
    PREFIXES,
    SUMMARY,
    Entry,
    archive_ref,
    archived_count,
    shard_of,
)
from integrator.records.canonical import Canonical, signature

# The states a kind's record is finished in (None: every state, the ref's existence says so).
FINISHED: dict[str, frozenset[str] | None] = {
    "claims": frozenset({"consumed", "revoked"}),
    "archived": None,
    "expansions": frozenset({"granted", "dismissed"}),
    "verdicts": None,
}
MAX_PARENTS = 256  # per archive commit, the previous archive commit included
BATCH_REFS = 500  # ref updates per transaction, the archive ref's own included
RETRIES = 5  # batches lost to a concurrent writer, read again and retried
FAULT_POINT = "archive-before-transaction"


# -- deciding -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Record:
    """One record ref as read: its tip, the state it says, and what still waits on it."""

    kind: str
    name: str
    ref: str
    oid: str
    state: str | None  # None: unreadable
    committed_at: datetime
    waiting: str | None = None
    generation: int | None = None


@dataclass(frozen=True)
class Decision:
    archive: bool
    reason: str


def _age_text(age: timedelta) -> str:
    seconds = int(age.total_seconds())
    if seconds >= 86400:
        return f"{seconds // 86400}d"
    if seconds >= 3600:
        return f"{seconds // 3600}h"
    return f"{seconds}s"


def age_of(record: Record, now: datetime) -> timedelta:
    """The time since the record's newest commit (a tip dated ahead of `now` is 0 old)."""
    return max(now - record.committed_at, timedelta(0))


def decide(record: Record, now: datetime, older_than: timedelta) -> Decision:
    """Whether `record` is finished and old enough to archive, and why (a pure function)."""
    if record.state is None:
        return Decision(False, "unreadable: kept for a person to look at")
    finished = FINISHED[record.kind]
    if finished is not None and record.state not in finished:
        return Decision(False, f"{record.state}: not finished")
    if record.waiting:
        return Decision(False, record.waiting)
    age = age_of(record, now)
    if age < older_than:
        return Decision(False, f"{record.state}, younger than {_age_text(older_than)}")
    return Decision(True, f"{record.state}, {_age_text(age)} old")


# -- reading the records --------------------------------------------------------------------


def _json_at(repo: pygit2.Repository, commit: pygit2.Commit, path: str) -> object:
    try:
        blob = repo[commit.tree[path].id]
    except KeyError:
        return None
    if not isinstance(blob, pygit2.Blob):
        return None
    try:
        return jsontext.loads(blob.data)
    except ValueError:
        return None


def _text(doc: object, *keys: str) -> str | None:
    for key in keys:
        if not isinstance(doc, dict):
            return None
        doc = doc.get(key)
    return doc if isinstance(doc, str) else None


def waiting_tasks(canonical: Canonical) -> dict[str, str]:
    """Tasks something still waits on: a held candidate, a pending expansion request."""
    repo = canonical.repo
    out: dict[str, str] = {}
    for ref, oid in git.refs_under(repo, refnames.HELD).items():
        commit = repo.get(oid)
        if not isinstance(commit, pygit2.Commit):
            continue
        verdict = _json_at(repo, commit, "verdict.json")
        task = _text(verdict, "taskId") or _text(
            _json_at(repo, commit, "submission.json"), "contract", "taskId"
        )
        if task is not None:
            out.setdefault(task, f"a held candidate waits ({ref.removeprefix(refnames.HELD)})")
    for ref, oid in git.refs_under(repo, PREFIXES["expansions"]).items():
        commit = repo.get(oid)
        state = (
            _json_at(repo, commit, "expansion.json") if isinstance(commit, pygit2.Commit) else None
        )
        if _text(state, "state") == "pending":
            task = ref.removeprefix(PREFIXES["expansions"]).rpartition("/")[0]
            out.setdefault(task, "an expansion request waits")
    return out


def _state(canonical: Canonical, kind: str, commit: pygit2.Commit) -> tuple[str | None, int | None]:
    """(state, generation) of a record's tip; (None, None) when it does not read as one."""
    repo, oid = canonical.repo, str(commit.id)
    if kind == "claims":  # claim.json alone says the state (the contract is not parsed)
        try:
            view = view_from_state(parse_claim_state(canonical.blob_at(oid, "claim.json")))
        except (IntegratorError, KeyError, ValueError):
            return None, None
        return view.state, view.generation
    if kind == "archived":
        return _text(_json_at(repo, commit, "action.json"), "action"), None
    if kind == "expansions":
        return _text(_json_at(repo, commit, "expansion.json"), "state"), None
    # A verdict published by the intake: its decision, or `rejected` (a malformed submission).
    if "rejection.json" in commit.tree:
        return "rejected", None
    return _text(_json_at(repo, commit, "verdict.json"), "decision") or "recorded", None


def read_records(canonical: Canonical, kind: str) -> list[Record]:
    """Every record ref of `kind`, read (sorted by ref name)."""
    if kind not in PREFIXES:
        raise UsageError(f"unknown kind {kind!r} (one of {', '.join(KINDS)})")
    prefix = PREFIXES[kind]
    waiting = waiting_tasks(canonical) if kind == "claims" else {}
    out = []
    for ref, oid in sorted(git.refs_under(canonical.repo, prefix).items()):
        name = ref.removeprefix(prefix)
        commit = canonical.repo.get(oid)
        if not isinstance(commit, pygit2.Commit):  # only a commit can be an archive parent
            out.append(Record(kind, name, ref, oid, None, datetime.fromtimestamp(0, UTC)))
            continue
        state, generation = _state(canonical, kind, commit)
        at = datetime.fromtimestamp(commit.commit_time, UTC)
        out.append(Record(kind, name, ref, oid, state, at, waiting.get(name), generation))
    return out


# -- writing --------------------------------------------------------------------------------


class _Index:
    """The archive's tree as it grows within one run: shards read once, rewritten when touched."""

    def __init__(self, canonical: Canonical, kind: str, tip: str | None) -> None:
        self.repo = canonical.repo
        self.kind = kind
        self.files: dict[bytes, tuple[bytes, bytes]] = {}
        self.content: dict[bytes, bytes] = {}
        self.records = 0
        if tip is not None:
            tree = canonical.commit(tip).tree
            if INDEX in tree:
                folder = self.repo[tree[INDEX].id]
                if isinstance(folder, pygit2.Tree):
                    self.files = {(e.name or "").encode(): (b"100644", e.id.raw) for e in folder}
            self.records = archived_count(canonical, kind)

    def add(self, entry: Entry) -> None:
        name = _shard_file(entry.name)
        if name not in self.content:
            old = self.files.get(name)
            blob = self.repo[pygit2.Oid(raw=old[1])] if old else None
            self.content[name] = bytes(blob.data) if isinstance(blob, pygit2.Blob) else b""
        self.content[name] += entry.line()
        self.records += 1

    def tree(self, buffer: ObjectBuffer, touched: set[bytes]) -> bytes:
        for name in touched:
            self.files[name] = (b"100644", buffer.add("blob", self.content[name]))
        summary = {"schema": "integrator.archive.v1", "kind": self.kind, "records": self.records}
        root = {
            SUMMARY.encode(): (b"100644", buffer.add("blob", json.dumps(summary).encode() + b"\n")),
        }
        if self.files:
            root[INDEX.encode()] = (b"40000", buffer.add("tree", tree_bytes(self.files)))
        return buffer.add("tree", tree_bytes(root))


def _shard_file(name: str) -> bytes:
    """The name of `name`'s shard inside the index folder."""
    return shard_of(name).removeprefix(f"{INDEX}/").encode()


def _chunks(items: Sequence[Record], size: int) -> Iterator[Sequence[Record]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


@dataclass
class KindReport:
    """What one kind's run did (or, dry, would do)."""

    kind: str
    archived: list[tuple[Record, str]] = field(default_factory=list)
    kept: list[tuple[Record, str]] = field(default_factory=list)
    transactions: int = 0
    commits: int = 0
    retries: int = 0
    tip: str | None = None

    def wire(self) -> dict[str, object]:
        def row(record: Record, why: str) -> dict[str, object]:
            return {"name": record.name, "oid": record.oid, "state": record.state, "why": why}

        return {
            "kind": self.kind,
            "archiveRef": archive_ref(self.kind),
            "archived": [row(r, why) for r, why in self.archived],
            "kept": [row(r, why) for r, why in self.kept],
            "transactions": self.transactions,
            "commits": self.commits,
            "retries": self.retries,
            "tip": self.tip,
        }


class Archiver:
    """Folds finished records into `refs/integrator/archive/<kind>`, one transaction a batch."""

    def __init__(
        self,
        canonical: Canonical,
        *,
        batch_refs: int = BATCH_REFS,
        max_parents: int = MAX_PARENTS,
    ) -> None:
        if batch_refs < 2 or max_parents < 2:
            raise UsageError("a batch needs room for the archive ref and one record")
        self.canonical = canonical
        self.batch_refs = batch_refs
        self.max_parents = max_parents

    def plan(self, kind: str, now: datetime, older_than: timedelta) -> KindReport:
        """Read every record of `kind` (fresh from the server in remote mode) and decide."""
        self.canonical.refresh()
        report = KindReport(kind, tip=self.canonical.ref(archive_ref(kind)))
        for record in read_records(self.canonical, kind):
            decision = decide(record, now, older_than)
            (report.archived if decision.archive else report.kept).append((record, decision.reason))
        batches = -(-len(report.archived) // (self.batch_refs - 1))
        report.transactions = batches
        report.commits = sum(
            -(-len(chunk) // (self.max_parents - 1))
            for chunk in _chunks([r for r, _ in report.archived], self.batch_refs - 1)
        ) + (1 if report.archived and report.tip is None else 0)
        return report

    def run(
        self,
        kind: str,
        older_than: timedelta,
        *,
        dry_run: bool = False,
        now: datetime | None = None,
    ) -> KindReport:
        """Archive `kind`'s finished records older than `older_than` (or say what would be)."""
        when = now or self.canonical.clock()
        report = self.plan(kind, when, older_than)
        if dry_run or not report.archived:
            return report
        done: list[tuple[Record, str]] = []
        transactions = commits = 0
        for attempt in range(RETRIES + 1):
            tip = self.canonical.ref(archive_ref(kind))
            index = _Index(self.canonical, kind, tip)
            reasons = {r.ref: why for r, why in report.archived}
            records = [r for r, _ in report.archived]
            try:
                for batch in _chunks(records, self.batch_refs - 1):
                    tip, written = self._batch(kind, batch, index, tip, when)
                    transactions += 1
                    commits += written
                    done.extend((r, reasons[r.ref]) for r in batch)
                break
            except RefMovedError:
                if attempt == RETRIES:
                    raise
                report.retries += 1
                retried = self.plan(kind, when, older_than)  # read everything again
                report.archived, report.kept = retried.archived, retried.kept
        maybe_repack(self.canonical.repo)
        report.archived = done
        report.transactions, report.commits = transactions, commits
        report.tip = self.canonical.ref(archive_ref(kind))
        return report

    def _batch(
        self, kind: str, batch: Sequence[Record], index: _Index, tip: str | None, now: datetime
    ) -> tuple[str, int]:
        """Write the archive commits for `batch`, then the one transaction; (new tip, commits)."""
        buffer = ObjectBuffer(self.canonical.repo)
        sig = signature(now)
        previous, written = tip, 0
        if previous is None:
            root = index.tree(buffer, set())
            message = f"archive {kind}: start\n\nIntegrator-Archive: {kind}\n"
            previous = buffer.add("commit", commit_bytes(root, [], sig, sig, message)).hex()
            written += 1
        for chunk in _chunks(batch, self.max_parents - 1):
            touched = set()
            for record in chunk:
                assert record.state is not None
                entry = Entry(
                    kind,
                    record.name,
                    record.ref,
                    record.oid,
                    record.state,
                    record.committed_at,
                    now,
                    record.generation,
                )
                index.add(entry)
                touched.add(_shard_file(record.name))
            root = index.tree(buffer, touched)
            parents = list(dict.fromkeys([previous, *(r.oid for r in chunk)]))
            lines = "".join(f"{r.name} {r.oid} {r.state}\n" for r in chunk)
            message = (
                f"archive {kind}: {len(chunk)} finished record(s)\n\n{lines}\n"
                f"Integrator-Archive: {kind}\n"
            )
            raw = [bytes.fromhex(p) for p in parents]
            previous = buffer.add("commit", commit_bytes(root, raw, sig, sig, message)).hex()
            written += 1
        buffer.flush()
        if git.durable(self.canonical.repo):
            git.sync_objects(self.canonical.repo)
        faults.point(FAULT_POINT)  # objects written, no ref touched
        ops = [
            transaction.update(archive_ref(kind), previous, tip),
            *(transaction.delete(r.ref, r.oid) for r in batch),
        ]
        self.canonical.updater.apply(ops)
        return previous, written


def archive(
    canonical: Canonical,
    kinds: Sequence[str],
    older_than: timedelta,
    *,
    dry_run: bool = False,
    now: datetime | None = None,
) -> list[KindReport]:
    """Archive each of `kinds` in turn (see the module's docstring)."""
    archiver = Archiver(canonical)
    return [archiver.run(kind, older_than, dry_run=dry_run, now=now) for kind in kinds]
