"""With `[validation]`, the promoter is what moves the target: a checkout of main kept in
step follows its promotions, and waits for it like it does for landings (issue #22, W 5)."""

from __future__ import annotations

from pathlib import Path

from integrator.documents.verdict import Decision
from tests.checkout_world import in_step, main_checkout
from tests.gitutil import git, run_integrator
from tests.promotion_world import policy_text

MAIN = "refs/heads/main"
QUEUE = "refs/integrator/queue/main"


def test_a_promotion_moves_a_kept_checkout_with_the_target(tmp_path: Path) -> None:
    """Landings move only the queue (the checkout stays on main, untouched); a promotion
    held by a local file in its way moves nothing (exit 4, naming it); once the file is
    gone the promotion moves main and the checkout with it."""
    canon = main_checkout(tmp_path, policy=policy_text('command = ["true"]'))
    before = git("rev-parse", MAIN, cwd=canon.path)
    contract = canon.issue("docs", ["docs/**"])
    candidate = canon.commit({"docs/index.md": "# landed\n", "docs/new.md": "new\n"})
    verdict = canon.integrate(contract, candidate)
    assert verdict.decision is Decision.ACCEPTED, verdict.violations
    assert git("rev-parse", MAIN, cwd=canon.path) == before
    assert in_step(canon.path)
    mine = canon.path / "docs" / "new.md"
    mine.write_text("mine\n")
    held = run_integrator("promote", "--repo", str(canon.path), "--once")
    assert held.returncode == 4, held.stdout + held.stderr
    assert str(canon.path) in held.stderr and "docs/new.md" in held.stderr
    assert git("rev-parse", MAIN, cwd=canon.path) == before
    assert mine.read_text() == "mine\n"
    mine.unlink()
    done = run_integrator("promote", "--repo", str(canon.path), "--once")
    assert done.returncode == 0, done.stdout + done.stderr
    assert git("rev-parse", MAIN, cwd=canon.path) == git("rev-parse", QUEUE, cwd=canon.path)
    assert in_step(canon.path)
    assert (canon.path / "docs" / "index.md").read_text() == "# landed\n"
    assert mine.read_text() == "new\n"
