"""False-block rollback: a category back to observe as a policy change, and new claims paused."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from integrator import refnames
from integrator.cli import main
from integrator.documents.categories import Category
from integrator.documents.expansion import ExpansionRequest
from integrator.errors import ClaimConflictError, ClaimsPausedError, ConfigurationError
from integrator.records.canonical import Canonical
from integrator.records.claims import Claims, IssueRequest
from integrator.records.expansions import Expansions
from integrator.records.pause import history, read_pause, set_pause
from integrator.rollout.enforcement import with_mode
from tests.gitutil import git
from tests.gitutil import run_integrator_raw as cli
from tests.remote_world import RemoteWorld
from tests.rollout_world import Rollout, make_rollout, policy_text


@pytest.fixture
def rollout(tmp_path: Path) -> Rollout:
    return make_rollout(tmp_path, migrations="enforce")


def _json(capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    doc: dict[str, object] = json.loads(capsys.readouterr().out)
    return doc


def test_policy_observe_is_a_policy_change_recorded_with_its_reason(
    rollout: Rollout, capsys: pytest.CaptureFixture[str]
) -> None:
    """`policy observe migrations` bumps the generation, revokes live claims in the same
    transaction, edits only that one line of the coordinator's text, and says why in git."""
    rollout.issue("billing", ["src/billing/**"])
    before = git("show", "refs/integrator/policy:policy.toml", cwd=rollout.repo)
    code = main(["policy", "observe", "migrations", "--repo", str(rollout.repo),
                 "--reason", "false block on 0007", "--actor", "rm-alice", "--json"])  # fmt: skip
    assert code == 0
    doc = _json(capsys)
    assert doc == {**doc, "changed": True, "generation": 2, "revoked": ["billing"]}
    after = git("show", "refs/integrator/policy:policy.toml", cwd=rollout.repo)
    changed = [
        (a, b) for a, b in zip(before.splitlines(), after.splitlines(), strict=True) if a != b
    ]
    assert changed == [('migrations = "enforce"', 'migrations = "observe"')]
    assert "# rollout: categories start in observe" in after  # comments are kept
    message = git("log", "-1", "--format=%B", "refs/integrator/policy", cwd=rollout.repo)
    assert message.startswith("policy observe migrations: generation 2")
    assert "migrations → observe by rm-alice: false block on 0007" in message
    with rollout.open() as canonical:
        claim = canonical.claim("billing")
        assert claim is not None and claim.view.state == "revoked"
    again = main(["policy", "observe", "migrations", "--repo", str(rollout.repo), "--reason", "x"])
    assert again == 0
    assert "already observe; nothing changed" in capsys.readouterr().out
    assert git("rev-list", "--count", "refs/integrator/policy", cwd=rollout.repo) == "2"


def test_policy_enforce_and_a_policy_the_line_edit_cannot_change(tmp_path: Path) -> None:
    """A missing key or table is added; an inline table is refused rather than rewritten."""
    bare = "version = 1\n"
    added = with_mode(bare, Category.SOURCE, "observe")
    assert added.endswith('[enforcement]\nsource = "observe"\n')
    listed = with_mode(policy_text(), Category.CI, "enforce")
    assert 'ci = "enforce"' in listed and listed.count("[enforcement]") == 1
    inline = 'version = 1\nenforcement = { ci = "observe" }\n'
    with pytest.raises(ConfigurationError, match="policy set FILE"):
        with_mode(inline, Category.CI, "enforce")


def test_pause_refuses_new_claims_naming_the_reason_and_existing_ones_keep_working(
    rollout: Rollout, capsys: pytest.CaptureFixture[str]
) -> None:
    """While paused, issue, reclaim and expand refuse (exit 1, the reason in the message);
    renew, revoke and landing an existing contract go on; resume lifts it."""
    billing = rollout.issue("billing", ["src/billing/**"])
    auth = rollout.issue("auth", ["src/auth/**"])
    repo = str(rollout.repo)
    assert main(["contract", "pause", "--repo", repo, "--reason", "false block in migrations"]) == 0
    capsys.readouterr()
    refused = main(["contract", "issue", "--repo", repo, "--task", "docs", "--path", "docs/**"])
    assert refused == 1
    err = capsys.readouterr().err
    assert "new claims are paused" in err and "false block in migrations" in err
    with rollout.open() as canonical:
        claims = Claims(canonical)
        with pytest.raises(ClaimsPausedError, match="false block"):
            claims.reclaim("billing", force=True)
        request = ExpansionRequest.model_validate(
            {
                "schema": "integrator.expansion.v1",
                "taskId": "auth",
                "contractDigest": auth.digest,
                "expectedGeneration": 1,
                "treeDigest": "sha256:" + "0" * 64,
                "diffDigest": "sha256:" + "0" * 64,
                "workspaceTree": git("rev-parse", f"{auth.base_commit}^{{tree}}", cwd=rollout.repo),
                "addPaths": ["docs/**"],
            }
        )
        with pytest.raises(ClaimsPausedError):
            Expansions(canonical).expand(request)
        claims.renew("billing", rollout.canon.clock() + timedelta(hours=8))
        claims.revoke("auth", "not needed")
    candidate = rollout.commit(billing.base_commit, {"src/billing/invoice.py": "invoice = 9\n"})
    landed = rollout.canon.integrate(billing, candidate)
    assert landed.decision.value == "ACCEPTED", landed.codes
    assert main(["contract", "resume", "--repo", repo, "--reason", "migrations observed"]) == 0
    assert main(["contract", "issue", "--repo", repo, "--task", "docs", "--path", "docs/**"]) == 0
    log = git("log", "--format=%s", refnames.PAUSE, cwd=rollout.repo).splitlines()
    assert log[0].startswith("resume: new claims resumed by") and log[1].startswith("pause:")
    with rollout.open() as canonical:
        states = [s.state for _, s in history(canonical)]
        assert states == ["resumed", "paused"]
        paused = history(canonical)[1][1]
        assert paused.reason == "false block in migrations"


def test_a_pause_moves_the_claims_index_and_pausing_twice_is_refused(rollout: Rollout) -> None:
    """The pause takes the claims index in its transaction (so a racing issue loses its
    swap and reads the pause); pausing twice or resuming when not paused is refused."""
    rollout.issue("billing", ["src/billing/**"])
    with rollout.open() as canonical:
        index = canonical.ref(refnames.CLAIMS_INDEX)
        with pytest.raises(ClaimConflictError, match="not paused"):
            set_pause(canonical, "resumed", "nothing", "rm")
        set_pause(canonical, "paused", "incident 12", "rm")
        assert canonical.ref(refnames.CLAIMS_INDEX) != index
        with pytest.raises(ClaimConflictError, match="already paused"):
            set_pause(canonical, "paused", "again", "rm")
        state = read_pause(canonical)
        assert state is not None and state.paused and state.actor == "rm"


def test_pause_in_remote_mode_reaches_every_integrator_host(remote: RemoteWorld) -> None:
    """Through `Canonical.updater` the pause is one atomic push to the server: another
    host's mirror reads it and refuses to issue, and resume from that host lifts it."""
    host_a = remote.mirror("host-a")
    host_b = remote.mirror("host-b")
    paused = cli("contract", "pause", "--repo", str(host_a), "--reason", "incident 7")
    assert paused.returncode == 0, paused.stderr.decode()
    assert git("rev-parse", "--verify", "-q", refnames.PAUSE, cwd=remote.canon)
    refused = cli("contract", "issue", "--repo", str(host_b), "--task", "t1", "--path", "t1/**")
    assert refused.returncode == 1
    assert b"incident 7" in refused.stderr
    resumed = cli("contract", "resume", "--repo", str(host_b))
    assert resumed.returncode == 0, resumed.stderr.decode()
    issued = cli("contract", "issue", "--repo", str(host_a), "--task", "t1", "--path", "t1/**")
    assert issued.returncode == 0, issued.stderr.decode()
    with Canonical(host_a) as canonical:
        canonical.refresh()
        claim = Claims(canonical).live("t1")
        assert claim.view.state == "live"
    assert len(git("log", "--format=%H", refnames.PAUSE, cwd=remote.canon).splitlines()) == 2


def test_issue_request_is_unchanged_by_a_resumed_pause(rollout: Rollout) -> None:
    """After pause and resume, an issue goes through the ordinary overlap check."""
    rollout.issue("billing", ["src/billing/**"])
    with rollout.open() as canonical:
        set_pause(canonical, "paused", "a", "rm")
        set_pause(canonical, "resumed", "b", "rm")
        with pytest.raises(ClaimConflictError, match="overlaps a live claim"):
            Claims(canonical).issue(IssueRequest(task_id="other", paths=("src/**",)))
