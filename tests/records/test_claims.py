"""Claims as refs: every operation is a commit on the claim's chain, written by CAS."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError

from integrator.cli import main
from integrator.documents.expansion import ExpansionRequest
from integrator.documents.policy import default_policy_text
from integrator.documents.verdict import Code, Decision
from integrator.errors import ClaimConflictError, ConfigurationError, ReviewRequired, UsageError
from integrator.records.claims import Claims, history
from integrator.records.expansions import Expansions, expansion_ref, expansions
from integrator.records.policy_ref import set_policy
from integrator.records.prepare import prepare
from tests.canon import Canon, make_canon
from tests.gitutil import git


@pytest.fixture
def canon(tmp_path: Path) -> Canon:
    return make_canon(tmp_path)


def test_issue_registers_claim_with_history(canon: Canon) -> None:
    """Issuing writes refs/integrator/claims/<task> whose log reads as the claim's history."""
    contract = canon.issue("billing", ["billing/**"])
    assert contract.ownership_generation == 1
    log = git("log", "--format=%s", "refs/integrator/claims/billing", cwd=canon.path)
    assert log == f"issue: billing generation 1 attempt {contract.attempt_id}"
    with canon.open() as canonical:
        claim = canonical.claim("billing")
        assert claim is not None
        assert claim.view.state == "live"
        assert claim.contract == contract


def test_issue_refuses_overlap_unless_forced(canon: Canon) -> None:
    """A contract overlapping a live claim's paths or resources is refused, --force-shared aside."""
    canon.issue("billing", ["billing/**"], resources=("api:Invoice",))
    with pytest.raises(ClaimConflictError, match=re.escape("billing/tax.py")):
        canon.issue("tax", ["billing/tax.py"])
    with pytest.raises(ClaimConflictError, match="api:Invoice"):
        canon.issue("api", ["auth/**"], resources=("api:Invoice",))
    with canon.open() as canonical:
        from integrator.records.claims import IssueRequest

        shared = Claims(canonical).issue(
            IssueRequest(task_id="tax", paths=("billing/tax.py",)), force_shared=True
        )
    assert shared.task_id == "tax"
    assert canon.issue("auth", ["auth/**"]).task_id == "auth"


def test_unanchored_pattern_overlaps_everything(canon: Canon) -> None:
    """A pattern without a slash matches at any depth, so it overlaps every claim."""
    canon.issue("billing", ["billing/**"])
    with pytest.raises(ClaimConflictError):
        canon.issue("env", ["*.env"])


def test_issue_twice_for_live_task_is_refused(canon: Canon) -> None:
    """A task with a live claim cannot be issued again; renew, reclaim or expand it."""
    canon.issue("billing", ["billing/**"])
    with pytest.raises(ClaimConflictError, match="already has a live claim"):
        canon.issue("billing", ["billing/**"])


def test_renew_keeps_generation_and_contract(canon: Canon) -> None:
    """Renewing extends the lease only: same generation, same contract digest."""
    contract = canon.issue("billing", ["billing/**"])
    with canon.open() as canonical:
        until = canon.clock.now.replace(year=2027)
        claim = Claims(canonical).renew("billing", until)
    assert claim.view.generation == 1
    assert claim.view.contract_digest == contract.digest
    assert claim.view.lease_expires_at == until
    canon.clock.advance(60 * 24)  # past the original lease
    assert canon.check(contract, contract.base_commit).codes == []


def test_renew_never_shortens_a_lease(canon: Canon) -> None:
    """Regression: renew with an expiry before the current one is refused and writes nothing."""
    canon.issue("billing", ["billing/**"], lease=timedelta(hours=2))
    before = canon.ref("refs/integrator/claims/billing")
    with canon.open() as canonical, pytest.raises(UsageError, match="before the current lease"):
        Claims(canonical).renew("billing", canon.clock.now + timedelta(seconds=1))
    assert canon.ref("refs/integrator/claims/billing") == before
    canon.clock.advance(1)
    with canon.open() as canonical, pytest.raises(ClaimConflictError, match="reclaim after"):
        Claims(canonical).reclaim("billing")


def test_renew_cli_refuses_to_shorten_with_exit_2(
    canon: Canon, capsys: pytest.CaptureFixture[str]
) -> None:
    """`contract renew --until 1s` on a 2 h lease exits 2 saying why; the claim does not move."""
    repo = str(canon.path)
    assert main(["contract", "issue", "--repo", repo, "--task", "t", "--path", "t/**"]) == 0
    assert main(["contract", "renew", "--repo", repo, "--task", "t", "--until", "2h"]) == 0
    before = canon.ref("refs/integrator/claims/t")
    capsys.readouterr()
    assert main(["contract", "renew", "--repo", repo, "--task", "t", "--until", "1s"]) == 2
    assert "before the current lease expiry" in capsys.readouterr().err
    assert canon.ref("refs/integrator/claims/t") == before
    assert main(["contract", "reclaim", "--repo", repo, "--task", "t"]) == 1


def test_reclaim_requires_expiry_and_fences_old_attempt(canon: Canon) -> None:
    """Reclaim works only after the lease expired (or forced), bumps the generation, fences the old."""
    old = canon.issue("billing", ["billing/**"])
    with canon.open() as canonical, pytest.raises(ClaimConflictError, match="reclaim after"):
        Claims(canonical).reclaim("billing")
    canon.clock.advance(31)
    with canon.open() as canonical:
        new = Claims(canonical).reclaim("billing", holder="agent-b")
    assert new.ownership_generation == 2
    assert new.attempt_id != old.attempt_id
    assert new.lease.holder == "agent-b"
    cand = canon.commit({"billing/invoice.py": "invoice = 2\n"})
    stale = canon.integrate(old, cand)
    assert stale.decision is Decision.FENCED
    assert stale.codes == [Code.STALE_GENERATION]
    assert canon.integrate(new, cand).decision is Decision.ACCEPTED


def test_forced_reclaim(canon: Canon) -> None:
    """--force reclaims a lease that has not expired."""
    canon.issue("billing", ["billing/**"])
    with canon.open() as canonical:
        new = Claims(canonical).reclaim("billing", force=True)
    assert new.ownership_generation == 2


def _request(canon: Canon, contract_digest: str, generation: int, **kw: object) -> ExpansionRequest:
    """A request from a clean workspace at the contract's base (the queue head)."""
    doc = {
        "workspaceTree": canon.tree_of("refs/integrator/queue/main"),
        "schema": "integrator.expansion.v1",
        "taskId": "billing",
        "contractDigest": contract_digest,
        "expectedGeneration": generation,
        "treeDigest": "sha256:" + "a" * 64,
        "diffDigest": "sha256:" + "b" * 64,
        "addPaths": ["docs/billing.md"],
        "addResources": [],
        **kw,
    }
    return ExpansionRequest.model_validate_json(json.dumps(doc))


def test_expand_issues_next_generation_with_full_write_set(canon: Canon) -> None:
    """An expansion that conflicts with nothing issues generation + 1 with old ∪ added paths."""
    contract = canon.issue("billing", ["billing/**"])
    with canon.open() as canonical:
        expanded = Expansions(canonical).expand(_request(canon, contract.digest, 1))
    assert expanded.ownership_generation == 2
    assert expanded.paths == ["billing/**", "docs/billing.md"]
    assert expanded.attempt_id == contract.attempt_id
    cand = canon.commit({"docs/billing.md": "new\n"})
    assert canon.integrate(contract, cand).codes == [Code.STALE_GENERATION]
    assert canon.integrate(expanded, cand).decision is Decision.ACCEPTED


def test_expand_on_stale_digest_goes_to_review_and_writes_nothing(canon: Canon) -> None:
    """A CAS mismatch on generation or digest leaves the claim alone and records the request."""
    contract = canon.issue("billing", ["billing/**"])
    before = canon.ref("refs/integrator/claims/billing")
    stale_digest = _request(canon, "sha256:" + "c" * 64, 1)
    stale_generation = _request(canon, contract.digest, 5)
    with canon.open() as canonical, pytest.raises(ReviewRequired, match="claim was not changed"):
        Expansions(canonical).expand(stale_digest)
    with canon.open() as canonical, pytest.raises(ReviewRequired, match="expected generation 5"):
        Expansions(canonical).expand(stale_generation)
    assert canon.ref("refs/integrator/claims/billing") == before
    with canon.open() as canonical:
        pending = expansions(canonical, "billing", pending_only=True)
    # Both were refused at the same (test clock) instant: oldest-first cannot order them.
    by_id = {e.record.request_id: e for e in pending}
    assert set(by_id) == {stale_digest.request_id, stale_generation.request_id}
    assert all(e.record.live_generation == 1 for e in pending)
    assert by_id[stale_generation.request_id].request == stale_generation


def test_expand_conflicting_with_other_claim_goes_to_review(canon: Canon) -> None:
    """An expansion into another live claim's paths leaves the claim alone and is recorded."""
    contract = canon.issue("billing", ["billing/**"])
    canon.issue("docs", ["docs/**"])
    before = canon.ref("refs/integrator/claims/billing")
    request = _request(canon, contract.digest, 1)
    with canon.open() as canonical, pytest.raises(ReviewRequired, match=request.request_id):
        Expansions(canonical).expand(request)
    assert canon.ref("refs/integrator/claims/billing") == before
    with canon.open() as canonical:
        (entry,) = expansions(canonical, pending_only=True)
    assert entry.ref == expansion_ref("billing", request.request_id)
    assert (entry.record.state, entry.record.conflicts_with) == ("pending", ["docs"])
    assert "docs/billing.md" in entry.record.reason


def test_refused_twice_appends_to_one_chain(canon: Canon) -> None:
    """The same request refused again adds a commit to its own ref rather than a second entry."""
    contract = canon.issue("billing", ["billing/**"])
    canon.issue("docs", ["docs/**"])
    request = _request(canon, contract.digest, 1)
    for _ in range(2):
        with canon.open() as canonical, pytest.raises(ReviewRequired):
            Expansions(canonical).expand(request)
    ref = expansion_ref("billing", request.request_id)
    log = git("log", "--format=%s", ref, cwd=canon.path).splitlines()
    assert log == [f"refuse: expansion {request.request_id} of billing (pending)"] * 2
    with canon.open() as canonical:
        assert len(expansions(canonical)) == 1


def test_granting_a_pending_request_closes_it(canon: Canon) -> None:
    """Once the conflict is gone, re-running the request grants it and marks its record granted."""
    contract = canon.issue("billing", ["billing/**"])
    canon.issue("docs", ["docs/**"])
    request = _request(canon, contract.digest, 1)
    with canon.open() as canonical, pytest.raises(ReviewRequired):
        Expansions(canonical).expand(request)
    with canon.open() as canonical:
        Claims(canonical).revoke("docs")
        expanded = Expansions(canonical).expand(request)
        (entry,) = expansions(canonical)
        assert expansions(canonical, pending_only=True) == []
    assert expanded.ownership_generation == 2
    assert (entry.record.state, entry.record.live_generation) == ("granted", 2)
    assert entry.record.live_contract_digest == expanded.digest


def test_dismiss_closes_a_pending_request_without_touching_the_claim(canon: Canon) -> None:
    """`dismiss` records the request as dismissed; the claim stays; a second dismiss is refused."""
    canon.issue("billing", ["billing/**"])
    request = _request(canon, "sha256:" + "c" * 64, 1)
    with canon.open() as canonical, pytest.raises(ReviewRequired):
        Expansions(canonical).expand(request)
    before = canon.ref("refs/integrator/claims/billing")
    with canon.open() as canonical:
        entry = Expansions(canonical).dismiss(request.request_id, "ask again")
        assert expansions(canonical, pending_only=True) == []
        with pytest.raises(ClaimConflictError, match="already dismissed"):
            Expansions(canonical).dismiss(request.request_id)
        with pytest.raises(UsageError, match="no expansion request"):
            Expansions(canonical).dismiss("0" * 16)
    assert (entry.record.state, entry.record.reason) == ("dismissed", "ask again")
    assert canon.ref("refs/integrator/claims/billing") == before
    assert canon.ref(entry.ref) == entry.commit


def test_expand_on_a_revoked_claim_is_recorded(canon: Canon) -> None:
    """An expansion of a claim that is no longer live goes to review and is recorded too."""
    contract = canon.issue("billing", ["billing/**"])
    with canon.open() as canonical:
        Claims(canonical).revoke("billing")
    before = canon.ref("refs/integrator/claims/billing")
    with canon.open() as canonical, pytest.raises(ReviewRequired, match="the claim is revoked"):
        Expansions(canonical).expand(_request(canon, contract.digest, 1))
    assert canon.ref("refs/integrator/claims/billing") == before
    with canon.open() as canonical:
        (entry,) = expansions(canonical, pending_only=True)
    assert entry.record.live_state == "revoked"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("treeDigest", "sha256:00"),
        ("diffDigest", "sha256:" + "A" * 64),
        ("contractDigest", "md5:" + "a" * 64),
    ],
)
def test_expansion_request_digests_are_validated(canon: Canon, field: str, value: str) -> None:
    """Tree, diff and contract digests of a request must be sha256:<64 lowercase hex>."""
    with pytest.raises(ValidationError, match="sha256:<64 hex digits>"):
        _request(canon, "sha256:" + "c" * 64, 1, **{field: value})


def test_expand_cli_with_a_bad_digest_exits_2_and_writes_nothing(
    canon: Canon, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`contract expand` refuses a malformed treeDigest with a clear message, nothing recorded."""
    contract = canon.issue("billing", ["billing/**"])
    before = canon.ref("refs/integrator/claims/billing")
    doc = json.loads(_request(canon, contract.digest, 1).to_json())
    doc["treeDigest"] = "sha256:00"
    path = tmp_path / "request.json"
    path.write_text(json.dumps(doc))
    assert main(["contract", "expand", "--repo", str(canon.path), "--request", str(path)]) == 2
    assert "treeDigest" in capsys.readouterr().err
    assert canon.ref("refs/integrator/claims/billing") == before
    assert git("for-each-ref", "refs/integrator/expansions/", cwd=canon.path) == ""


def test_expand_cli_routes_to_review_and_list_shows_it(
    canon: Canon, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 3 on conflict, and `contract list`/`show`/`dismiss` find the pending request."""
    contract = canon.issue("billing", ["billing/**"])
    canon.issue("docs", ["docs/**"])
    request = _request(canon, contract.digest, 1)
    path = tmp_path / "request.json"
    path.write_text(request.to_json())
    repo = str(canon.path)
    assert main(["contract", "expand", "--repo", repo, "--request", str(path)]) == 3
    assert f"refs/integrator/expansions/billing/{request.request_id}" in capsys.readouterr().err
    assert main(["contract", "list", "--repo", repo, "--json"]) == 0
    rows = {row["taskId"]: row for row in json.loads(capsys.readouterr().out)}
    (pending,) = rows["billing"]["pendingExpansions"]
    assert (pending["requestId"], pending["addPaths"]) == (request.request_id, ["docs/billing.md"])
    assert pending["conflictsWith"] == ["docs"]
    assert rows["docs"]["pendingExpansions"] == []
    assert main(["contract", "list", "--repo", repo]) == 0
    assert request.request_id in capsys.readouterr().out
    assert main(["contract", "dismiss", "--repo", repo, request.request_id]) == 0
    capsys.readouterr()
    assert main(["contract", "show", "--repo", repo, "--task", "billing", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [(e["requestId"], e["state"]) for e in shown["expansionRequests"]] == [
        (request.request_id, "dismissed")
    ]
    assert shown["generation"] == 1


def test_revoke_fences_and_frees_paths(canon: Canon) -> None:
    """A revoked claim fences its contract and no longer blocks overlapping issues."""
    contract = canon.issue("billing", ["billing/**"])
    with canon.open() as canonical:
        Claims(canonical).revoke("billing", "task cancelled")
    cand = canon.commit({"billing/invoice.py": "x\n"})
    verdict = canon.integrate(contract, cand)
    assert verdict.codes == [Code.CLAIM_REVOKED]
    assert "task cancelled" in verdict.violations[0].detail
    assert canon.issue("tax", ["billing/tax.py"]).ownership_generation == 1
    reissued = canon.issue("billing", ["billing/invoice.py"])
    assert reissued.ownership_generation == 2


def test_policy_set_revokes_live_claims_atomically(canon: Canon) -> None:
    """Setting a policy bumps its generation and revokes every unconsumed contract."""
    contract = canon.issue("billing", ["billing/**"])
    canon.issue("auth", ["auth/**"])
    with canon.open() as canonical:
        state, revoked = set_policy(canonical, default_policy_text() + "\n# v2\n")
    assert state.generation == 2
    assert sorted(revoked) == ["auth", "billing"]
    cand = canon.commit({"billing/invoice.py": "x\n"})
    verdict = canon.integrate(contract, cand)
    assert Code.CLAIM_REVOKED in verdict.codes
    assert Code.POLICY_CHANGED in verdict.codes
    reissued = canon.issue("billing", ["billing/**"])
    assert canon.integrate(reissued, cand).decision is Decision.ACCEPTED


def test_history_lists_every_event(canon: Canon) -> None:
    """The claim's chain records issue, renew, reclaim and consume in order."""
    canon.issue("billing", ["billing/**"])
    with canon.open() as canonical:
        Claims(canonical).renew("billing", canon.clock.now.replace(year=2027))
        new = Claims(canonical).reclaim("billing", force=True)
    cand = canon.commit({"billing/invoice.py": "x\n"})
    assert canon.integrate(new, cand).decision is Decision.ACCEPTED
    with canon.open() as canonical:
        events = [state["event"] for _, state, _ in history(canonical, "billing")]
    assert events == ["consume", "reclaim", "renew", "issue"]


def test_unknown_task_operations_fail_clearly(canon: Canon) -> None:
    """Operations on a task without a claim say so."""
    with canon.open() as canonical, pytest.raises(ConfigurationError, match="no claim"):
        Claims(canonical).revoke("ghost")


def test_prepare_is_idempotent(canon: Canon) -> None:
    """A second `init` changes nothing."""
    queue = canon.ref("refs/integrator/queue/main")
    policy = canon.ref("refs/integrator/policy")
    again = prepare(canon.path)
    assert again.actions == ()
    assert canon.ref("refs/integrator/queue/main") == queue
    assert canon.ref("refs/integrator/policy") == policy
    assert git("config", "core.fsync", cwd=canon.path) == "objects,reference,derived-metadata"
