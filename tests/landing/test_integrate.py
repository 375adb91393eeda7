"""The integration transaction: live checks, merges, staging commits, idempotent landing."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from integrator.documents.contract import parse_contract
from integrator.documents.trailers import trailers
from integrator.documents.verdict import Code, Decision
from integrator.records.claims import Claims
from tests.canon import Canon, make_canon
from tests.gitutil import commit_files, git


@pytest.fixture
def canon(tmp_path: Path) -> Canon:
    return make_canon(tmp_path)


def test_accepted_candidate_lands_atomically(canon: Canon) -> None:
    """ACCEPTED moves queue and main to one staging commit and consumes the claim."""
    contract = canon.issue("billing", ["billing/**"])
    cand = canon.commit({"billing/invoice.py": "invoice = 2\n"})
    base_queue = canon.ref("refs/integrator/queue/main")
    verdict = canon.integrate(contract, cand)
    assert verdict.decision is Decision.ACCEPTED
    staging = verdict.staging_commit
    assert staging is not None
    assert canon.ref("refs/integrator/queue/main") == staging
    assert canon.ref("refs/heads/main") == staging
    assert git("rev-parse", f"{staging}^", cwd=canon.path) == base_queue
    assert verdict.tree == canon.tree_of(cand)
    message = git("log", "-1", "--format=%B", staging, cwd=canon.path)
    fields = trailers(message)
    assert fields["Integrator-Candidate"] == cand
    assert fields["Integrator-Generation"] == "1"
    assert fields["Integrator-Contract-Digest"] == contract.digest
    with canon.open() as canonical:
        claim = canonical.claim("billing")
        assert claim is not None
        assert claim.view.state == "consumed"
        assert claim.view.staging_commit == staging


def test_integrating_again_is_idempotent(canon: Canon) -> None:
    """A candidate that already landed returns the earlier result and writes nothing."""
    contract = canon.issue("billing", ["billing/**"])
    cand = canon.commit({"billing/invoice.py": "invoice = 2\n"})
    first = canon.integrate(contract, cand)
    refs = git("for-each-ref", cwd=canon.path)
    second = canon.integrate(contract, cand)
    assert second.decision is Decision.ACCEPTED
    assert second.recovered is True
    assert second.staging_commit == first.staging_commit
    assert git("for-each-ref", cwd=canon.path) == refs


def test_same_submission_twice_in_one_batch_lands_once(canon: Canon) -> None:
    """A batch holding one submission twice lands it once and answers both with that landing."""
    from integrator.landing.engine import Integrator

    contract = canon.issue("billing", ["billing/**"])
    cand = canon.commit({"billing/invoice.py": "2\n"})
    data = contract.to_json().encode()
    before = git("rev-list", "--count", "refs/integrator/queue/main", cwd=canon.path)
    with canon.open() as canonical:
        first, again = Integrator(canonical).integrate_many([(data, cand), (data, cand)])
    assert (first.decision, again.decision) == (Decision.ACCEPTED, Decision.ACCEPTED)
    assert not first.recovered and again.recovered is True
    assert again.staging_commit == first.staging_commit and again.tree == first.tree
    after = git("rev-list", "--count", "refs/integrator/queue/main", cwd=canon.path)
    assert int(after) == int(before) + 1


def test_landed_candidate_under_another_contract_is_not_recovered(canon: Canon) -> None:
    """Recovery answers only for the contract that landed: the same commit sent with an
    altered contract of that task is fenced, not reported as landed."""
    contract = canon.issue("billing", ["billing/**"])
    cand = canon.commit({"billing/invoice.py": "2\n"})
    assert canon.integrate(contract, cand).decision is Decision.ACCEPTED
    doc = json.loads(contract.to_json())
    doc["deny"] = ["billing/secrets/**"]
    altered = parse_contract(json.dumps(doc).encode())
    assert altered.digest != contract.digest
    verdict = canon.integrate(altered, cand)
    assert verdict.decision is Decision.FENCED
    assert not verdict.recovered
    assert Code.CONTRACT_DIGEST_MISMATCH in verdict.codes


def test_merge_that_follows_a_queue_rename_outside_the_contract_is_fenced(
    tmp_path: Path,
) -> None:
    """The queue renamed lib/l.py to vendor/l.py; a candidate based before that edits
    lib/l.py. git's merge carries the edit to vendor/l.py, which the candidate does not
    own: FENCED, nothing lands. Owning vendor/ too, the same merge lands."""
    body = "".join(f"line {i}\n" for i in range(40))
    canon = make_canon(tmp_path, {"lib/l.py": body, "README": "r\n"})
    base = canon.ref("refs/integrator/queue/main")
    mover = canon.issue("mover", ["lib/**", "vendor/**"])
    moved = canon.commit({"lib/l.py": None, "vendor/l.py": body})
    assert canon.integrate(mover, moved).decision is Decision.ACCEPTED
    editor = canon.issue("editor", ["lib/**"], base=base)
    edit = canon.commit({"lib/l.py": body.replace("line 3\n", "line three\n")}, parent=base)
    head = canon.ref("refs/integrator/queue/main")
    verdict = canon.integrate(editor, edit)
    assert verdict.decision is Decision.FENCED
    assert [(v.code, v.path) for v in verdict.violations] == [(Code.PATH_NOT_OWNED, "vendor/l.py")]
    assert "along a rename" in verdict.violations[0].detail
    assert canon.ref("refs/integrator/queue/main") == head
    with canon.open() as canonical:
        Claims(canonical).revoke("editor")
    wider = canon.issue("editor", ["lib/**", "vendor/**"], base=base)
    landed = canon.integrate(wider, edit)
    assert landed.decision is Decision.ACCEPTED, landed.violations
    assert "line three" in git("show", "main:vendor/l.py", cwd=canon.path)


def test_consumed_claim_fences_another_candidate(canon: Canon) -> None:
    """After a landing, the same contract cannot land a different candidate."""
    contract = canon.issue("billing", ["billing/**"])
    canon.integrate(contract, canon.commit({"billing/invoice.py": "2\n"}))
    other = canon.commit({"billing/tax.py": "3\n"})
    verdict = canon.integrate(contract, other)
    assert verdict.codes == [Code.CLAIM_CONSUMED]


def test_digest_mismatch(canon: Canon) -> None:
    """A contract edited by hand (same generation) is CONTRACT_DIGEST_MISMATCH."""
    contract = canon.issue("billing", ["billing/**"])
    doc = contract.wire()
    doc["paths"] = ["**"]
    cand = canon.commit({"auth/login.py": "pwned\n"})
    verdict = canon.integrate(json.dumps(doc).encode(), cand)
    assert verdict.codes == [Code.CONTRACT_DIGEST_MISMATCH]


def test_lease_expired(canon: Canon) -> None:
    """A live claim whose lease ran out is LEASE_EXPIRED even before anyone reclaims."""
    contract = canon.issue("billing", ["billing/**"])
    canon.clock.advance(31)
    verdict = canon.integrate(contract, canon.commit({"billing/invoice.py": "2\n"}))
    assert verdict.codes == [Code.LEASE_EXPIRED]


def test_policy_changed(canon: Canon) -> None:
    """A contract naming another policy digest is POLICY_CHANGED."""
    contract = canon.issue("billing", ["billing/**"])
    doc = contract.wire()
    doc["policyDigest"] = "sha256:" + "9" * 64
    with canon.open() as canonical:
        # Register the edited contract as the live one so only the policy differs.
        from integrator.documents.claim import claim_state
        from integrator.documents.contract import parse_contract
        from integrator.plumbing import transaction
        from integrator.records.claims import write_claim_commit

        edited = parse_contract(json.dumps(doc))
        claim = canonical.claim("billing")
        assert claim is not None
        state = claim_state(
            edited, state="live", lease_expires_at=claim.view.lease_expires_at, event="issue"
        )
        commit = write_claim_commit(canonical, edited, state, claim.oid, canon.clock())
        canonical.updater.apply(
            [transaction.update("refs/integrator/claims/billing", commit, claim.oid)]
        )
    verdict = canon.integrate(json.dumps(doc).encode(), canon.commit({"billing/tax.py": "2\n"}))
    assert verdict.codes == [Code.POLICY_CHANGED]


def test_claim_missing(canon: Canon) -> None:
    """A contract whose task has no claim in an initialized repository is CLAIM_MISSING."""
    contract = canon.issue("billing", ["billing/**"])
    doc = contract.wire()
    doc["taskId"] = "ghost"
    verdict = canon.integrate(json.dumps(doc).encode(), canon.commit({"billing/tax.py": "2\n"}))
    assert verdict.codes == [Code.CLAIM_MISSING]


def test_disjoint_candidates_land_on_drifted_queue(canon: Canon) -> None:
    """Candidates on a common base land one after another; the queue keeps every change."""
    billing = canon.issue("billing", ["billing/**"])
    auth = canon.issue("auth", ["auth/**"])
    c1 = canon.commit({"billing/invoice.py": "invoice = 2\n", "billing/new.py": "n\n"})
    c2 = canon.commit({"auth/login.py": "login = 2\n", "auth/x/y.py": "y\n"})
    assert canon.integrate(billing, c1).decision is Decision.ACCEPTED
    verdict = canon.integrate(auth, c2)
    assert verdict.decision is Decision.ACCEPTED
    files = git("ls-tree", "-r", "--name-only", "refs/heads/main", cwd=canon.path).splitlines()
    assert files == sorted(
        [
            "auth/login.py",
            "auth/x/y.py",
            "billing/invoice.py",
            "billing/new.py",
            "billing/tax.py",
            "docs/index.md",
        ]
    )
    assert git("show", "main:billing/invoice.py", cwd=canon.path) == "invoice = 2"


def test_conflicting_shared_edit_is_merge_conflict(canon: Canon) -> None:
    """Two forced-shared claims editing the same line: the second is MERGE_CONFLICT."""
    first = canon.issue("a", ["billing/**"])
    with canon.open() as canonical:
        from integrator.records.claims import IssueRequest

        second = Claims(canonical).issue(
            IssueRequest(task_id="b", paths=("billing/invoice.py",)), force_shared=True
        )
    c1 = canon.commit({"billing/invoice.py": "invoice = 'a'\n"})
    c2 = canon.commit({"billing/invoice.py": "invoice = 'b'\n"})
    assert canon.integrate(first, c1).decision is Decision.ACCEPTED
    queue = canon.ref("refs/integrator/queue/main")
    verdict = canon.integrate(second, c2)
    assert verdict.decision is Decision.FENCED
    assert [(v.code, v.path) for v in verdict.violations] == [
        (Code.MERGE_CONFLICT, "billing/invoice.py")
    ]
    assert canon.ref("refs/integrator/queue/main") == queue


LOCK_POLICY = """
version = 1
[[resource]]
paths = ["pnpm-lock.yaml"]
resource = "lockfile:{path}"
"""


def test_clean_merge_on_same_resource_is_resource_conflict(tmp_path: Path) -> None:
    """A textually clean merge where both sides touched one lockfile goes to REVIEW."""
    lock = "".join(f"pkg{i}: 1\n" for i in range(20))
    canon = make_canon(
        tmp_path, {"a/x.py": "1\n", "b/y.py": "1\n", "pnpm-lock.yaml": lock}, policy=LOCK_POLICY
    )
    first = canon.issue("a", ["a/**", "pnpm-lock.yaml"], resources=("lockfile:pnpm-lock.yaml",))
    with canon.open() as canonical:
        from integrator.records.claims import IssueRequest

        second = Claims(canonical).issue(
            IssueRequest(
                task_id="b",
                paths=("b/**", "pnpm-lock.yaml"),
                resources=("lockfile:pnpm-lock.yaml",),
            ),
            force_shared=True,
        )
    c1 = canon.commit({"a/x.py": "2\n", "pnpm-lock.yaml": lock.replace("pkg1: 1", "pkg1: 2")})
    c2 = canon.commit({"b/y.py": "2\n", "pnpm-lock.yaml": lock.replace("pkg18: 1", "pkg18: 2")})
    assert canon.integrate(first, c1).decision is Decision.ACCEPTED
    verdict = canon.integrate(second, c2)
    assert verdict.decision is Decision.REVIEW
    assert verdict.codes == [Code.RESOURCE_CONFLICT]
    assert verdict.violations[0].resource == "lockfile:pnpm-lock.yaml"


def test_base_not_on_queue(canon: Canon) -> None:
    """A base off the queue's history is BASE_NOT_ON_QUEUE: its extra commits are unproven."""
    side = commit_files(canon.path, {"docs/index.md": "side\n"}, "side", parent="main", ref=None)
    contract = canon.issue("billing", ["billing/**"], base=side)
    cand = canon.commit({"billing/invoice.py": "2\n"}, parent=side)
    verdict = canon.integrate(contract, cand)
    assert verdict.codes == [Code.BASE_NOT_ON_QUEUE]


def test_target_moved_outside_queue_is_fenced(canon: Canon) -> None:
    """When main was moved behind the queue's back, landing refuses with REF_MOVED."""
    contract = canon.issue("billing", ["billing/**"])
    commit_files(
        canon.path,
        {"docs/index.md": "direct push\n"},
        "direct",
        parent="main",
        ref="refs/heads/main",
    )
    verdict = canon.integrate(
        contract, canon.commit({"billing/invoice.py": "2\n"}, parent="refs/integrator/queue/main")
    )
    assert verdict.decision is Decision.FENCED
    assert verdict.codes == [Code.REF_MOVED]
    assert verdict.violations[0].resource == "refs/heads/main"


def test_target_can_stay_still(tmp_path: Path) -> None:
    """With target_follows_queue = false, only the queue moves."""
    canon = make_canon(
        tmp_path, policy="version = 1\n[integration]\ntarget_follows_queue = false\n"
    )
    main = canon.ref("refs/heads/main")
    contract = canon.issue("billing", ["billing/**"])
    verdict = canon.integrate(contract, canon.commit({"billing/invoice.py": "2\n"}))
    assert verdict.decision is Decision.ACCEPTED
    assert canon.ref("refs/heads/main") == main
    assert canon.ref("refs/integrator/queue/main") == verdict.staging_commit


def test_integrate_requires_init(tmp_path: Path) -> None:
    """integrate on a repository without `integrator init` is a configuration error."""
    from integrator.errors import ConfigurationError
    from integrator.landing.engine import Integrator
    from integrator.records.canonical import Canonical
    from tests.gitutil import make_repo

    repo = make_repo(tmp_path / "plain")
    commit_files(repo, {"a": "1\n"}, "base")
    with Canonical(repo) as canonical, pytest.raises(ConfigurationError, match="integrator init"):
        Integrator(canonical).integrate(b"{}", "HEAD")


def test_batch_lands_in_one_transaction(canon: Canon) -> None:
    """integrate_many lands every passing candidate in order with a single ref transaction."""
    from integrator.landing.engine import Integrator

    billing = canon.issue("billing", ["billing/**"])
    auth = canon.issue("auth", ["auth/**"])
    docs = canon.issue("docs", ["docs/**"])
    c1 = canon.commit({"billing/invoice.py": "2\n"})
    c2 = canon.commit({"auth/login.py": "2\n"})
    dup = canon.commit({"billing/tax.py": "2\n"})
    outside = canon.commit({"docs/index.md": "x\n", "billing/tax.py": "y\n"})
    items = [
        (billing.to_json().encode(), c1),
        (auth.to_json().encode(), c2),
        (billing.to_json().encode(), dup),
        (docs.to_json().encode(), outside),
    ]
    with canon.open() as canonical:
        engine = Integrator(canonical)
        verdicts = engine.integrate_many(items)
        transactions = canonical.updater.transactions
    assert [v.decision for v in verdicts] == [
        Decision.ACCEPTED,
        Decision.ACCEPTED,
        Decision.FENCED,
        Decision.FENCED,
    ]
    assert verdicts[2].codes == [Code.CLAIM_CONSUMED]
    assert verdicts[3].codes == [Code.PATH_NOT_OWNED]
    assert transactions == 1
    chain = git("rev-list", "--first-parent", "refs/heads/main", cwd=canon.path).split()
    assert chain[:2] == [verdicts[1].staging_commit, verdicts[0].staging_commit]
    assert git("rev-parse", "refs/integrator/queue/main", cwd=canon.path) == chain[0]
    for task in ("billing", "auth"):
        with canon.open() as canonical:
            claim = canonical.claim(task)
            assert claim is not None
            assert claim.view.state == "consumed"


def test_torn_read_of_queue_and_target_is_read_again(canon: Canon) -> None:
    """A read that falls inside another integrator's commit (queue moved, target not yet)
    is read again instead of being taken for a target moved by hand."""
    from integrator.landing.batch import _read_heads
    from integrator.records.canonical import Canonical

    queue, main = "refs/integrator/queue/main", "refs/heads/main"
    reads: list[str] = []
    torn = {queue: "1" * 40, main: "0" * 40}
    settled = {queue: "1" * 40, main: "1" * 40}

    class Mid(Canonical):
        def ref(self, name: str) -> str | None:
            reads.append(name)
            return (torn if len(reads) <= 2 else settled)[name]

    with Mid(canon.path) as mid:
        assert _read_heads(mid, follows=True) == ("1" * 40, "1" * 40)
        assert len(reads) == 4
        reads.clear()
        # Without a following target, a difference is normal and read once.
        assert _read_heads(mid, follows=False) == ("1" * 40, "0" * 40)
        assert len(reads) == 2


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="syncfs and /proc are Linux")
def test_unsynced_updater_creates_refs_and_refuses_deletions(canon: Canon) -> None:
    """The bulk updater (held refs) runs git with core.fsyncMethod=writeout-only and never
    deletes: a deletion may rewrite packed-refs, which it keeps to the fsyncing updater."""
    from integrator.plumbing import git as igit
    from integrator.plumbing import transaction
    from integrator.records.canonical import Canonical

    head = canon.ref("refs/integrator/queue/main")
    assert head is not None
    with Canonical(canon.path) as canonical:
        bulk = canonical.bulk_updater
        assert isinstance(bulk, transaction.RefUpdater)
        bulk.apply([transaction.update("refs/integrator/held/one", head, None)])
        proc = bulk._proc
        assert proc is not None
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
        assert b"core.fsyncMethod=writeout-only" in cmdline
        igit.sync_refs(canonical.repo)
        with pytest.raises(ValueError, match="packed-refs"):
            bulk.apply([transaction.delete("refs/integrator/held/one", head)])
    assert canon.ref("refs/integrator/held/one") == head


def test_queue_moved_back_by_hand_forgets_the_discarded_chain(canon: Canon) -> None:
    """A long-lived engine caches the queue's chain; after a release manager moves the
    queue back, a base only the discarded landings had is BASE_NOT_ON_QUEUE again."""
    from integrator.landing.engine import Integrator

    start = canon.ref("refs/integrator/queue/main")
    billing = canon.issue("billing", ["billing/**"])
    auth = canon.issue("auth", ["auth/**"])
    with canon.open() as canonical:
        engine = Integrator(canonical)
        first = engine.integrate(billing.to_json().encode(), canon.commit({"billing/a.py": "1\n"}))
        discarded = canon.ref("refs/integrator/queue/main")
        # Landing on top of `discarded` puts it in the engine's cached chain.
        assert start is not None
        auth_change = canon.commit({"auth/b.py": "2\n"}, parent=start)
        second = engine.integrate(auth.to_json().encode(), auth_change)
        assert first.decision is second.decision is Decision.ACCEPTED
        tip = canon.ref("refs/integrator/queue/main")
        assert discarded is not None and start is not None and tip is not None
        for ref in ("refs/integrator/queue/main", "refs/heads/main"):
            git("update-ref", ref, start, tip, cwd=canon.path)
        later = canon.issue("docs", ["docs/**"], base=discarded)
        cand = canon.commit({"docs/x.md": "x\n"}, parent=discarded)
        verdict = engine.integrate(later.to_json().encode(), cand)
    assert Code.BASE_NOT_ON_QUEUE in verdict.codes
    assert canon.ref("refs/integrator/queue/main") == start


def test_merge_that_moves_a_retargeted_symlink_out_of_the_repository_is_fenced(
    tmp_path: Path,
) -> None:
    """The queue moved the link a/b/c/d/l to top/l; a candidate based before that gives
    a/b/c/d/l the target ../../../../etc/passwd, harmless at that depth. git's merge puts
    the new target at top/l, where it climbs out: SYMLINK_ESCAPE, nothing lands."""
    canon = make_canon(tmp_path, {"a/b/c/d/l": ("x", "l"), "a/b/c/d/x": "x\n", "README": "r\n"})
    base = canon.ref("refs/integrator/queue/main")
    mover = canon.issue("mover", ["a/**", "top/**"])
    moved = canon.commit({"a/b/c/d/l": None, "top/l": ("x", "l")})
    assert canon.integrate(mover, moved).decision is Decision.ACCEPTED
    link = canon.issue("link", ["a/**", "top/**"], base=base)
    retarget = canon.commit({"a/b/c/d/l": ("../../../../etc/passwd", "l")}, parent=base)
    head = canon.ref("refs/integrator/queue/main")
    verdict = canon.integrate(link, retarget)
    assert verdict.decision is Decision.FENCED
    assert [(v.code, v.path) for v in verdict.violations] == [(Code.SYMLINK_ESCAPE, "top/l")]
    assert canon.ref("refs/integrator/queue/main") == head


def test_merge_that_carries_an_edit_into_a_resource_needs_the_resource(tmp_path: Path) -> None:
    """The queue promoted db/drafts/0042.sql into the migration slot; a candidate based
    before that edits the draft. The merge writes db/migrations/0042.sql, which touches
    migration-slot:main: RESOURCE_NOT_OWNED unless the contract owns the slot."""
    policy = (
        'version = 1\n[[resource]]\npaths = ["db/migrations/**"]\n'
        'resource = "migration-slot:main"\n'
    )
    canon = make_canon(tmp_path, {"db/drafts/0042.sql": "create table u;\n"}, policy=policy)
    base = canon.ref("refs/integrator/queue/main")
    promote = canon.issue("promote", ["db/**"], resources=("migration-slot:main",))
    moved = canon.commit(
        {"db/drafts/0042.sql": None, "db/migrations/0042.sql": "create table u;\n"}
    )
    assert canon.integrate(promote, moved).decision is Decision.ACCEPTED
    edit = canon.issue("edit", ["db/**"], base=base)
    edited = canon.commit({"db/drafts/0042.sql": "drop table u;\n"}, parent=base)
    verdict = canon.integrate(edit, edited)
    assert verdict.decision is Decision.FENCED
    assert (Code.RESOURCE_NOT_OWNED, "migration-slot:main") in [
        (v.code, v.resource) for v in verdict.violations
    ]
    assert git("show", "main:db/migrations/0042.sql", cwd=canon.path) == "create table u;"


def test_landing_the_queue_no_longer_holds_is_not_reported_as_recovered(canon: Canon) -> None:
    """After the queue was moved back past a landing, integrating that candidate again is
    not 'recovered ACCEPTED' (its staging commit is not on the queue): the consumed claim
    fences it."""
    start = canon.ref("refs/integrator/queue/main")
    contract = canon.issue("billing", ["billing/**"])
    cand = canon.commit({"billing/invoice.py": "2\n"})
    landed = canon.integrate(contract, cand)
    assert landed.decision is Decision.ACCEPTED and start is not None
    for ref in ("refs/integrator/queue/main", "refs/heads/main"):
        git("update-ref", ref, start, cwd=canon.path)
    again = canon.integrate(contract, cand)
    assert again.decision is Decision.FENCED and not again.recovered
    assert again.codes == [Code.CLAIM_CONSUMED]
