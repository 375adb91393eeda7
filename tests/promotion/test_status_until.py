"""`status --until promoted`: exit 0 only when the change is on the target, exit 1 when its
landing was ejected, exit 4 while it waits on the queue — not the ACCEPTED, exit 0, that
only says it landed on the queue."""

from __future__ import annotations

import json

from tests.promotion_world import PromotionWorld


def _status(world: PromotionWorld, sid: str, *args: str) -> tuple[int, dict[str, object]]:
    done = world.cli(
        "status", "--spool", str(world.spool.root), "--submission", sid, "--json", *args
    )
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else {}


def test_until_promoted_tells_the_target_from_the_queue(promotion: PromotionWorld) -> None:
    """With validation on: before a promoter ran, the plain status is ACCEPTED (exit 0) while
    --until promoted answers 4 (on the queue); after promotion the innocent landing answers
    0 and promoted, the culprit 1 with VALIDATION_FAILED and its landing ejected; an intake
    that cannot be reached is "not known yet" (4), no longer a refusal."""
    world = promotion
    world.set_policy(world.command() + "\nmax_batch = 2")
    good, bad = world.submit("t0"), world.submit("t1", broken=True)
    assert world.serve_once("--no-promote").proc.returncode == 0
    assert _status(world, bad)[0] == 0  # ACCEPTED: landed on the queue
    code, doc = _status(world, good, "--until", "promoted", "--wait", "0.5")
    assert code == 4 and doc == {}
    assert world.promote_once().proc.returncode == 0
    assert world.serve_once("--no-promote").proc.returncode == 0  # reflects the ejection
    code, doc = _status(world, good, "--until", "promoted")
    assert code == 0, doc
    assert doc["landing"]["state"] == "promoted"  # type: ignore[index]
    code, doc = _status(world, bad, "--until", "promoted")
    assert code == 1, doc
    verdict = doc["verdict"]
    assert isinstance(verdict, dict)
    assert "VALIDATION_FAILED" in {v["code"] for v in verdict["violations"]}
    landing = doc["landing"]
    assert isinstance(landing, dict) and landing["state"] == "ejected", landing
    assert landing["ejection"]["code"] == "VALIDATION_FAILED"
    unreachable = world.cli("status", "--intake", "git://127.0.0.1:9/x.git", "--submission", good,
                            "--task", "t0", "--until", "promoted")  # fmt: skip
    assert unreachable.returncode == 4, unreachable.stderr
