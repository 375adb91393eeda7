"""Promotion with real repositories and real commands: `integrator serve --once` drains a
batch into the queue, validates it with a shell script in the repository, bisects a
failing batch, ejects the culprit and promotes the rest; every move of the target is
checked against what the script itself saw."""

from __future__ import annotations

import json
import math

import pytest

from integrator.documents.policy import parse_policy
from integrator.errors import ConfigurationError
from integrator.records.canonical import Canonical
from integrator.records.validations import promotions
from tests.gitutil import git
from tests.promotion_world import MARKER, TASKS, PromotionWorld, runs_bound

CULPRIT = 7  # t7 carries the marker


def _land_twelve(world: PromotionWorld, *, broken: int | None = CULPRIT) -> None:
    for i in range(TASKS):
        world.submit(f"t{i}", broken=i == broken)


def test_a_failing_landing_is_bisected_ejected_and_the_rest_promoted(
    promotion: PromotionWorld,
) -> None:
    """12 candidates in one drain, one of which makes the script fail: the target ends with
    the other 11, never at a tree holding the culprit (every reflog entry checked against
    the script's own log), the culprit is FENCED VALIDATION_FAILED with its log and held
    for review, and the runs are within ⌈log2 12⌉ + 2."""
    world = promotion
    world.set_policy(world.command() + f"\nmax_batch = {TASKS}")
    _land_twelve(world)
    served = world.serve_once()
    assert served.proc.returncode == 0, served.text()
    assert len(world.spool.entries("accepted")) == TASKS - 1  # one decision each, then held
    culprit = world.heads[f"t{CULPRIT}"]
    on_target = world.chain("refs/heads/main")
    assert sorted(on_target) == sorted(h for t, h in world.heads.items() if t != f"t{CULPRIT}")
    assert git("rev-parse", "main", cwd=world.repo) == git(
        "rev-parse", "refs/integrator/queue/main", cwd=world.repo
    )
    world.check_target_moves()
    runs = world.runs()
    assert len(runs) <= runs_bound(TASKS) == math.ceil(math.log2(12)) + 2
    assert len(served.events("validation.run")) == len(runs)
    assert [r for _, r in runs].count("fail") >= 2  # the batch head, then the culprit's head

    sid = world.sids[f"t{CULPRIT}"]
    assert world.spool.entries("fenced") == [sid]
    verdict = world.verdict("fenced", sid)
    assert verdict.decision.value == "FENCED"
    assert [v.code.value for v in verdict.violations] == ["VALIDATION_FAILED"]
    assert "marker" in verdict.violations[0].detail  # the script's own output
    ownership = json.loads((world.spool.folder("fenced") / sid / "ownership.json").read_text())
    assert ownership["decision"] == "ACCEPTED" and not ownership.get("violations")
    held = git("show", f"refs/integrator/held/{sid}:verdict.json", cwd=world.repo)
    assert "VALIDATION_FAILED" in held
    claim = json.loads(git("show", f"refs/integrator/claims/t{CULPRIT}:claim.json", cwd=world.repo))
    assert claim["state"] == "consumed"  # the attempt is spent
    landing = claim["stagingCommit"]
    evidence = git("show", f"refs/integrator/ejected/main/{landing}:log.txt", cwd=world.repo)
    assert f"{MARKER} is present" in evidence
    assert culprit not in on_target


def test_history_keeps_the_ownership_verdict_beside_the_ejection(
    promotion: PromotionWorld,
) -> None:
    """`integrator history` shows the culprit's fence decision ACCEPTED and, as a record of
    its own, the ejection FENCED VALIDATION_FAILED, plus the promotions and validations."""
    world = promotion
    world.set_policy(world.command() + f"\nmax_batch = {TASKS}")
    _land_twelve(world)
    assert world.serve_once().proc.returncode == 0
    done = world.cli("history", "--spool", str(world.spool.root), "--json")
    assert done.returncode == 0, done.stderr.decode()
    records = json.loads(done.stdout)
    sid = world.sids[f"t{CULPRIT}"]
    mine = [r for r in records if r["submission"] == sid]
    assert [(r["kind"], r.get("action"), r["decision"]) for r in mine] == [
        ("decision", None, "ACCEPTED"),
        ("review", "eject", "FENCED"),
    ]
    assert mine[0]["codes"] == [] and mine[1]["codes"] == ["VALIDATION_FAILED"]
    kinds = {(r["kind"], r.get("action")) for r in records}
    assert ("promotion", "promote") in kinds and ("promotion", "rebuild") in kinds
    validations = [r for r in records if r["kind"] == "validation"]
    assert {r["decision"] for r in validations} == {"PASS", "FAIL"}


def test_a_flaky_command_with_a_retry_ejects_nothing(promotion: PromotionWorld) -> None:
    """A command that fails once and then passes, with `retries = 1`: all 12 are promoted in
    one batch after two recorded attempts, nothing is ejected."""
    world = promotion
    counter = world.tmp / "flaky-count"
    world.set_policy(
        world.command("ci/flaky.sh", str(counter)) + f"\nmax_batch = {TASKS}\nretries = 1"
    )
    _land_twelve(world, broken=None)
    served = world.serve_once()
    assert served.proc.returncode == 0, served.text()
    assert sorted(world.chain("refs/heads/main")) == sorted(world.heads.values())
    assert [r for _, r in world.runs()] == ["fail", "pass"]
    assert world.spool.entries("fenced") == []
    with Canonical(world.repo) as canonical:
        (_, record), *_ = promotions(canonical, "main")
        assert record.action == "promote" and len(record.landings) == TASKS
        chain = git("log", "--format=%s", record.validations[0], cwd=world.repo).splitlines()
    assert chain == [
        f"validation {record.after[:12]}: pass (final), attempt 2",
        f"validation {record.after[:12]}: fail, attempt 1",
        f"validation {record.after[:12]}: running",
    ]
    world.check_target_moves()


def test_landings_move_only_the_queue_once_validation_is_configured(
    promotion: PromotionWorld,
) -> None:
    """With [validation] the landing transaction leaves the target where it is: only a
    promoter moves it (serve --no-promote lands, the target stays at the base)."""
    world = promotion
    world.set_policy(world.command())
    base = git("rev-parse", "main", cwd=world.repo)
    world.submit("t0")
    served = world.serve_once("--no-promote")
    assert served.proc.returncode == 0, served.text()
    assert git("rev-parse", "main", cwd=world.repo) == base
    assert world.chain("refs/integrator/queue/main") == [world.heads["t0"]]
    assert world.runs() == []


def test_target_follows_queue_true_beside_validation_is_refused() -> None:
    """An explicit `target_follows_queue = true` with [validation] is a configuration error
    that says why; without the line it defaults to false."""
    text = (
        "version = 1\n[integration]\ntarget_follows_queue = true\n[validation]\ncommand = 'true'\n"
    )
    with pytest.raises(ConfigurationError, match="contradicts \\[validation\\]"):
        parse_policy(text)
    assert not parse_policy(
        "version = 1\n[validation]\ncommand = 'true'\n"
    ).integration.target_follows_queue
    assert parse_policy("version = 1\n").integration.target_follows_queue
    with pytest.raises(ConfigurationError, match="needs a command"):
        parse_policy("version = 1\n[validation]\nmode = 'command'\n")


def test_a_timeout_fails_the_head_and_kills_the_command(promotion: PromotionWorld) -> None:
    """A command past `timeout` is killed with its process group and its head fails; with
    one landing that landing is ejected, and the record says it timed out."""
    world = promotion
    world.set_policy('command = "sleep 30"\ntimeout = 0.5')
    world.submit("t0")
    served = world.serve_once()
    assert served.proc.returncode == 0, served.text()
    assert world.spool.entries("fenced") == [world.sids["t0"]]
    detail = world.verdict("fenced", world.sids["t0"]).violations[0].detail
    assert "timed out" in detail
    assert git("rev-parse", "main", cwd=world.repo) == world.target_moves()[0]
