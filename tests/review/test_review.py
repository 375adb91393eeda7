"""Review: held candidates, their record chains, and approval that goes through the fence again."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from integrator import refnames
from integrator.cli import main
from integrator.daemon.loop import Daemon
from integrator.daemon.settings import Settings
from integrator.documents.contract import OwnershipContract
from integrator.documents.expansion import ExpansionRequest
from integrator.documents.submission import Submission
from integrator.documents.verdict import Decision, Verdict
from integrator.errors import ReviewRequired
from integrator.landing.engine import Integrator
from integrator.plumbing import git
from integrator.plumbing.bundles import create_bundle
from integrator.records.canonical import Canonical
from integrator.records.claims import Claims, IssueRequest
from integrator.records.expansions import Expansions
from integrator.records.held import archived_ref, held_ref, history
from integrator.review.actions import Held, Review, expansion_lines, pending_expansions
from integrator.review.seen import ClaimMark, ClaimMoved
from integrator.store.mirror import for_spool
from integrator.store.spool import BUNDLE_FILE, Spool
from tests.canon import make_canon
from tests.daemon_world import signed
from tests.gitutil import git as run


@dataclass
class Desk:
    """A canonical repository and a spool where one candidate was fenced."""

    repo: Path
    spool: Spool
    contract: OwnershipContract
    candidate: str
    sid: str

    def canonical(self) -> Canonical:
        return Canonical(self.repo)

    def drain(self) -> None:
        with self.canonical() as canonical:
            daemon = Daemon(
                spool=self.spool,
                canonical=canonical,
                engine=Integrator(canonical),
                mirror=for_spool(self.spool.root),
                settings=Settings(watch=False),
            )
            daemon.run(once=True)

    def cli(self, *args: str) -> int:
        return main(["review", *args, "--spool", str(self.spool.root)])

    def expand(self, *paths: str) -> OwnershipContract:
        """The coordinator grants the paths the candidate needed: generation + 1."""
        with self.canonical() as canonical:
            return Expansions(canonical).expand(
                ExpansionRequest.model_validate(
                    {
                        "schema": "integrator.expansion.v1",
                        "taskId": self.contract.task_id,
                        "contractDigest": self.contract.digest,
                        "expectedGeneration": self.contract.ownership_generation,
                        "treeDigest": "sha256:" + "0" * 64,
                        "diffDigest": "sha256:" + "0" * 64,
                        "workspaceTree": run(
                            "rev-parse", f"{self.contract.base_commit}^{{tree}}", cwd=self.repo
                        ),
                        "addPaths": list(paths),
                    }
                )
            )

    def folder_of(self, sid: str) -> str | None:
        found = self.spool.find(sid)
        return found[0] if found else None


def submission(contract: OwnershipContract, candidate: str, bundle: bool = False) -> Submission:
    return Submission.model_validate(
        {
            "schema": "integrator.submission.v1",
            "contract": contract.wire(),
            "candidate": candidate,
            "submitter": {"user": "agent", "host": "test"},
            "submittedAt": datetime.now(UTC),
            "bundle": BUNDLE_FILE if bundle else None,
        }
    )


@pytest.fixture
def desk(tmp_path: Path) -> Desk:
    """Task `docs` may write docs/**, but its candidate (from another clone) also edits billing/."""
    canon = make_canon(tmp_path)
    with Canonical(canon.path) as canonical:
        contract = Claims(canonical).issue(
            IssueRequest(task_id="docs", paths=("docs/**",), lease=timedelta(hours=2))
        )
    clone = tmp_path / "clone"
    run("clone", "-q", str(canon.path), str(clone), cwd=tmp_path)
    (clone / "docs" / "index.md").write_text("# better docs\n")
    (clone / "billing" / "invoice.py").write_text("invoice = 2\n")
    run("commit", "-qam", "docs and an unowned fix", cwd=clone)
    candidate = run("rev-parse", "HEAD", cwd=clone)
    spool = Spool(tmp_path / "spool").ensure()
    with spool.draft() as draft:
        create_bundle(clone, candidate, contract.base_commit, draft / BUNDLE_FILE)
        sid = spool.publish(
            draft, signed(canon.path, submission(contract, candidate, bundle=True), draft.name)
        )
    d = Desk(canon.path, spool, contract, candidate, sid)
    d.drain()
    return d


def test_fenced_candidate_is_held_by_a_record_chain(desk: Desk) -> None:
    """The held ref's record names the verdict and keeps the bundled candidate alive."""
    assert desk.folder_of(desk.sid) == "fenced"
    with desk.canonical() as canonical:
        head = canonical.ref(held_ref(desk.sid))
        assert head is not None
        record = canonical.commit(head)
        assert [str(p) for p in record.parent_ids] == [desk.candidate]
        verdict = json.loads(canonical.blob_at(head, "verdict.json"))
        assert verdict["decision"] == "FENCED"
        assert [a.action for _, a in history(canonical, desk.sid)] == ["hold"]
        assert git.refs_under(canonical.repo, refnames.QUARANTINE) == {}


def test_list_shows_held_candidates_with_codes(
    desk: Desk, capsys: pytest.CaptureFixture[str]
) -> None:
    """`review list --json` shows each held candidate with its decision and codes."""
    assert desk.cli("list", "--json") == 0
    (item,) = json.loads(capsys.readouterr().out)
    assert (item["submission"], item["decision"], item["codes"]) == (
        desk.sid,
        "FENCED",
        ["PATH_NOT_OWNED"],
    )
    assert item["taskId"] == "docs" and item["candidate"] == desk.candidate


def test_show_puts_each_violation_beside_its_file(
    desk: Desk, capsys: pytest.CaptureFixture[str]
) -> None:
    """`review show` prints a file's violations right above that file's diff, in colour on request."""
    assert desk.cli("show", desk.sid, "--color", "never") == 0
    lines = capsys.readouterr().out.splitlines()
    header = lines.index("diff --git a/billing/invoice.py b/billing/invoice.py")
    assert lines[header - 1].startswith("✗ PATH_NOT_OWNED:")
    docs = lines.index("diff --git a/docs/index.md b/docs/index.md")
    assert not lines[docs - 1].startswith("✗")
    assert desk.cli("show", desk.sid, "--color", "always") == 0
    assert "\033[31m✗ PATH_NOT_OWNED" in capsys.readouterr().out
    assert desk.cli("show", desk.sid, "--json") == 0
    shown = json.loads(capsys.readouterr().out)
    by_path = {f["path"]: f for f in shown["files"]}
    assert [v["code"] for v in by_path["billing/invoice.py"]["violations"]] == ["PATH_NOT_OWNED"]
    assert by_path["docs/index.md"]["violations"] == []


def test_approve_without_a_new_contract_is_fenced_again(desk: Desk) -> None:
    """Approval re-runs the fence: under the unchanged contract the verdict stays FENCED."""
    assert desk.cli("approve", desk.sid, "--actor", "rm", "--reason", "looks fine") == 1
    assert desk.folder_of(desk.sid) == "fenced"
    with desk.canonical() as canonical:
        actions = [a for _, a in history(canonical, desk.sid)]
        assert canonical.ref(canonical.queue_ref) == canonical.ref("refs/heads/main")
        assert run("log", "--format=%s", "-1", canonical.queue_ref, cwd=desk.repo) == "base"
    assert [(a.action, a.decision) for a in actions] == [("hold", "FENCED"), ("approve", "FENCED")]
    assert actions[1].actor == "rm" and actions[1].reason == "looks fine"


def test_approve_after_expansion_lands_through_the_fence(
    desk: Desk, capsys: pytest.CaptureFixture[str]
) -> None:
    """Once the coordinator expands the claim, approval integrates and archives the chain."""
    desk.expand("billing/invoice.py")
    assert desk.cli("approve", desk.sid, "--actor", "rm", "--json") == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["verdict"]["decision"] == "ACCEPTED"
    assert printed["verdict"]["generation"] == 2
    assert desk.folder_of(desk.sid) == "accepted"
    with desk.canonical() as canonical:
        assert canonical.ref(held_ref(desk.sid)) is None
        assert canonical.ref(archived_ref(desk.sid)) is not None
        assert [a.action for _, a in history(canonical, desk.sid)] == ["hold", "approve"]
        landed = canonical.commit(canonical.ref(canonical.queue_ref) or "")
        assert f"Integrator-Candidate: {desk.candidate}" in landed.message
    records = for_spool(desk.spool.root).registry.history(task="docs")
    assert [(r.kind, r.action, r.decision) for r in records] == [
        ("decision", None, "FENCED"),
        ("review", "approve", "ACCEPTED"),
    ]


def test_an_action_under_a_claim_that_moved_is_refused_before_anything(desk: Desk) -> None:
    """Approve and reject given the claim the reviewer was shown refuse, doing nothing, once
    the coordinator moved it (here an expansion: generation 2), naming both claims; given
    the live claim, approve integrates under exactly it."""
    with desk.canonical() as canonical:
        shown = ClaimMark.of(canonical.claim("docs"))
    assert shown.generation == 1 and shown.digest == desk.contract.digest
    expanded = desk.expand("billing/invoice.py")
    with desk.canonical() as canonical:
        review = Review(desk.spool, canonical, engine=Integrator(canonical))
        with pytest.raises(ClaimMoved) as moved:
            review.approve(desk.sid, "rm", seen=shown)
        assert (moved.value.seen, moved.value.live.generation) == (shown, 2)
        assert "generation 1" in str(moved.value) and "generation 2" in str(moved.value)
        with pytest.raises(ClaimMoved):
            review.reject(desk.sid, "rm", "not this one", seen=shown)
        assert [a.action for _, a in history(canonical, desk.sid)] == ["hold"]
        assert desk.folder_of(desk.sid) == "fenced"
        live = ClaimMark(2, expanded.digest)
        verdict = review.approve(desk.sid, "rm", seen=live)
    assert verdict.decision is Decision.ACCEPTED and verdict.contract_digest == expanded.digest


def test_approve_with_an_explicit_contract_file(desk: Desk, tmp_path: Path) -> None:
    """`--contract FILE` approves under the re-issued contract the release manager was given."""
    expanded = desk.expand("billing/**")
    path = tmp_path / "expanded.json"
    path.write_text(expanded.to_json())
    assert desk.cli("approve", desk.sid, "--contract", str(path)) == 0
    assert desk.folder_of(desk.sid) == "accepted"


def test_reject_archives_with_the_reason(desk: Desk, capsys: pytest.CaptureFixture[str]) -> None:
    """Rejecting files the candidate under archived/ with its reason, in git and in the mirror."""
    assert desk.cli("reject", desk.sid, "--reason", "billing is not ours", "--actor", "rm") == 0
    assert desk.folder_of(desk.sid) == "archived"
    review = json.loads((desk.spool.folder("archived") / desk.sid / "review.json").read_text())
    assert (review["action"], review["reason"]) == ("reject", "billing is not ours")
    with desk.canonical() as canonical:
        assert canonical.ref(held_ref(desk.sid)) is None
        chain = history(canonical, desk.sid)
        assert [a.action for _, a in chain] == ["hold", "reject"]
        head = canonical.commit(chain[-1][0])
        assert str(head.parent_ids[-1]) == desk.candidate  # still kept alive for audit
    capsys.readouterr()
    assert desk.cli("list", "--json") == 0
    assert json.loads(capsys.readouterr().out) == []
    (record,) = [r for r in for_spool(desk.spool.root).registry.history() if r.kind == "review"]
    assert (record.action, record.actor, record.reason) == ("reject", "rm", "billing is not ours")


def test_a_rejected_candidate_reads_as_its_verdict_not_as_queued(
    desk: Desk, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression (found by the team drill): once a release manager rejected a held
    candidate, `status --spool` said "no verdict … still queued (is the daemon running?)",
    exit 4, while the intake said FENCED, exit 1; it reads the verdict kept in archived/."""
    assert desk.cli("reject", desk.sid, "--reason", "billing is not ours", "--actor", "rm") == 0
    capsys.readouterr()
    argv = ["status", "--spool", str(desk.spool.root), "--submission", desk.sid, "--json"]
    assert main(argv) == 1
    doc = json.loads(capsys.readouterr().out)
    assert (doc["verdict"]["decision"], doc["folder"]) == ("FENCED", "archived")


def test_reject_record_names_task_attempt_and_generation(
    desk: Desk, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: a reject's mirror record carries the held candidate's task, so history finds it."""
    assert desk.cli("reject", desk.sid, "--reason", "billing is not ours", "--actor", "rm") == 0
    records = for_spool(desk.spool.root).registry.history(task="docs")
    assert [(r.kind, r.action) for r in records] == [("decision", None), ("review", "reject")]
    reject = records[1]
    assert (reject.attempt_id, reject.generation, reject.candidate) == (
        desk.contract.attempt_id,
        1,
        desk.candidate,
    )
    assert reject.decision is None  # a reject decides nothing new
    capsys.readouterr()
    assert main(["history", "--spool", str(desk.spool.root), "--task", "docs"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if "reject" in x]
    assert "docs" in line and "gen 1" in line and "billing is not ours" in line


def test_held_subject_falls_back_to_the_submitted_contract(desk: Desk) -> None:
    """A verdict without task (contract did not parse) still yields the contract's task for records."""
    sub = submission(desk.contract, desk.candidate)
    bare = Held(desk.sid, "review", Verdict(decision=Decision.REVIEW), sub, b"{}")
    assert bare.subject() == ("docs", desk.contract.attempt_id, 1)
    named = Verdict(decision=Decision.FENCED, task_id="x", attempt_id="x-1", generation=7)
    assert Held(desk.sid, "fenced", named, sub, b"{}").subject() == ("x", "x-1", 7)


def test_refused_expansion_is_listed_for_review(
    desk: Desk, capsys: pytest.CaptureFixture[str]
) -> None:
    """An expansion the coordinator could not grant is found from the spool, by id and task."""
    with desk.canonical() as canonical:
        Claims(canonical).issue(IssueRequest(task_id="billing", paths=("billing/**",)))
    with pytest.raises(ReviewRequired):
        desk.expand("billing/invoice.py")
    (entry,) = pending_expansions(desk.spool)
    assert (entry.record.task_id, entry.record.conflicts_with) == ("docs", ["billing"])
    lines = expansion_lines(desk.spool)
    assert lines[0].startswith("expansion requests waiting for the coordinator (1)")
    assert entry.record.request_id in lines[1] and "billing/invoice.py" in lines[1]
    assert pending_expansions(Spool(desk.spool.root.parent / "elsewhere")) == []
    capsys.readouterr()
    assert desk.cli("list") == 0
    out = capsys.readouterr().out
    assert desk.sid in out and entry.record.request_id in out


def test_only_held_candidates_can_be_reviewed(
    desk: Desk, capsys: pytest.CaptureFixture[str]
) -> None:
    """Approving an archived or unknown submission is a usage error, not a second landing;
    one already decided says who decided it, when and why."""
    assert desk.cli("reject", desk.sid, "--reason", "no") == 0
    capsys.readouterr()
    assert desk.cli("approve", desk.sid) == 2
    err = capsys.readouterr().err
    assert "was already rejected by" in err and "(no); nothing changed" in err
    assert desk.cli("show", "20200101T000000000000Z-00000000") == 2


def test_a_damaged_held_entry_does_not_hide_the_others(
    desk: Desk, capsys: pytest.CaptureFixture[str]
) -> None:
    """`review list` leaves out a held folder without its verdict and still lists the rest."""
    broken = desk.spool.folder("review") / "20200101T000000000000Z-00000000"
    broken.mkdir()
    (broken / "submission.json").write_text("{}")
    assert desk.cli("list", "--json") == 0
    assert [item["submission"] for item in json.loads(capsys.readouterr().out)] == [desk.sid]
    assert desk.cli("show", broken.name) == 2
    assert "not a complete held submission" in capsys.readouterr().err


def test_a_record_never_names_a_blob_as_parent(tmp_path: Path) -> None:
    """A submission may name any object; only a commit becomes the record's parent, so the
    repository stays valid for fsck, gc and clones."""
    from integrator.records.held import ReviewAction, write_record
    from tests.gitutil import commit_files, make_repo

    repo = make_repo(tmp_path / "repo")
    commit_files(repo, {"a": "a\n"}, "base")
    blob = run("hash-object", "-w", "--stdin", cwd=repo, input=b"not a commit\n")
    action = ReviewAction(
        submission="20260101T000000000000Z-00000000", action="hold", actor="integrator",
        at=datetime(2026, 1, 1, tzinfo=UTC),
    )  # fmt: skip
    with Canonical(repo) as canonical:
        commit = write_record(canonical, action, None, b"{}", blob)
    assert run("rev-list", "--parents", "-n", "1", commit, cwd=repo).split() == [commit]
    run("update-ref", "refs/integrator/held/x", commit, cwd=repo)
    run("fsck", "--strict", "--no-dangling", cwd=repo)


def test_review_actions_on_one_spool_take_turns(desk: Desk) -> None:
    """While another review action holds the spool (say an approve that is integrating),
    a reject waits for it, then finds the submission as that action left it."""
    import fcntl
    import os
    import subprocess
    import sys
    import time

    fd = os.open(desk.spool.root / "review.lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "integrator", "review", "reject", desk.sid, "--reason",
             "no", "--spool", str(desk.spool.root)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        time.sleep(1.0)
        assert proc.poll() is None, proc.communicate()
        assert desk.spool.find(desk.sid) is not None
        assert desk.spool.find(desk.sid)[0] in ("fenced", "review")  # type: ignore[index]
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert desk.spool.find(desk.sid)[0] == "archived"  # type: ignore[index]
