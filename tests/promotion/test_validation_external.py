"""External CI: `integrator validation request` says what to test, `validation report`
records a result from any CI system, and the promoter acts on it — a pass promotes, a fail
is bisected through further requests until the culprit is ejected; a request nobody
answers lapses after the timeout."""

from __future__ import annotations

import json
import time
from typing import Any

from tests.gitutil import git
from tests.promotion_world import MARKER, PromotionWorld, runs_bound


def _request(world: PromotionWorld) -> list[dict[str, Any]]:
    done = world.cli("validation", "request", "--repo", str(world.repo), "--json")
    assert done.returncode == 0, done.stderr.decode()
    found: list[dict[str, Any]] = json.loads(done.stdout)
    return found


def _report(world: PromotionWorld, head: str, status: str, *extra: str) -> dict[str, Any]:
    done = world.cli(
        "validation", "report", "--repo", str(world.repo), "--head", head, "--status", status,
        "--json", *extra,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_request_then_a_passing_report_promotes(promotion: PromotionWorld) -> None:
    """The request names the head, its tree and the four landings it covers; a pass
    reported with a log URL is recorded as the final result and the promoter promotes it."""
    world = promotion
    world.set_policy('mode = "external"\ntimeout = 600\nmax_batch = 4')
    for i in range(4):
        world.submit(f"t{i}")
    assert world.serve_once().proc.returncode == 0
    (request,) = _request(world)
    queue = git("rev-parse", "refs/integrator/queue/main", cwd=world.repo)
    assert request["head"] == request["stagingCommit"] == queue
    assert request["tree"] == git("rev-parse", f"{queue}^{{tree}}", cwd=world.repo)
    assert [c["candidate"] for c in request["landings"]] == [world.heads[f"t{i}"] for i in range(4)]
    assert request["status"] == "requested"
    assert _request(world) == [request]  # asking again records nothing new

    result = _report(world, queue, "pass", "--log", "https://ci.example.invalid/run/1")
    assert result["final"] is True and result["logUrl"] == "https://ci.example.invalid/run/1"
    assert git("rev-parse", "main", cwd=world.repo) != queue  # the report alone moves nothing
    promoted = world.promote_once()
    assert promoted.proc.returncode == 0, promoted.text()
    assert git("rev-parse", "main", cwd=world.repo) == queue
    assert _request(world) == []
    again = world.cli(
        "validation", "report", "--repo", str(world.repo), "--head", queue, "--status", "fail"
    )
    assert again.returncode == 2  # promoted already: nothing to report


def test_a_failing_report_is_bisected_through_further_requests(promotion: PromotionWorld) -> None:
    """CI answers every request by looking for the marker in the requested tree; after a
    fail the promoter asks for bisection heads, ejects the culprit and promotes the rest."""
    world = promotion
    world.set_policy('mode = "external"\ntimeout = 600\nmax_batch = 6')
    for i in range(6):
        world.submit(f"t{i}", broken=i == 4)
    assert world.serve_once().proc.returncode == 0
    answered = 0
    for _ in range(12):
        requests = _request(world)
        for request in requests:
            names = git("ls-tree", "-r", "--name-only", request["tree"], cwd=world.repo)
            broken = any(p.endswith(f"/{MARKER}") for p in names.splitlines())
            _report(world, request["head"], "fail" if broken else "pass")
            answered += 1
        assert world.promote_once().proc.returncode == 0
        if not requests:
            break
    assert answered <= runs_bound(6)
    others = sorted(h for t, h in world.heads.items() if t != "t4")
    assert sorted(world.chain("refs/heads/main")) == others
    reflected = world.serve_once()
    assert reflected.proc.returncode == 0
    assert world.spool.entries("fenced") == [world.sids["t4"]]


def test_a_request_nobody_answers_lapses_and_fails(promotion: PromotionWorld) -> None:
    """With no report within `timeout`, the promoter records the head failed ("no report
    within the timeout") and, with one landing, ejects it."""
    world = promotion
    world.set_policy('mode = "external"\ntimeout = 2')
    world.submit("t0")
    assert world.serve_once("--no-promote").proc.returncode == 0
    (request,) = _request(world)
    time.sleep(2.5)
    assert world.promote_once().proc.returncode == 0
    ejected = git("for-each-ref", "--format=%(refname)", "refs/integrator/ejected/", cwd=world.repo)
    assert len(ejected.splitlines()) == 1
    log = git("log", "--format=%s", f"{ejected}", cwd=world.repo)
    assert "eject t0 (VALIDATION_FAILED)" in log
    record = git("show", f"{ejected}:ejection.json", cwd=world.repo)
    assert "no report within the timeout" in record
    assert request["head"] not in world.chain("refs/integrator/queue/main")


def test_reports_are_refused_where_the_promoter_runs_the_command(
    promotion: PromotionWorld,
) -> None:
    """In command mode a report would be a result the command never produced (over a run
    in progress, even): refused, nothing recorded; bad details are refused in any mode."""
    world = promotion
    world.set_policy(world.command())
    world.submit("t0")
    assert world.serve_once("--no-promote").proc.returncode == 0
    head = git("rev-parse", "refs/integrator/queue/main", cwd=world.repo)
    done = world.cli(
        "validation", "report", "--repo", str(world.repo), "--head", head, "--status", "pass"
    )
    assert done.returncode == 2 and b"command" in done.stderr
    assert git("for-each-ref", "refs/integrator/validations/", cwd=world.repo) == ""
    world.set_policy('mode = "external"\ntimeout = 600')
    details = world.tmp / "details.json"
    details.write_text("not json")
    done = world.cli(
        "validation", "report", "--repo", str(world.repo), "--head", head, "--status", "pass",
        "--details", str(details),
    )  # fmt: skip
    assert done.returncode == 2 and b"JSON" in done.stderr
