"""After an ejection: the release manager requeues the candidate under a new attempt, the
rebuilt landings are followed by `integrator status`, and a long-running `integrator
serve` promotes in its own thread while /metrics counts validations, ejections, batches,
bisection depth and time in queue."""

from __future__ import annotations

import json
import signal
import urllib.request

from tests.daemon_world import wait_until
from tests.gitutil import git
from tests.promotion_world import PromotionWorld


def _eject_t1(world: PromotionWorld) -> None:
    world.set_policy(world.command() + "\nmax_batch = 4")
    for i in range(4):
        world.submit(f"t{i}", broken=i == 1)
    served = world.serve_once()
    assert served.proc.returncode == 0, served.text()
    assert world.spool.entries("fenced") == [world.sids["t1"]]


def test_an_ejected_candidate_is_requeued_under_a_new_attempt(promotion: PromotionWorld) -> None:
    """`review requeue` reclaims the task (generation 2, a new attempt, the candidate's own
    base), submits the same candidate under it and archives the held record; once the
    suite is fixed (lenient) it lands, passes and is promoted."""
    world = promotion
    _eject_t1(world)
    sid = world.sids["t1"]
    world.lenient.write_text("the suite no longer cares\n")
    done = world.cli(
        "review", "requeue", sid, "--spool", str(world.spool.root), "--reason", "suite fixed",
        "--actor", "rm@example", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    answer = json.loads(done.stdout)
    contract = answer["contract"]
    assert contract["ownershipGeneration"] == 2 and contract["taskId"] == "t1"
    assert world.spool.entries("new") == [answer["requeuedAs"]]
    assert world.spool.entries("archived") == [sid] and world.spool.entries("fenced") == []
    again = world.cli("review", "requeue", sid, "--spool", str(world.spool.root), "--reason", "x")
    assert again.returncode == 2  # archived: nothing held to requeue
    served = world.serve_once()
    assert served.proc.returncode == 0, served.text()
    assert world.verdict("accepted", answer["requeuedAs"]).decision.value == "ACCEPTED"
    assert world.heads["t1"] in world.chain("refs/heads/main")
    assert git("show", "main:t1/f.txt", cwd=world.repo) == "t1 changed"
    log = git("log", "--format=%s", f"refs/integrator/archived/{sid}", cwd=world.repo)
    assert log.splitlines()[0].startswith(f"requeue {sid}")
    # The promotion that took the requeued candidate counts its ejection as innocent
    # (integrator_innocent_ejections), and only that one.
    from integrator.promotion.promoter import Promoter
    from integrator.records.canonical import Canonical
    from integrator.records.validations import promotions

    with Canonical(world.repo) as canonical:
        promoter = Promoter(canonical)
        (_, last), *_ = promotions(canonical, "main")
        assert [c.candidate for c in last.landings] == [world.heads["t1"]]
        assert promoter._innocent("main", last.landings) == 1
        others = [c for _, r in promotions(canonical, "main")[1:] for c in r.landings]
        assert others and promoter._innocent("main", others) == 0


def test_status_follows_a_rebuilt_landing_and_reports_the_ejected_one(
    promotion: PromotionWorld,
) -> None:
    """The landing after the culprit was re-merged under a new staging commit: `status`
    names where it is now (promoted, rebuilt, the name its claim knows); the culprit's
    status is FENCED VALIDATION_FAILED (exit 1)."""
    world = promotion
    _eject_t1(world)
    done = world.cli(
        "status", "--spool", str(world.spool.root), "--submission", world.sids["t2"], "--json"
    )
    assert done.returncode == 0, done.stderr.decode()
    doc = json.loads(done.stdout)
    landing = doc["landing"]
    assert landing["state"] == "promoted"
    assert landing["landing"] == doc["verdict"]["stagingCommit"] != landing["stagingCommit"]
    message = git("log", "-1", "--format=%B", landing["stagingCommit"], cwd=world.repo)
    assert f"Integrator-Landing: {landing['landing']}" in message
    assert "Integrator-Replaces: " in message
    text = world.cli("status", "--spool", str(world.spool.root), "--submission", world.sids["t2"])
    assert "landing: promoted as" in text.stdout.decode() and "rebuilt" in text.stdout.decode()
    culprit = world.cli(
        "status", "--spool", str(world.spool.root), "--submission", world.sids["t1"]
    )
    assert culprit.returncode == 1
    assert "FENCED (VALIDATION_FAILED)" in culprit.stdout.decode()


def test_deciding_again_follows_the_rebuild_and_reports_the_ejection(
    promotion: PromotionWorld,
) -> None:
    """Recovery (the same submission decided again, as after a crash): the rebuilt landing
    is ACCEPTED, recovered, under its new staging commit; the ejected one is FENCED
    VALIDATION_FAILED, recovered — never landed twice, never an ownership violation."""
    world = promotion
    _eject_t1(world)
    answers = {}
    for task in ("t1", "t2"):
        contract = world.tmp / f"{task}.json"
        contract.write_text(json.dumps(world.contracts[task]))
        done = world.cli(
            "integrate", "--repo", str(world.repo), "--contract", str(contract),
            "--candidate", world.heads[task], "--json",
        )  # fmt: skip
        answers[task] = (done.returncode, json.loads(done.stdout))
    code, ejected = answers["t1"]
    assert code == 1 and ejected["recovered"] is True
    assert [v["code"] for v in ejected["violations"]] == ["VALIDATION_FAILED"]
    code, rebuilt = answers["t2"]
    assert code == 0 and rebuilt["recovered"] is True and rebuilt["decision"] == "ACCEPTED"
    assert rebuilt["stagingCommit"] != world.verdict("accepted", world.sids["t2"]).staging_commit
    assert (
        rebuilt["stagingCommit"]
        in git("rev-list", "--first-parent", "main", cwd=world.repo).split()
    )
    assert world.chain("refs/integrator/queue/main").count(world.heads["t2"]) == 1


def test_serve_promotes_in_its_own_thread_and_counts_it_in_metrics(
    promotion: PromotionWorld,
) -> None:
    """A long-running `serve --http`: its promoter thread bisects, ejects and promotes; the
    daemon holds the culprit; /metrics shows runs, results, the ejection by code, batch
    sizes, bisection depth, promoted head age and both stages of time in queue."""
    world = promotion
    world.set_policy(world.command() + "\nmax_batch = 4")
    for i in range(4):
        world.submit(f"t{i}", broken=i == 2)
    served = world.run(
        "serve", "--repo", str(world.repo), "--spool", str(world.spool.root), "--poll", "0.2",
        "--http", "127.0.0.1:0", "--log-format", "json", name="serve",
    )  # fmt: skip
    port = wait_until(lambda: served.events("http.listening"), 60, "the http server")[0]["port"]
    wait_until(lambda: world.spool.entries("fenced") == [world.sids["t2"]], 120, "the hold")
    wait_until(
        lambda: (
            git("rev-parse", "main", cwd=world.repo)
            == git("rev-parse", "refs/integrator/queue/main", cwd=world.repo)
        ),
        120,
        "the promotion of the rest",
    )
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    served.proc.send_signal(signal.SIGTERM)
    assert served.proc.wait(60) == 0
    metrics = {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }
    assert metrics["integrator_validation_runs_total"] == len(world.runs())
    assert metrics['integrator_validation_attempts_total{result="fail"}'] >= 2
    assert metrics['integrator_ejections_total{code="VALIDATION_FAILED"}'] == 1
    assert metrics["integrator_promotions_total"] >= 1
    assert metrics["integrator_bisection_depth_count"] == 1
    assert metrics["integrator_promotion_batch_size_sum"] == 3
    assert metrics['integrator_time_in_queue_seconds_count{stage="submit"}'] == 4
    assert metrics['integrator_time_in_queue_seconds_count{stage="promote"}'] == 3
    assert metrics["integrator_unpromoted_landings"] == 0
    assert "integrator_promoted_head_age_seconds" in metrics
    world.check_target_moves()
