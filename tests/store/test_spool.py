"""The spool: Maildir moves, the submission format, bundles and the quarantine import."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from integrator.cli import main
from integrator.documents.submission import Submission
from integrator.documents.verdict import Code
from integrator.errors import ConfigurationError, UsageError
from integrator.plumbing import git
from integrator.plumbing.bundles import bundle_refs, create_bundle, import_bundle, quarantine_prefix
from integrator.refnames import refname_problem
from integrator.store.spool import BUNDLE_FILE, ID_RE, SUBMISSION_FILE, Spool, new_id
from tests.daemon_world import World
from tests.factories import contract_doc
from tests.gitutil import commit_files, make_repo
from tests.gitutil import git as run


def submission_doc(**overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema": "integrator.submission.v1",
        "contract": {"schema": "coding.workspace.ownership.v1", "taskId": "t1"},
        "candidate": "a" * 40,
        "submitter": {"user": "agent", "host": "box", "pid": 42},
        "submittedAt": "2026-06-01T12:00:00Z",
    }
    doc.update(overrides)
    return doc


def create_submission(**overrides: Any) -> Submission:
    return Submission.model_validate_json(json.dumps(submission_doc(**overrides)))


def test_ids_sort_by_time_and_are_ref_components() -> None:
    """Ids sort in submission-time order and can name a held ref."""
    start = datetime(2026, 6, 1, tzinfo=UTC)
    ids = [new_id(start + timedelta(microseconds=i)) for i in (3, 1, 2, 1000000)]
    assert sorted(ids) == [ids[1], ids[2], ids[0], ids[3]]
    for sid in ids:
        assert ID_RE.match(sid)
        assert refname_problem(sid) is None


def test_submit_is_atomic_into_new(tmp_path: Path) -> None:
    """A published submission sits complete in new/, and tmp/ is left empty."""
    spool = Spool(tmp_path / "spool")
    sid = spool.submit(create_submission())
    assert spool.entries("new") == [sid]
    assert spool.entries("tmp") == []
    stored = Submission.model_validate_json(
        (spool.folder("new") / sid / SUBMISSION_FILE).read_bytes()
    )
    assert stored == create_submission()


def test_failed_draft_leaves_nothing_behind(tmp_path: Path) -> None:
    """A producer that fails halfway leaves neither tmp/ nor new/ entries."""
    spool = Spool(tmp_path / "spool")

    def producer() -> None:
        with spool.draft() as draft:
            (draft / BUNDLE_FILE).write_bytes(b"partial")
            raise RuntimeError("producer died")

    with pytest.raises(RuntimeError):
        producer()
    assert spool.entries("tmp") == []
    assert spool.entries("new") == []


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"extra": 1}, "extra: unknown field"),
        ({"submittedAt": "2026-06-01T12:00:00"}, "submittedAt.*timezone"),
        ({"candidate": "HEAD"}, "candidate"),
        ({"bundle": "../../etc/passwd.bundle"}, "bundle"),
        ({"schema": "integrator.submission.v2"}, "schema"),
        ({"contract": "not an object"}, "contract"),
    ],
)
def test_malformed_submission_says_what_is_wrong(
    tmp_path: Path, overrides: dict[str, Any], problem: str
) -> None:
    """Loading a malformed submission raises UsageError naming the offending field."""
    spool = Spool(tmp_path / "spool").ensure()
    folder = spool.folder("work") / new_id()
    folder.mkdir()
    (folder / SUBMISSION_FILE).write_text(json.dumps(submission_doc(**overrides)))
    with pytest.raises(UsageError, match=problem):
        spool.load(folder)


def test_missing_bundle_is_malformed(tmp_path: Path) -> None:
    """A submission that names a bundle it does not carry is malformed."""
    spool = Spool(tmp_path / "spool").ensure()
    sid = spool.submit(create_submission(bundle=BUNDLE_FILE))
    claimed = spool.claim(sid)
    assert claimed is not None
    with pytest.raises(UsageError, match="missing"):
        spool.load(claimed.path)


@pytest.mark.parametrize("kind", ["folder", "fifo", "symlink", "huge"])
def test_a_submission_file_that_is_not_a_small_regular_file_is_malformed(
    tmp_path: Path, kind: str
) -> None:
    """A folder, a pipe (which would block the daemon), a link or a file past the limit
    rejects that submission (UsageError), never the queue behind it (InfrastructureError)."""
    from integrator.limits import SUBMISSION_BYTES

    spool = Spool(tmp_path / "spool").ensure()
    folder = spool.folder("work") / new_id()
    folder.mkdir()
    target = folder / SUBMISSION_FILE
    if kind == "folder":
        target.mkdir()
    elif kind == "fifo":
        os.mkfifo(target)
    elif kind == "symlink":
        real = tmp_path / "elsewhere.json"
        real.write_text(json.dumps(submission_doc()))
        target.symlink_to(real)
    else:
        target.write_bytes(b" " * (SUBMISSION_BYTES + 1))
    with pytest.raises(UsageError, match=SUBMISSION_FILE):
        spool.load(folder)


def test_a_decided_id_submitted_again_is_filed_beside_the_first(tmp_path: Path) -> None:
    """A copy of a decided submission put back into new/ is filed under a suffixed name;
    the first stays where it is."""
    spool = Spool(tmp_path / "spool").ensure()
    sid = spool.submit(create_submission())
    assert spool.claim(sid) is not None
    spool.file(sid, "accepted", "verdict.json", b"{}\n")
    first = spool.folder("accepted") / sid
    (spool.folder("work") / sid).mkdir()
    (spool.folder("work") / sid / SUBMISSION_FILE).write_text("{}")
    spool.file(sid, "accepted", "verdict.json", b"{}\n")
    assert first.is_dir() and (first / "verdict.json").exists()
    names = sorted(p.name for p in spool.folder("accepted").iterdir())
    assert len(names) == 2 and names[0] == sid and names[1].startswith(f"{sid}.again-")


def test_claim_moves_a_submission_into_work(tmp_path: Path) -> None:
    """Claiming renames new/<id> to work/<id>; claiming it again finds nothing."""
    spool = Spool(tmp_path / "spool").ensure()
    sid = spool.submit(create_submission())
    claimed = spool.claim(sid)
    assert claimed is not None and claimed.problem is None
    assert claimed.path == spool.folder("work") / sid
    assert spool.claim(sid) is None


def test_stray_entries_get_a_generated_name(tmp_path: Path) -> None:
    """A file dropped into new/ is wrapped under a fresh id, never filed by its own name."""
    spool = Spool(tmp_path / "spool").ensure()
    (spool.folder("new") / "evil name; rm -rf").write_text("x")
    claimed = spool.claim("evil name; rm -rf")
    assert claimed is not None
    assert ID_RE.match(claimed.sid)
    assert claimed.problem is not None and "evil name" in claimed.problem
    assert (claimed.path / "stray-entry").read_text() == "x"


def test_abandoned_drafts_are_swept(tmp_path: Path) -> None:
    """Drafts older than Maildir's 36 hours are removed from tmp/; fresh ones stay."""
    spool = Spool(tmp_path / "spool").ensure()
    old, fresh = spool.folder("tmp") / "old", spool.folder("tmp") / "fresh"
    old.mkdir()
    fresh.mkdir()
    long_ago = time.time() - 37 * 3600
    os.utime(old, (long_ago, long_ago))
    assert spool.sweep_tmp() == ["old"]
    assert spool.entries("tmp") == ["fresh"]


def test_dot_files_are_not_entries(tmp_path: Path) -> None:
    """Editor and rsync temporaries (dot files) are never taken for submissions."""
    spool = Spool(tmp_path / "spool").ensure()
    (spool.folder("new") / ".rsync.tmp").write_text("x")
    assert spool.entries("new") == []


def test_one_daemon_per_spool(tmp_path: Path) -> None:
    """A second holder of the spool lock is refused with the first holder's pid."""
    spool = Spool(tmp_path / "spool").ensure()
    with spool.lock(), pytest.raises(ConfigurationError, match=str(os.getpid())), spool.lock():
        pass


def test_deleting_the_lock_file_does_not_let_a_second_daemon_in(tmp_path: Path) -> None:
    """The lock is on the spool folder: removing daemon.lock by hand changes nothing."""
    spool = Spool(tmp_path / "spool").ensure()
    with spool.lock():
        (spool.root / "daemon.lock").unlink()
        with pytest.raises(ConfigurationError, match="another daemon"), spool.lock():
            pass
    with spool.lock():
        pass  # released with the first holder


def test_find_locates_a_submission(tmp_path: Path) -> None:
    """`find` says which folder holds an id, and refuses names that are not ids."""
    spool = Spool(tmp_path / "spool").ensure()
    sid = spool.submit(create_submission())
    assert spool.find(sid) == ("new", spool.folder("new") / sid)
    assert spool.find("../new") is None


def _clone_with_candidate(tmp_path: Path) -> tuple[Path, Path, str, str]:
    canonical = make_repo(tmp_path / "canonical")
    base = commit_files(canonical, {"src/a.txt": "a\n"}, "base")
    clone = tmp_path / "clone"
    run("clone", "-q", str(canonical), str(clone), cwd=tmp_path)
    candidate = commit_files(clone, {"src/b.txt": "b\n"}, "agent work")
    return canonical, clone, base, candidate


def test_bundle_round_trip_lands_only_in_quarantine(tmp_path: Path) -> None:
    """A bundle from another clone imports the candidate under quarantine refs only."""
    canonical, clone, base, candidate = _clone_with_candidate(tmp_path)
    out = tmp_path / "x" / BUNDLE_FILE
    out.parent.mkdir()
    create_bundle(clone, candidate, base, out)
    assert [oid for oid, _ in bundle_refs(out)] == [candidate]
    assert git.refs_under(git.open_repo(clone), "refs/integrator/") == {}
    repo = git.open_repo(canonical)
    refs_before = set(repo.references)
    import_bundle(repo, "sid1", out, candidate, max_bytes=1 << 20)
    assert git.has_object(repo, candidate)
    added = set(git.open_repo(canonical).references) - refs_before
    assert added == {quarantine_prefix("sid1") + "0"}


def test_bundle_over_the_size_limit_is_refused(tmp_path: Path) -> None:
    """A bundle larger than the limit is refused before git reads it."""
    canonical, clone, base, candidate = _clone_with_candidate(tmp_path)
    out = tmp_path / BUNDLE_FILE
    create_bundle(clone, candidate, base, out)
    with pytest.raises(UsageError, match="limit"):
        import_bundle(git.open_repo(canonical), "s", out, candidate, max_bytes=10)


def test_bundle_missing_prerequisites_is_refused(tmp_path: Path) -> None:
    """A bundle whose base the canonical repository lacks does not verify."""
    canonical, clone, _, candidate = _clone_with_candidate(tmp_path)
    middle = commit_files(clone, {"src/c.txt": "c\n"}, "more", parent=candidate)
    out = tmp_path / BUNDLE_FILE
    create_bundle(clone, middle, candidate, out)  # prerequisite: candidate, unknown upstream
    with pytest.raises(UsageError, match="does not verify"):
        import_bundle(git.open_repo(canonical), "s", out, middle, max_bytes=1 << 20)


@pytest.mark.parametrize("data", [b"", b"PK\x03\x04zip", b"# v2 git bundle\nnot-an-oid x\n\n"])
def test_garbage_bundle_is_refused(tmp_path: Path, data: bytes) -> None:
    """Anything that is not a git bundle header is refused with a UsageError."""
    path = tmp_path / BUNDLE_FILE
    path.write_bytes(data)
    with pytest.raises(UsageError, match="bundle"):
        bundle_refs(path)


def test_submit_command_writes_a_submission(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`integrator submit` resolves the revision and publishes one submission."""
    repo = make_repo(tmp_path / "repo")
    commit_files(repo, {"a": "a"}, "base")
    head = run("rev-parse", "HEAD", cwd=repo)
    contract = tmp_path / "contract.json"
    contract.write_text(json.dumps(contract_doc(baseCommit=head)))
    spool = tmp_path / "spool"
    code = main(
        ["submit", "--create", "--spool", str(spool), "--contract", str(contract), "--candidate", "HEAD",
         "--repo", str(repo), "--json"]
    )  # fmt: skip
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    stored = Spool(spool).load(spool / "new" / out["submission"])[0]
    assert stored.candidate == head
    assert stored.submitter.repo == str(repo.resolve())


def test_submit_refuses_an_invalid_contract(tmp_path: Path) -> None:
    """`integrator submit` refuses locally a contract the gate would fence anyway."""
    repo = make_repo(tmp_path / "repo")
    commit_files(repo, {"a": "a"}, "base")
    contract = tmp_path / "contract.json"
    contract.write_text('{"schema": "coding.workspace.ownership.v1"}')
    code = main(
        ["submit", "--create", "--spool", str(tmp_path / "spool"), "--contract", str(contract),
         "--candidate", "HEAD", "--repo", str(repo)]
    )  # fmt: skip
    assert code == 2
    assert Spool(tmp_path / "spool").entries("new") == []


@pytest.mark.parametrize("rev", ["no-such-branch", "HEAD^{tree}", "--all", "HEAD~5"])
def test_submit_refuses_what_is_not_a_commit(
    tmp_path: Path, rev: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A revision that names no commit (or looks like an option) is refused; nothing is spooled."""
    repo = make_repo(tmp_path / "repo")
    commit_files(repo, {"a": "a"}, "base")
    contract = tmp_path / "contract.json"
    contract.write_text(json.dumps(contract_doc(baseCommit=run("rev-parse", "HEAD", cwd=repo))))
    code = main(
        ["submit", "--create", "--spool", str(tmp_path / "spool"), "--contract", str(contract),
         f"--candidate={rev}", "--repo", str(repo)]
    )  # fmt: skip
    assert code == ConfigurationError.exit_code
    assert "does not name a commit" in capsys.readouterr().err
    assert Spool(tmp_path / "spool").entries("new") == []


def test_submit_outside_a_repository_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    contract = tmp_path / "contract.json"
    contract.write_text(json.dumps(contract_doc()))
    (tmp_path / "plain").mkdir()
    for where, why in (
        (tmp_path / "plain", "not a git repository"),
        (tmp_path / "nope", "not a folder"),
    ):
        code = main(
            ["submit", "--create", "--spool", str(tmp_path / "spool"), "--contract", str(contract),
             "--candidate", "HEAD", "--repo", str(where)]
        )  # fmt: skip
        assert code == ConfigurationError.exit_code
        assert why in capsys.readouterr().err


@pytest.mark.parametrize("bundle", [False, True], ids=["spool", "bundle"])
def test_submit_runs_without_libgit2(tmp_path: Path, bundle: bool) -> None:
    """A real `integrator submit` (resolve, bundle, publish) imports neither pygit2 nor
    pydantic: agents run it after every task, and those are most of a cold start."""
    from tests.test_api import _modules_loaded

    repo = make_repo(tmp_path / "repo")
    commit_files(repo, {"a": "a"}, "base")
    base = run("rev-parse", "HEAD", cwd=repo)
    commit_files(repo, {"b": "b"}, "work")
    contract = tmp_path / "contract.json"
    contract.write_text(json.dumps(contract_doc(baseCommit=base)))
    spool = tmp_path / "spool"
    args = ["submit", "--create", "--spool", str(spool), "--contract", str(contract), "--candidate", "HEAD",
            "--repo", str(repo), *(["--bundle"] if bundle else [])]  # fmt: skip
    loaded = _modules_loaded(args)
    assert "integrator" in loaded and "pygit2" not in loaded and "pydantic" not in loaded
    [entry] = Spool(spool).entries("new")  # it did submit
    assert (spool / "new" / entry / BUNDLE_FILE).exists() == bundle


@pytest.mark.parametrize(
    ("bundle", "urgent", "pid", "repo"),
    [
        (None, False, None, None),
        ("candidate.bundle", True, 4242, "/src/clone"),
        (None, True, 0, ""),
    ],
)
def test_plain_submission_is_what_the_model_writes(
    bundle: str | None, urgent: bool, pid: int | None, repo: str | None
) -> None:
    """`integrator submit` writes the document without the models: byte for byte what the
    model writes for the same fields, and read back to the same fields."""
    from integrator.documents import envelope
    from integrator.documents.submission import Submitter

    now = datetime(2026, 6, 1, 12, 0, 0, 123456, tzinfo=UTC)
    contract = contract_doc(taskId="t-é")
    who = envelope.submitter("agent", "host-1", pid, repo)
    plain = envelope.submission_json(contract, "ab" * 20, who, now, bundle=bundle, urgent=urgent)
    model = Submission.model_validate(
        {
            "schema": "integrator.submission.v1",
            "contract": contract,
            "candidate": "ab" * 20,
            "submitter": Submitter.model_validate(who),
            "submittedAt": now,
            "bundle": bundle,
            "urgent": True if urgent else None,
        }
    )
    assert plain == model.to_json().encode() + b"\n"
    assert Submission.model_validate_json(plain) == model


@pytest.mark.parametrize(
    ("candidate", "bundle"), [("HEAD", None), ("ab" * 19, None), ("ab" * 20, "../x.bundle")]
)
def test_plain_submission_refuses_what_the_model_refuses(
    candidate: str, bundle: str | None
) -> None:
    from integrator.documents import envelope

    who = envelope.submitter("agent", "host")
    with pytest.raises(ValueError, match=r"commit id|\.bundle"):
        envelope.submission_json(contract_doc(), candidate, who, datetime.now(UTC), bundle=bundle)
    with pytest.raises(ValueError, match=r"candidate|bundle"):
        Submission.model_validate(
            {"schema": "integrator.submission.v1", "contract": contract_doc(),
             "candidate": candidate, "submitter": who, "submittedAt": datetime.now(UTC),
             "bundle": bundle}
        )  # fmt: skip


def test_overlong_submitter_fields_are_cut_to_what_the_model_admits() -> None:
    from integrator.documents import envelope
    from integrator.documents.submission import Submitter

    who = envelope.submitter("u" * 500, "h" * 500, 1, "r" * 9000)
    assert Submitter.model_validate(who).user == "u" * 200
    assert envelope.submitter("", "")["user"] == "unknown"


def test_contract_submit_lets_through_is_fenced_by_the_gate(world: World, tmp_path: Path) -> None:
    """`submit` refuses only what its plain reading can tell (schema, task, generation,
    globs, base); a contract broken elsewhere (no lease) is submitted, and the daemon
    fences it CONTRACT_INVALID with the model's reason: nothing is lost."""
    data, oid = world.candidate("nolease")
    doc = json.loads(data)
    del doc["lease"]
    contract = tmp_path / "broken.json"
    contract.write_text(json.dumps(doc))
    code = main(
        ["submit", "--spool", str(world.spool.root), "--contract", str(contract),
         "--candidate", oid, "--repo", str(world.repo)]
    )  # fmt: skip
    assert code == 0
    world.once()
    [sid] = world.spool.entries("fenced")
    verdict = world.verdict("fenced", sid)
    assert [v.code for v in verdict.violations] == [Code.CONTRACT_INVALID]
    assert "lease" in verdict.violations[0].detail


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        ('"x": ' + "[" * 250 + "]" * 250, "nests"),
        ('"x": "\\ud800"', "not Unicode"),
        ('"x": NaN', "JSON"),
    ],
    ids=["deep", "lone-surrogate", "nan"],
)
def test_submit_refuses_what_the_daemon_could_not_read(
    tmp_path: Path, extra: str, why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A contract the guard's plain reading accepts but the daemon's reader would refuse
    (nesting deeper than its JSON parser goes, text that is not Unicode) is refused here,
    exit 2, nothing in the spool, and no traceback."""
    repo = make_repo(tmp_path / "repo")
    commit_files(repo, {"a": "a"}, "base")
    base = run("rev-parse", "HEAD", cwd=repo)
    text = json.dumps(contract_doc(baseCommit=base))
    contract = tmp_path / "contract.json"
    contract.write_text(text[:-1] + ", " + extra + "}")
    code = main(
        ["submit", "--create", "--spool", str(tmp_path / "spool"), "--contract", str(contract),
         "--candidate", "HEAD", "--repo", str(repo)]
    )  # fmt: skip
    assert code == 2
    assert why in capsys.readouterr().err
    assert Spool(tmp_path / "spool").entries("new") == []


def test_plain_submission_over_the_size_limit_is_refused() -> None:
    from integrator.documents import envelope

    who = envelope.submitter("agent", "host")
    wide = contract_doc(padding=[0] * 200_000)  # indentation makes it 1.6 MB
    with pytest.raises(ValueError, match="more than"):
        envelope.submission_json(wide, "ab" * 20, who, datetime.now(UTC))
