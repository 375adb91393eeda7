"""The result cache's entries in git: stored once per key, found again, pruned oldest
first."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal

import pytest

from integrator.documents.promotion import Ejected, PromotionRecord, ValidationResult
from integrator.documents.verdict import Code
from integrator.records import validation_cache, validations
from integrator.records.canonical import Canonical
from integrator.records.prepare import prepare
from tests.gitutil import commit_files, declare_bare, git, make_repo


def test_entries_are_stored_once_found_by_key_and_pruned_oldest_first(tmp_path: Path) -> None:
    """Five final results under five keys: a second store of a key is refused, lookups
    find each, and pruning to two keeps the two newest."""
    repo = declare_bare(make_repo(tmp_path / "canon"))
    head = commit_files(repo, {"a.txt": "a\n"}, "base", ref="refs/heads/main")
    prepare(repo, target="main")
    start = datetime(2030, 1, 1, tzinfo=UTC)
    keys = []
    with Canonical(repo) as canonical:
        tree = str(canonical.commit(head).tree_id)
        for i in range(5):
            key = validation_cache.key_of(tree, f"s{i}", ["make", "check"], "v1")
            result = ValidationResult(
                target="main", head=head, tree=tree, base=head, status="pass", final=True,
                attempt=1, at=start + timedelta(minutes=i), key=key,
            )  # fmt: skip
            commit = validations.write_result(canonical, result, None)
            assert validation_cache.store(canonical, "main", key, commit)
            assert not validation_cache.store(canonical, "main", key, commit)
            keys.append(key)
        assert all(validation_cache.lookup(canonical, "main", k) for k in keys)
        # An entry pointing at a result recorded under another key is no entry.
        other = validation_cache.key_of(tree, "elsewhere", ["make", "check"], "v1")
        git("update-ref", validation_cache.cache_prefix("main") + other, commit, cwd=repo)
        assert validation_cache.lookup(canonical, "main", other) is None
        git("update-ref", "-d", validation_cache.cache_prefix("main") + other, cwd=repo)
        assert validation_cache.key_of(tree, "s0", ["make", "check"], "v2") not in keys
        assert validation_cache.prune(canonical, "main", keep=2) == 3
        kept = [k for k in keys if validation_cache.lookup(canonical, "main", k) is not None]
    assert kept == keys[3:]


def test_a_failure_recorded_before_the_newest_ejection_is_not_reused(tmp_path: Path) -> None:
    """A cached failure is found only when it is newer than `fails_after`: a requeued
    candidate is validated again rather than refused by the failure that ejected it."""
    repo = declare_bare(make_repo(tmp_path / "canon"))
    head = commit_files(repo, {"a.txt": "a\n"}, "base", ref="refs/heads/main")
    prepare(repo, target="main")
    at = datetime(2030, 1, 1, tzinfo=UTC)
    with Canonical(repo) as canonical:
        tree = str(canonical.commit(head).tree_id)
        key = validation_cache.key_of(tree, None, ["make", "check"], None)
        failed = ValidationResult(
            target="main", head=head, tree=tree, base=head, status="fail", final=True,
            attempt=1, at=at, key=key,
        )  # fmt: skip
        validation_cache.store(
            canonical, "main", key, validations.write_result(canonical, failed, None)
        )
        before, after = at - timedelta(seconds=1), at + timedelta(seconds=1)
        assert validation_cache.lookup(canonical, "main", key, fails_after=before) is not None
        assert validation_cache.lookup(canonical, "main", key, fails_after=after) is None
        assert validation_cache.lookup(canonical, "main", key) is None


Action = Literal["promote", "eject", "reorder"]


def _record(kind: Action, at: datetime, head: str, scope: str | None) -> PromotionRecord:
    culprit = Ejected(
        landing=head, staging=head, code=Code.VALIDATION_FAILED, detail="x", scope=scope
    )
    return PromotionRecord(
        action=kind, target="main", at=at, actor="test", before=head, after=head,
        ejected=[culprit] if kind == "eject" else [],
    )  # fmt: skip


def test_the_newest_ejections_are_read_incrementally_as_a_fresh_reader_walks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Promotion records appended one by one, ejections among them, past the walk's limit:
    after each, the long-lived reader (which reads only the records written since its last
    walk) answers as a fresh one reading the whole chain back to its limit — an ejection
    that falls out of the newest `EJECTION_WALK` records is forgotten by both — and a
    record rewritten under the ref (a chain that does not hold the last walk) is read anew."""
    monkeypatch.setattr(validation_cache, "EJECTION_WALK", 6)
    repo = declare_bare(make_repo(tmp_path / "canon"))
    head = commit_files(repo, {"a.txt": "a\n"}, "base", ref="refs/heads/main")
    prepare(repo, target="main")
    start = datetime(2030, 1, 1, tzinfo=UTC)
    kinds: list[Action] = ["promote", "eject", "promote", "reorder", "eject", "promote"]
    kinds += ["promote"] * 6
    scopes = [None, "web", None, None, "api", None] + [None] * 6
    reads: list[str] = []
    real = validations.read_promotion

    def counted(canonical: Canonical, commit: str) -> PromotionRecord | None:
        reads.append(commit)  # the real reader, its calls recorded
        return real(canonical, commit)

    ref = validations.promotion_ref("main")
    with Canonical(repo) as kept:
        parent: str | None = None
        answers = []
        for i, (kind, scope) in enumerate(zip(kinds, scopes, strict=True)):
            record = _record(kind, start + timedelta(minutes=i), head, scope)
            parent = validations.write_promotion(kept, record, parent)
            git("update-ref", ref, parent, cwd=repo)
            monkeypatch.setattr(validations, "read_promotion", counted)
            reads.clear()
            incremental = validation_cache.last_ejections(kept, "main")
            assert len(reads) == 1  # only the record written since the last walk
            monkeypatch.setattr(validations, "read_promotion", real)
            with Canonical(repo) as fresh:
                assert incremental == validation_cache.last_ejections(fresh, "main")
            answers.append(incremental)
        assert answers[4] == {None: start + timedelta(minutes=4), "api": start + timedelta(minutes=4),
                              "web": start + timedelta(minutes=1)}  # fmt: skip
        assert answers[-1] == {}  # both ejections are older than the newest six records
        # The ref put back at an older record: the walk starts again from there.
        assert parent is not None
        older = kept.commit(parent).parent_ids[0]
        for _ in range(6):
            older = kept.commit(str(older)).parent_ids[0]
        git("update-ref", ref, str(older), cwd=repo)
        with Canonical(repo) as fresh:
            assert validation_cache.last_ejections(kept, "main") == (
                validation_cache.last_ejections(fresh, "main")
            )
            assert "api" in validation_cache.last_ejections(kept, "main")
