"""Reverting a landing through the same gate: an explicit revert commit, a claim derived
from the landing's evidence, the gate's own merge — never a ref moved back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from integrator.cli import main
from integrator.documents.trailers import trailers
from integrator.paths import PathMatcher
from integrator.records.held import held_ref
from integrator.records.pause import set_pause
from integrator.rollout.revert import literal_glob
from tests.gitutil import git
from tests.rollout_world import Rollout, make_rollout


@pytest.fixture
def world(tmp_path: Path) -> Rollout:
    """A bad landing (observed: it also wrote an unowned migration) on a clean queue."""
    w = make_rollout(tmp_path)
    w.submit(
        "bad",
        "billing",
        ["src/billing/**"],
        {
            "src/billing/invoice.py": "invoice = None  # wrong\n",
            "db/migrations/0002.sql": "drop;\n",
        },
    )
    w.drain()
    return w


def _revert(
    world: Rollout, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = main(["revert", "--repo", str(world.repo), "--json", *args])
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return code, doc


def _tree(world: Rollout, rev: str) -> str:
    return git("rev-parse", f"{rev}^{{tree}}", cwd=world.repo)


def test_a_revert_lands_through_the_gate_and_restores_the_tree(
    world: Rollout, capsys: pytest.CaptureFixture[str]
) -> None:
    """With nothing landed since, the revert lands and main's tree is the tree before the
    change; main only moved forward; the revert commit names what it reverts; its claim
    owns exactly the landing's paths and resources and was consumed by the revert."""
    staging = world.staging("bad")
    main_before = git("rev-parse", "main", cwd=world.repo)
    code, doc = _revert(
        world, capsys, staging, "--reason", "invoice broke checkout", "--actor", "rm-alice"
    )
    assert code == 0, doc
    verdict = doc["verdict"]
    assert verdict["decision"] == "ACCEPTED" and verdict["violations"] == []
    assert _tree(world, "main") == _tree(world, f"{staging}^")
    assert git("merge-base", "--is-ancestor", main_before, "main", cwd=world.repo) == ""
    revert = doc["revertCommit"]
    assert git("rev-parse", f"{revert}^", cwd=world.repo) == staging
    found = trailers(git("log", "-1", "--format=%B", revert, cwd=world.repo))
    assert found["Integrator-Reverts"] == staging
    assert found["Integrator-Reverted-Task"] == "billing"
    assert found["Integrator-Reverted-Candidate"] == world.candidates["bad"]
    assert found["Integrator-Reverted-Attempt"].startswith("billing-")
    landed = trailers(git("log", "-1", "--format=%B", "main", cwd=world.repo))
    assert landed["Integrator-Candidate"] == revert
    assert landed["Integrator-Task"] == f"revert-{staging[:12]}"
    with world.open() as canonical:
        claim = canonical.claim(f"revert-{staging[:12]}")
        assert claim is not None and claim.view.state == "consumed"
        assert claim.contract.base_commit == staging
        assert list(claim.contract.paths) == ["/db/migrations/0002.sql", "/src/billing/invoice.py"]
        assert list(claim.contract.resources) == ["migration-slot:db/migrations/0002.sql"]


def test_later_landings_elsewhere_are_kept(
    world: Rollout, capsys: pytest.CaptureFixture[str]
) -> None:
    """A landing on other paths since: the gate's merge undoes the bad change and keeps it."""
    staging = world.staging("bad")
    world.submit("later", "auth", ["src/auth/**"], {"src/auth/login.py": "login = 2\n"})
    world.drain()
    code, _ = _revert(world, capsys, staging)
    assert code == 0
    for path in ("src/billing/invoice.py", "db/migrations/0002.sql"):
        before = git("ls-tree", f"{staging}^", "--", path, cwd=world.repo)
        assert git("ls-tree", "main", "--", path, cwd=world.repo) == before
    assert git("show", "main:src/auth/login.py", cwd=world.repo) == "login = 2"


def test_a_later_landing_on_the_same_lines_sends_the_revert_to_review(
    world: Rollout, capsys: pytest.CaptureFixture[str]
) -> None:
    """Handed to the daemon, the revert of a change a later landing edited conflicts in the
    gate's merge: held (refs/integrator/held/<id>), the queue untouched."""
    staging = world.staging("bad")
    world.submit(
        "fix", "billing-fix", ["src/billing/**"], {"src/billing/invoice.py": "invoice = 3\n"}
    )
    world.drain()
    queue = git("rev-parse", "refs/integrator/queue/main", cwd=world.repo)
    code, doc = _revert(world, capsys, staging, "--spool", str(world.spool.root))
    assert code == 0 and doc["submission"]
    world.drain()
    found = world.spool.find(doc["submission"])
    assert found is not None and found[0] == "fenced"
    held = json.loads((found[1] / "verdict.json").read_text())
    assert [v["code"] for v in held["violations"]] == ["MERGE_CONFLICT"]
    assert held["violations"][0]["path"] == "src/billing/invoice.py"
    assert git("rev-parse", held_ref(doc["submission"]), cwd=world.repo)
    assert git("rev-parse", "refs/integrator/queue/main", cwd=world.repo) == queue


def test_what_cannot_be_reverted_and_a_pause(
    world: Rollout, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not a staging commit: exit 2; while claims are paused the revert's claim is refused
    (exit 1, the reason named) and nothing lands."""
    assert main(["revert", "--repo", str(world.repo), "main~1"]) == 2
    assert "not a staging commit" in capsys.readouterr().err
    with world.open() as canonical:
        set_pause(canonical, "paused", "incident 9", "rm")
    head = git("rev-parse", "main", cwd=world.repo)
    assert main(["revert", "--repo", str(world.repo), world.staging("bad")]) == 1
    assert "incident 9" in capsys.readouterr().err
    assert git("rev-parse", "main", cwd=world.repo) == head


def test_literal_globs_name_exactly_one_path() -> None:
    """Wildcards in a path are escaped, so the revert's contract owns that path only."""
    assert literal_glob("a/b[1]*.txt") == "/a/b\\[1]\\*.txt"
    matcher = PathMatcher.of([literal_glob("a/b[1]*.txt"), literal_glob("README")])
    assert matcher.covers("a/b[1]*.txt") and matcher.covers("README")
    assert not matcher.covers("a/b1x.txt") and not matcher.covers("docs/README")


def test_revert_task_names_are_reserved(
    world: Rollout, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """An ordinary contract cannot take the task a revert will need (`revert-<staging>`):
    it would block the revert, or lend it its chain. The revert itself still lands."""
    staging = world.staging("bad")
    for task in (f"revert-{staging[:12]}", "revert-anything"):
        code = main(["contract", "issue", "--repo", str(world.repo), "--task", task,
                     "--path", "docs/**", "-o", str(tmp_path / "c.json")])  # fmt: skip
        assert code == 2
        assert "reserved for integrator revert" in capsys.readouterr().err
        assert git("for-each-ref", f"refs/integrator/claims/{task}", cwd=world.repo) == ""
    code, doc = _revert(world, capsys, staging, "--reason", "undo")
    assert code == 0 and doc["verdict"]["decision"] == "ACCEPTED", doc


def test_a_revert_that_does_not_land_releases_its_claim(
    world: Rollout, capsys: pytest.CaptureFixture[str]
) -> None:
    """A revert the gate refuses (a later landing edited the same lines) revokes its claim:
    the landing's paths are not blocked for the revert's whole lease, and once the conflict
    is gone the revert can be tried again."""
    staging = world.staging("bad")
    world.submit(
        "fix", "billing-fix", ["src/billing/**"], {"src/billing/invoice.py": "invoice = 3\n"}
    )
    world.drain()
    code, doc = _revert(world, capsys, staging)
    assert code != 0 and doc["verdict"]["decision"] != "ACCEPTED", doc
    claim = json.loads(git("show", f"refs/integrator/claims/{doc['taskId']}:claim.json",
                           cwd=world.repo))  # fmt: skip
    assert claim["state"] == "revoked", claim
    assert "the revert did not land" in claim["reason"]
    again, doc2 = _revert(world, capsys, staging)
    assert doc2["generation"] == doc["generation"] + 1, doc2  # tried again: not refused
    assert again == code  # the same conflict, decided again


def test_a_reverted_landing_is_not_reported_on_the_target(
    world: Rollout, capsys: pytest.CaptureFixture[str]
) -> None:
    """Once a revert of a landing lands, `status` of the reverted submission says where it
    is — reverted, naming the queue commit that undid it — and exits 1, not the 0 that
    would tell its agent the change is on main."""
    staging = world.staging("bad")
    sid = world.sids["bad"]
    capsys.readouterr()
    assert main(["status", "--spool", str(world.spool.root), "--submission", sid, "--json"]) == 0
    code, doc = _revert(world, capsys, staging)
    assert code == 0, doc
    status = main(["status", "--spool", str(world.spool.root), "--submission", sid, "--json"])
    shown = json.loads(capsys.readouterr().out)
    assert status == 1, shown
    assert shown["landing"]["state"] == "reverted"
    assert shown["landing"]["revertedBy"] == git("rev-parse", "main", cwd=world.repo)
