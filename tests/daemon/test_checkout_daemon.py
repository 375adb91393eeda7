"""`integrator serve` on a canonical repository whose work tree (or a linked worktree) has
main checked out and is kept in step (issue #22, W 5): real daemons, real git."""

from __future__ import annotations

import json
import signal
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from integrator.store.spool import Spool
from tests.checkout_world import in_step, linked_checkout, main_checkout, status
from tests.daemon_world import World, wait_until
from tests.gitutil import git

MAIN = "refs/heads/main"


@pytest.fixture
def worlds(tmp_path: Path) -> Iterator[list[World]]:
    """Worlds a test builds on its own repositories; their daemons are killed after it."""
    made: list[World] = []
    yield made
    for world in made:
        for proc in world.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _world(tmp_path: Path, repo: Path, made: list[World]) -> World:
    world = World(tmp_path, repo, Spool(tmp_path / "spool").ensure())
    made.append(world)
    return world


def test_a_kept_checkout_follows_every_landing(tmp_path: Path, worlds: list[World]) -> None:
    """Regression: each landing moved refs/heads/main under the main checkout, whose index
    and files stayed behind (`git status` showed the landings reverted and staged). Kept in
    step, after the daemon lands three candidates the checkout is main's, index and files;
    a local edit of a file no landing touches is carried over."""
    canon = main_checkout(tmp_path)
    (canon.path / "README.md").write_text("my notes\n")
    world = _world(tmp_path, canon.path, worlds)
    for task in ("a", "b", "c"):
        world.submit(task)
    served = world.once()
    assert served.proc.returncode == 0, served.text()
    assert len(world.landed()) == 3
    assert git("rev-parse", "HEAD", cwd=canon.path) == git("rev-parse", MAIN, cwd=canon.path)
    assert status(canon.path) == "M README.md"
    for task in ("a", "b", "c"):
        assert (canon.path / "work" / task / "f.txt").read_text() == f"{task}\n"
    git("checkout", "--", "README.md", cwd=canon.path)
    assert in_step(canon.path)


def test_a_linked_worktree_on_main_follows_every_landing(
    tmp_path: Path, worlds: list[World]
) -> None:
    """A bare canonical repository with a linked worktree on main, kept in step: the
    worktree follows the daemon's landings."""
    canon, worktree = linked_checkout(tmp_path)
    world = _world(tmp_path, canon.path, worlds)
    world.submit("a")
    world.submit("b")
    served = world.once()
    assert served.proc.returncode == 0, served.text()
    assert len(world.landed()) == 2
    assert in_step(worktree)
    assert (worktree / "work" / "b" / "f.txt").read_text() == "b\n"


def test_a_landing_in_the_way_of_a_local_file_waits_then_lands(
    tmp_path: Path, worlds: list[World]
) -> None:
    """An untracked file where a landing adds one holds the landing: nothing is decided or
    counted against the submission, the log and /readyz say why (the work tree, the file);
    once the file is gone the submission lands and the checkout is main's."""
    canon = main_checkout(tmp_path)
    world = _world(tmp_path, canon.path, worlds)
    sid = world.submit("a")
    mine = canon.path / "work" / "a" / "f.txt"
    mine.parent.mkdir(parents=True)
    mine.write_text("mine\n")
    before = git("rev-parse", MAIN, cwd=canon.path)
    config = world.config("[serve]\nmax-backoff = 1.0\n")
    served = world.serve("--http", "127.0.0.1:0", "--config", str(config))
    port = served.wait_event("http.listening")[0]["port"]
    retry = served.wait_event("daemon.retry_later")[0]
    assert retry["kind"] == "checkout"
    assert str(canon.path) in retry["error"] and "work/a/f.txt" in retry["error"]
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz")
    assert err.value.code == 503
    integration = json.loads(err.value.read())["checks"]["integration"]
    assert integration["ok"] is False and str(canon.path) in integration["detail"]
    assert git("rev-parse", MAIN, cwd=canon.path) == before
    assert world.spool.entries("work") == [sid] and not served.events("decision")
    assert not (world.spool.folder("work") / sid / "attempts.json").exists()
    assert mine.read_text() == "mine\n"
    mine.unlink()
    served.wait_event("decision", timeout=30)
    assert world.spool.entries("accepted") == [sid]
    assert in_step(canon.path)
    assert mine.read_text() == "a\n"
    wait_until(
        lambda: json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz").read())[
            "ready"
        ],
        what="ready again",
    )
    served.signal(signal.SIGTERM)
    assert served.wait() == 0


def test_serve_puts_back_a_checkout_a_crash_left_ahead(tmp_path: Path, worlds: list[World]) -> None:
    """A daemon killed with the checkout updated and main not yet moved: the next `serve`
    says at start that it put the work tree back, and lands the submission."""
    canon = main_checkout(tmp_path)
    world = _world(tmp_path, canon.path, worlds)
    sid = world.submit("a")
    killed = world.once(env={"INTEGRATOR_FAULT": "kill:after-checkout"})
    assert killed.proc.returncode == -signal.SIGKILL
    assert (canon.path / "work" / "a" / "f.txt").exists()  # ahead of main
    for lock in sorted((canon.path / ".git").rglob("*.lock")):
        lock.unlink()  # the operator's part: no integrator runs any more
    served = world.once()
    assert served.proc.returncode == 0, served.text()
    kept = served.events("checkout.kept")
    assert kept and "put" in kept[0]["note"] and "back" in kept[0]["note"]
    assert world.spool.entries("accepted") == [sid]
    assert in_step(canon.path)
