"""Bounded refs: finished records folded into archive refs, still reachable and readable."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from integrator import refnames
from integrator.cli import main
from integrator.daemon.loop import Daemon
from integrator.daemon.settings import Settings
from integrator.documents.claim import Claim, claim_state, view_from_state
from integrator.documents.expansion import ExpansionRequest
from integrator.documents.submission import Submission
from integrator.documents.verdict import Code, Decision
from integrator.errors import ReviewRequired
from integrator.fleet.intake import verdict_ref
from integrator.landing.engine import Integrator
from integrator.plumbing import transaction
from integrator.plumbing.packs import ObjectBuffer
from integrator.records import census, expansions
from integrator.records import held as review
from integrator.records.archive import MAX_PARENTS, Archiver, Record, decide
from integrator.records.archive_index import (
    PREFIXES,
    archive_ref,
    archived_entries,
    find_archived,
    shard_of,
)
from integrator.records.canonical import Canonical
from integrator.records.claims import (
    Claims,
    IssueRequest,
    build_contract,
    history,
    write_claim_commit,
)
from integrator.records.expansions import Expansions
from integrator.store.mirror import for_spool
from integrator.store.spool import Spool
from tests.canon import Canon, make_canon
from tests.daemon_world import signed
from tests.gitutil import GIT_ENV, commit_files
from tests.gitutil import git as run
from tests.gitutil import run_integrator_raw as cli
from tests.remote_world import RemoteWorld

FINISHED = 300
LIVE = ("live-a", "live-b", "live-c")
LONG = timedelta(days=3650)


def seed_finished(
    canonical: Canonical, count: int, prefix: str = "t", *, revoke_every: int = 2
) -> list[str]:
    """`count` claims issued and then revoked (every `revoke_every`-th, from the second) or
    consumed, written in bulk with the functions the coordinator and the landing use;
    their refs are created 500 at a time."""
    now = canonical.clock()
    base = canonical.ref(canonical.target_ref)
    assert base is not None
    buffer = ObjectBuffer(canonical.repo)
    ops, tasks = [], []
    for i in range(count):
        task = f"{prefix}{i:05d}"
        request = IssueRequest(task_id=task, paths=(f"done/{task}/**",))
        contract = build_contract(canonical, request, 1, now)
        expires = contract.lease.expires_at
        live = claim_state(contract, state="live", lease_expires_at=expires, event="issue")
        issued = write_claim_commit(canonical, contract, live, None, now, objects=buffer)
        claim = Claim(issued, view_from_state(live), contract)
        if i % revoke_every != 1:
            tip = Claims(canonical).consume_commit(claim, base, base, now, objects=buffer)
        else:
            state = claim_state(
                contract, state="revoked", lease_expires_at=expires, event="revoke", reason="done"
            )
            tip = write_claim_commit(canonical, contract, state, issued, now, objects=buffer)
        ops.append(transaction.update(Canonical.claim_ref(task), tip, None))
        tasks.append(task)
    buffer.flush()
    for start in range(0, len(ops), 500):
        canonical.updater.apply(ops[start : start + 500])
    return tasks


def _request(canonical: Canonical, task: str, path: str) -> ExpansionRequest:
    claim = canonical.claim(task)
    assert claim is not None
    tree = run("rev-parse", "main^{tree}", cwd=canonical.path)
    return ExpansionRequest.model_validate(
        {
            "schema": "integrator.expansion.v1",
            "taskId": task,
            "contractDigest": claim.view.contract_digest,
            "expectedGeneration": claim.view.generation,
            "treeDigest": "sha256:" + "0" * 64,
            "diffDigest": "sha256:" + "0" * 64,
            "workspaceTree": tree,
            "addPaths": [path],
        }
    )


@dataclass
class Yard:
    """A canonical repository a busy fleet left behind, and what `refs archive` should do."""

    path: Path
    spool: Path
    held: str  # a candidate of task `docs` still waiting (its claim revoked since)
    rejected: str  # the review of task `web` ended: its chain is under archived/
    pending: str  # the pending expansion request of task `asks` (name TASK/ID)
    dismissed: str  # the dismissed expansion request of task `gave-up`
    finished: frozenset[str]  # every claim that should be archived

    def canon(self) -> Canon:
        return Canon(self.path)

    def open(self) -> Canonical:
        return Canonical(self.path)

    def refs(self) -> dict[str, str]:
        lines = run("for-each-ref", "--format=%(refname) %(objectname)", cwd=self.path)
        return {ref: oid for ref, _, oid in (line.partition(" ") for line in lines.splitlines())}

    def cli(self, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
        capsys.readouterr()
        code = main([*args[:2], "--repo", str(self.path), *args[2:]])
        return code, capsys.readouterr().out


def _submit(spool: Spool, contract_wire: dict[str, Any], candidate: str, repo: Path) -> str:
    submission = Submission.model_validate(
        {
            "schema": "integrator.submission.v1",
            "contract": contract_wire,
            "candidate": candidate,
            "submitter": {"user": "agent", "host": "test"},
            "submittedAt": datetime.now(UTC),
        }
    )
    with spool.draft() as draft:
        return spool.publish(draft, signed(repo, submission, draft.name))


def _build(root: Path) -> Yard:
    canon = make_canon(root)
    spool = Spool(root / "spool").ensure()
    with canon.open() as canonical:
        claims = Claims(canonical)
        finished = set(seed_finished(canonical, FINISHED))
        for task in LIVE:
            claims.issue(IssueRequest(task_id=task, paths=(f"live/{task}/**",)))
        billing = claims.issue(IssueRequest(task_id="billing", paths=("billing/**",)))
        docs = claims.issue(IssueRequest(task_id="docs", paths=("docs/**",), lease=LONG))
        web = claims.issue(IssueRequest(task_id="web", paths=("auth/**",), lease=LONG))
        for task in ("asks", "gave-up"):
            claims.issue(IssueRequest(task_id=task, paths=(f"{task}/**",)))
            claims.revoke(task)
            with pytest.raises(ReviewRequired):
                Expansions(canonical).expand(_request(canonical, task, f"more/{task}/**"))
    landed = canon.integrate(billing, canon.commit({"billing/invoice.py": "invoice = 2\n"}))
    assert landed.decision is Decision.ACCEPTED
    held = _submit(
        spool, docs.wire(), canon.commit({"docs/index.md": "x\n", "billing/tax.py": ""}), canon.path
    )
    rejected = _submit(
        spool, web.wire(), canon.commit({"auth/login.py": "", "billing/tax.py": ""}), canon.path
    )
    with Canonical(canon.path) as canonical:
        Daemon(
            spool=spool,
            canonical=canonical,
            engine=Integrator(canonical),
            mirror=for_spool(spool.root),
            settings=Settings(watch=False),
        ).run(once=True)
        assert canonical.ref(review.held_ref(held)) and canonical.ref(review.held_ref(rejected))
    reject = ["review", "reject", rejected, "--spool", str(spool.root), "--repo", str(canon.path)]
    assert main([*reject, "--reason", "not ours", "--actor", "rm"]) == 0
    with canon.open() as canonical:
        for task in ("docs", "web"):
            Claims(canonical).revoke(task)
        requests = {e.record.task_id: e for e in expansions.expansions(canonical)}
        Expansions(canonical).dismiss(requests["gave-up"].record.request_id)
    name = {task: e.ref.removeprefix(refnames.EXPANSIONS) for task, e in requests.items()}
    return Yard(
        canon.path,
        spool.root,
        held,
        rejected,
        name["asks"],
        name["gave-up"],
        frozenset(finished | {"billing", "web", "gave-up"}),
    )


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Yard:
    with pytest.MonkeyPatch.context() as patch:
        for key, value in GIT_ENV.items():
            patch.setenv(key, value)
        return _build(tmp_path_factory.mktemp("yard"))


@pytest.fixture
def yard(template: Yard, tmp_path: Path) -> Yard:
    """A private copy of the module's yard (building it takes a while; each test changes it)."""
    root = tmp_path / "yard"
    shutil.copytree(template.path.parent, root, symlinks=True)
    return Yard(
        root / template.path.name,
        root / template.spool.name,
        template.held,
        template.rejected,
        template.pending,
        template.dismissed,
        template.finished,
    )


def _claim_tasks(refs: dict[str, str]) -> set[str]:
    return {r.removeprefix(refnames.CLAIMS) for r in refs if r.startswith(refnames.CLAIMS)}


def test_archive_leaves_live_and_waiting_records_and_one_ref_per_kind(
    yard: Yard, capsys: pytest.CaptureFixture[str]
) -> None:
    """After `refs archive --older-than 0s` only live or waited-on records keep refs, plus one
    archive ref per kind, and every archived chain is reachable from its archive ref."""
    before = yard.refs()
    code, out = yard.cli(capsys, "refs", "archive", "--older-than", "0s", "--json")
    assert code == 0
    report = json.loads(out)
    after = yard.refs()
    assert _claim_tasks(after) == {*LIVE, "docs", "asks"}
    kept = {
        row["name"]: row["why"] for kind in report["kinds"] for row in kind["kept"] if row["state"]
    }
    assert (
        kept["docs"].startswith("a held candidate waits") and kept["live-a"] == "live: not finished"
    )
    assert kept["asks"] == "an expansion request waits"
    assert kept[yard.pending] == "pending: not finished"
    archive_refs = {archive_ref(k) for k in ("claims", "archived", "expansions")}
    gone = set(before) - set(after)
    assert len(gone) == len(yard.finished) + 2
    assert set(after) - set(before) == archive_refs  # no verdicts here: no archive for them
    assert len(after) == len(before) - len(gone) + 3
    assert (report["refsBefore"], report["refsAfter"]) == (len(before), len(after))
    assert review.held_ref(yard.held) in after
    reachable = set(run("rev-list", *archive_refs, cwd=yard.path).split())
    assert {before[ref] for ref in gone} <= reachable
    assert run("fsck", "--no-dangling", "--no-progress", cwd=yard.path) == ""
    subjects = run("log", "--format=%s", archive_ref("claims"), cwd=yard.path).splitlines()
    assert "consume: t00000 generation 1 attempt" in "\n".join(subjects)
    assert "revoke: web generation 1" in "\n".join(subjects)


def test_archive_commits_hold_a_bounded_number_of_parents(yard: Yard) -> None:
    """At most MAX_PARENTS parents per archive commit, the first one the previous archive
    commit, and at most the batch size of ref updates per transaction."""
    with yard.open() as canonical:
        report = Archiver(canonical, batch_refs=50, max_parents=8).run("claims", timedelta(0))
        assert canonical.updater.transactions == report.transactions == 7  # 303 / 49 per batch
    chain = run(
        "rev-list", "--first-parent", "--parents", archive_ref("claims"), cwd=yard.path
    ).splitlines()
    assert len(chain) == report.commits == 1 + sum(-(-n // 7) for n in [49] * 6 + [9])
    *archive_commits, start = [line.split() for line in chain]
    assert start[1:] == []  # the first archive commit is a root: --first-parent stays inside
    assert all(2 <= len(c) - 1 <= 8 for c in archive_commits)
    assert [c[1] for c in archive_commits] == [c[0] for c in [*archive_commits[1:], start]]
    with yard.open() as canonical:
        report = Archiver(canonical).run("claims", timedelta(0))
        assert (report.archived, report.transactions) == ([], 0)  # a second run: nothing new
    assert MAX_PARENTS == 256


def test_history_stays_readable_after_archiving(
    yard: Yard, capsys: pytest.CaptureFixture[str]
) -> None:
    """`contract show`, claim and review history, `contract list --archived` and `refs show`
    read archived records; a stale contract of an archived task is still fenced."""
    with yard.open() as canonical:
        claims_before = history(canonical, "web")
        review_before = review.history(canonical, yard.rejected)
    code, _ = yard.cli(capsys, "refs", "archive", "--older-than", "0s")
    assert code == 0
    with yard.open() as canonical:
        assert canonical.ref(Canonical.claim_ref("web")) is None
        assert history(canonical, "web") == claims_before
        assert canonical.ref(review.archived_ref(yard.rejected)) is None
        assert review.history(canonical, yard.rejected) == review_before
        assert [a.action for _, a in review_before] == ["hold", "reject"]
        web = canonical.claim_at(claims_before[0][0]).contract
    code, out = yard.cli(capsys, "contract", "show", "--task", "web", "--json")
    shown = json.loads(out)
    assert code == 0 and shown["state"] == "revoked"
    assert shown["archived"]["ref"] == archive_ref("claims")
    assert [h["event"] for h in shown["history"]] == ["revoke", "issue"]
    code, out = yard.cli(capsys, "contract", "show", "--task", "gave-up", "--json")
    (request,) = json.loads(out)["expansionRequests"]
    assert (request["state"], request["archived"]) == ("dismissed", True)
    code, out = yard.cli(capsys, "contract", "list")
    assert f"{len(yard.finished)} finished claim record(s) archived" in out
    code, out = yard.cli(capsys, "contract", "list", "--archived", "--json")
    rows = {row["taskId"]: row for row in json.loads(out)}
    assert set(rows) == yard.finished | {*LIVE, "docs", "asks"}
    assert rows["t00000"]["archived"] and rows["t00000"]["state"] == "consumed"
    assert not rows["live-a"]["archived"]
    code, out = yard.cli(capsys, "refs", "show", "archived", yard.rejected, "--json")
    found = json.loads(out)
    assert (found["where"], found["state"]) == (archive_ref("archived"), "reject")
    assert [h["commit"] for h in found["history"]] == [c for c, _ in reversed(review_before)]
    verdict = yard.canon().check(web, yard.canon().commit({"auth/login.py": "x\n"}))
    assert verdict.decision is Decision.FENCED and verdict.codes == [Code.CLAIM_MISSING]


def test_index_finds_one_record_by_its_shard(yard: Yard) -> None:
    """The archive's tree indexes each record in the shard its name hashes to, as JSON lines."""
    with yard.open() as canonical:
        tip = canonical.ref(Canonical.claim_ref("t00007"))
        Archiver(canonical).run("claims", timedelta(0))
        assert find_archived(canonical, "claims", "t00007") == tip
        assert find_archived(canonical, "claims", "live-a") is None
        assert find_archived(canonical, "archived", yard.rejected) is None  # another kind
    lines = run("show", f"{archive_ref('claims')}:{shard_of('t00007')}", cwd=yard.path)
    (line,) = [json.loads(x) for x in lines.splitlines() if '"t00007"' in x]
    assert (line["oid"], line["state"], line["ref"]) == (
        tip,
        "revoked",
        "refs/integrator/claims/t00007",
    )
    assert line["generation"] == 1 and line["ageSeconds"] > 0
    summary = json.loads(run("show", f"{archive_ref('claims')}:summary.json", cwd=yard.path))
    assert summary["records"] == len(yard.finished)


def test_reissue_after_archiving_continues_the_generations(yard: Yard) -> None:
    """Issuing an archived task again goes on from its archived generation and chain; that
    claim, finished and archived again, is the latest entry of its name."""
    canon = yard.canon()
    with canon.open() as canonical:
        claims = Claims(canonical)
        claims.issue(IssueRequest(task_id="again", paths=("again/**",)))
        claims.reclaim("again", force=True)
        claims.revoke("again")
        first = canonical.ref(Canonical.claim_ref("again"))
        Archiver(canonical).run("claims", timedelta(0))
        assert canonical.ref(Canonical.claim_ref("again")) is None
    contract = canon.issue("again", ["again/**"])
    assert contract.ownership_generation == 3
    with canon.open() as canonical:
        tip = canonical.ref(Canonical.claim_ref("again"))
        assert tip is not None and [str(p) for p in canonical.commit(tip).parent_ids] == [first]
        assert [s["generation"] for _, s, _ in history(canonical, "again")] == [3, 2, 2, 1]
        Claims(canonical).revoke("again")
        second = canonical.ref(Canonical.claim_ref("again"))
        Archiver(canonical).run("claims", timedelta(0))
        assert find_archived(canonical, "claims", "again") == second
        (entry,) = archived_entries(canonical, "claims", task="again")
        assert entry.generation == 3
    assert canon.issue("again", ["again/**"]).ownership_generation == 4


def test_decide_archives_finished_records_only() -> None:
    """A live claim or pending request is never archived, whatever its age; a finished one
    waits for its age and for whatever still waits on its task."""
    now = datetime(2026, 6, 1, tzinfo=UTC)
    old = now - timedelta(days=400)

    def record(
        kind: str, state: str | None, at: datetime = old, waiting: str | None = None
    ) -> Record:
        return Record(kind, "x", PREFIXES[kind] + "x", "0" * 40, state, at, waiting)

    month = timedelta(days=30)
    assert not decide(record("claims", "live"), now, timedelta(0)).archive
    assert not decide(record("expansions", "pending"), now, timedelta(0)).archive
    assert not decide(record("claims", None), now, timedelta(0)).archive
    assert not decide(
        record("claims", "revoked", waiting="a held candidate waits"), now, month
    ).archive
    assert decide(record("claims", "consumed"), now, month).archive
    assert decide(record("claims", "revoked"), now, month).reason == "revoked, 400d old"
    young = decide(record("expansions", "granted", now - timedelta(days=2)), now, month)
    assert (young.archive, young.reason) == (False, "granted, younger than 30d")
    assert decide(record("archived", "reject"), now, month).archive
    ahead = record("verdicts", "ACCEPTED", now + timedelta(hours=1))  # a skewed clock
    assert decide(ahead, now, timedelta(0)).archive and not decide(ahead, now, month).archive


def test_dry_run_changes_nothing(yard: Yard, capsys: pytest.CaptureFixture[str]) -> None:
    """`--dry-run` reports what a real run then archives, and moves no ref."""
    before = yard.refs()
    code, out = yard.cli(capsys, "refs", "archive", "--older-than", "0s", "--dry-run", "--json")
    assert code == 0 and yard.refs() == before
    planned = {
        k["kind"]: sorted(r["name"] for r in k["archived"]) for k in json.loads(out)["kinds"]
    }
    code, out = yard.cli(capsys, "refs", "archive", "--older-than", "0s", "--json")
    done = {k["kind"]: sorted(r["name"] for r in k["archived"]) for k in json.loads(out)["kinds"]}
    assert planned == done and len(done["claims"]) == len(yard.finished)
    assert done["expansions"] == [yard.dismissed] and done["archived"] == [yard.rejected]


def test_age_keeps_young_records(yard: Yard, capsys: pytest.CaptureFixture[str]) -> None:
    """Records newer than --older-than keep their refs; the text report says why."""
    before = yard.refs()
    code, out = yard.cli(capsys, "refs", "archive", "--older-than", "3650d")
    assert code == 0 and yard.refs() == before
    assert "claims: archived 0" in out and "younger than 3650d" in out


def _archive_process(yard: Yard, fault: str | None, *extra: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "INTEGRATOR_FAULT"}
    if fault:
        env["INTEGRATOR_FAULT"] = fault
    cmd = [sys.executable, "-m", "integrator", "refs", "archive", "--repo", str(yard.path)]
    return subprocess.Popen(
        [*cmd, "--older-than", "0s", "--json", *extra],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def test_a_crash_before_the_transaction_leaves_every_ref(yard: Yard) -> None:
    """Killed after writing the archive commits and before the transaction, nothing moved;
    a rerun archives everything and the repository checks clean."""
    before = yard.refs()
    proc = _archive_process(yard, "kill:archive-before-transaction", "--kinds", "claims")
    proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL
    assert yard.refs() == before
    proc = _archive_process(yard, None, "--kinds", "claims")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    assert len(json.loads(out)["kinds"][0]["archived"]) == len(yard.finished)
    assert run("fsck", "--no-dangling", "--no-progress", cwd=yard.path) == ""


def _stopped(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] == "T"


def _continue_until_done(proc: subprocess.Popen[bytes], on_first_stop: Any) -> tuple[bytes, int]:
    """Resume `proc` each time it stops at its fault point; `on_first_stop` runs once."""
    stops = 0
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if _stopped(proc.pid):
            if stops == 0:
                on_first_stop()
            stops += 1
            os.kill(proc.pid, signal.SIGCONT)
        time.sleep(0.01)
    out, _ = proc.communicate(timeout=10)
    return out, stops


def test_a_record_moved_during_archiving_is_read_again(yard: Yard) -> None:
    """A claim issued again while the archiver waits before its transaction fails that batch;
    the archiver reads everything again, keeps the now-live claim and archives the rest."""
    proc = _archive_process(yard, "stop:archive-before-transaction", "--kinds", "claims")

    def reissue() -> None:
        with yard.open() as canonical:
            Claims(canonical).issue(IssueRequest(task_id="t00001", paths=("done/t00001/**",)))

    out, stops = _continue_until_done(proc, reissue)
    assert proc.returncode == 0 and stops == 2
    (report,) = json.loads(out)["kinds"]
    assert report["retries"] == 1
    assert len(report["archived"]) == len(yard.finished) - 1
    with yard.open() as canonical:
        live = canonical.claim("t00001")
        assert live is not None and (live.view.state, live.view.generation) == ("live", 2)
        assert find_archived(canonical, "claims", "t00001") is None


def test_verdicts_on_an_intake_repository(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--kinds verdicts` folds an intake's verdict refs by age and `refs show` finds them."""
    intake = tmp_path / "intake"
    run("init", "-q", "--bare", str(intake), cwd=tmp_path)
    refs = {}
    published = [("a", "s1", "ACCEPTED"), ("a", "s2", "FENCED"), ("b", "s3", None)]
    for task, sid, decision in published:  # as the intake publishes them: one root commit
        files = (
            {"verdict.json": json.dumps({"decision": decision})}
            if decision
            else {"rejection.json": json.dumps({"reason": "malformed"})}
        )
        ref = verdict_ref(task, sid)
        refs[f"{task}/{sid}"] = commit_files(intake, files, f"verdict {sid}", parent=None, ref=ref)
    args = ["refs", "archive", "--repo", str(intake), "--kinds", "verdicts", "--json"]
    assert main([*args, "--older-than", "3650d"]) == 0
    assert json.loads(capsys.readouterr().out)["kinds"][0]["archived"] == []
    assert main([*args, "--older-than", "30d"]) == 0  # the commits are dated 2026-01-01
    (report,) = json.loads(capsys.readouterr().out)["kinds"]
    assert {(r["name"], r["state"]) for r in report["archived"]} == {
        ("a/s1", "ACCEPTED"), ("a/s2", "FENCED"), ("b/s3", "rejected"),
    }  # fmt: skip
    assert run("for-each-ref", "--format=%(refname)", cwd=intake) == archive_ref("verdicts")
    assert main(["refs", "show", "--repo", str(intake), "verdicts", "a/s2", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["oid"], shown["history"][0]["subject"]) == (refs["a/s2"], "verdict s2")
    with Canonical(intake) as canonical:
        assert [e.name for e in archived_entries(canonical, "verdicts", task="a")] == [
            "a/s1",
            "a/s2",
        ]


def test_count_reports_refs_by_kind(
    yard: Yard, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`refs count` counts every ref, integrator's by folder, and each kind's archived records;
    past the advised number it says to archive."""
    total = len(yard.refs())
    code, out = yard.cli(capsys, "refs", "count", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["total"] == total and doc["advice"] is None
    assert doc["records"]["claims"] == {
        "refs": len(yard.finished) + 5,
        "archived": 0,
        "archiveRef": None,
    }
    assert doc["byFolder"]["held"] == 1
    yard.cli(capsys, "refs", "archive", "--older-than", "0s")
    monkeypatch.setattr(census, "ADVISE_AT", 10)
    code, out = yard.cli(capsys, "refs", "count", "--json")
    doc = json.loads(out)
    assert doc["records"]["claims"]["archived"] == len(yard.finished)
    assert doc["records"]["claims"]["refs"] == 5
    assert doc["records"]["archived"] == {
        "refs": 0,
        "archived": 1,
        "archiveRef": archive_ref("archived"),
    }
    assert doc["advice"] is not None and "integrator refs archive" in doc["advice"]


def test_bad_records_and_kinds_are_refused_or_kept(
    yard: Yard, capsys: pytest.CaptureFixture[str]
) -> None:
    """A record ref that names no commit is kept as unreadable; an unknown kind is exit 2."""
    blob = run("hash-object", "-w", "--stdin", cwd=yard.path, input=b"not a claim\n")
    run("update-ref", f"{PREFIXES['archived']}odd", blob, cwd=yard.path)
    code, out = yard.cli(
        capsys, "refs", "archive", "--older-than", "0s", "--kinds", "archived", "--json"
    )
    (report,) = json.loads(out)["kinds"]
    assert code == 0 and [r["name"] for r in report["kept"]] == ["odd"]
    assert report["kept"][0]["why"].startswith("unreadable")
    with pytest.raises(SystemExit) as exit_:
        main(["refs", "archive", "--repo", str(yard.path), "--kinds", "claims,heads"])
    assert exit_.value.code == 2


def test_archive_prefixes_are_the_records_own() -> None:
    """The kinds' prefixes are the ones the claim, review and expansion modules write."""
    assert PREFIXES == {
        "claims": refnames.CLAIMS,
        "archived": refnames.ARCHIVED,
        "expansions": refnames.EXPANSIONS,
        "verdicts": refnames.VERDICTS,
    }


def test_archive_in_remote_mode_pushes_one_atomic_batch(
    remote: RemoteWorld, tmp_path: Path
) -> None:
    """Through a mirror, the archive ref and the deletions reach the server in one push with
    leases; another host's mirror then reads the archived claim and continues its generation."""
    coordinator = remote.mirror("coordinator")
    for i in range(6):
        remote.issue(coordinator, f"t{i}", [f"t{i}/**"], tmp_path / f"c{i}.json")
    for i in range(4):
        done = cli("contract", "revoke", "--repo", str(coordinator), "--task", f"t{i}")
        assert done.returncode == 0, done.stderr.decode()
    done = cli("refs", "archive", "--repo", str(coordinator), "--older-than", "0s", "--json")
    assert done.returncode == 0, done.stderr.decode()
    (claims, *_) = json.loads(done.stdout)["kinds"]
    assert sorted(r["name"] for r in claims["archived"]) == ["t0", "t1", "t2", "t3"]
    assert claims["transactions"] == 1
    listed = run("for-each-ref", "--format=%(refname) %(objectname)", cwd=remote.canon)
    server = dict(line.split(" ", 1) for line in listed.splitlines())
    assert {r for r in server if r.startswith(refnames.CLAIMS)} == {
        Canonical.claim_ref("t4"), Canonical.claim_ref("t5"),
    }  # fmt: skip
    assert server[archive_ref("claims")] == claims["tip"]
    other = remote.mirror("host-b")
    done = cli("contract", "show", "--repo", str(other), "--task", "t2", "--json")
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout)["state"] == "revoked"
    again = remote.issue(other, "t2", ["t2/**"], tmp_path / "again.json")
    assert again["ownershipGeneration"] == 2
    assert run("fsck", "--no-dangling", "--no-progress", cwd=remote.canon) == ""
