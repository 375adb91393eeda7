"""A canonical repository whose work tree has the target checked out (issue #22, W 5), through
real `integrator` processes: `init` and `serve` refuse it unless it is kept in step, and a
kept checkout follows `integrate`, waits for a conflicting local change, and survives a
crash between its update and the ref's commit."""

from __future__ import annotations

import datetime
import json
import os
import signal
from pathlib import Path

from tests.canon import Canon
from tests.checkout_world import in_step, linked_checkout, main_checkout, status
from tests.gitutil import git, run_integrator

MAIN = "refs/heads/main"


def _refs(path: Path) -> str:
    return git("for-each-ref", "--format=%(refname) %(objectname)", cwd=path)


def test_init_refuses_a_checkout_of_the_target(tmp_path: Path) -> None:
    """Regression: `init` prepared a repository whose work tree had main checked out, and
    every landing then left that work tree behind; it is refused (exit 2), naming the work
    tree and the ways out, and nothing is written."""
    path = main_checkout(tmp_path, keep=None).path
    before = _refs(path)
    done = run_integrator("init", "--repo", str(path))
    assert done.returncode == 2, done.stderr
    assert f"checked out in the work tree {path}" in done.stderr
    assert "switch --detach" in done.stderr and "--update-checkout" in done.stderr
    assert _refs(path) == before
    assert "integrator." not in git("config", "--list", "--local", cwd=path)


def test_init_refuses_a_linked_worktree_on_the_target(tmp_path: Path) -> None:
    """A bare repository is no exception when one of its linked worktrees has main checked
    out: that worktree is named."""
    canon, worktree = linked_checkout(tmp_path, keep=None)
    done = run_integrator("init", "--repo", str(canon.path))
    assert done.returncode == 2, done.stderr
    assert f"checked out in the work tree {worktree}" in done.stderr


def test_init_takes_a_checkout_moved_off_the_target(tmp_path: Path) -> None:
    """The first way out: a work tree on another branch (or detached) is no checkout of the
    target, and `init` prepares the repository."""
    path = main_checkout(tmp_path, keep=None).path
    git("switch", "-q", "--detach", cwd=path)
    done = run_integrator("init", "--repo", str(path), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["updateCheckout"] is False


def test_init_update_checkout_records_the_choice(tmp_path: Path) -> None:
    """The second way out: `--update-checkout` records integrator.updateCheckout and names the
    work tree it keeps in step; a later `init` without it changes nothing."""
    path = main_checkout(tmp_path, keep=None).path
    done = run_integrator("init", "--repo", str(path), "--update-checkout", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["updateCheckout"] is True
    assert f"keeps {path} in step with main" in doc["actions"]
    assert git("config", "integrator.updateCheckout", cwd=path) == "true"
    again = run_integrator("init", "--repo", str(path))
    assert again.returncode == 0, again.stderr
    assert "nothing to do" in again.stdout


def test_update_checkout_is_not_for_a_mirror(tmp_path: Path) -> None:
    """A mirror is only a cache: `--update-checkout` with `--remote` is a usage error."""
    done = run_integrator(
        "init", "--repo", str(tmp_path / "m.git"), "--remote", "git://127.0.0.1:9/x",
        "--update-checkout",
    )  # fmt: skip
    assert done.returncode == 2
    assert "not a mirror" in done.stderr
    assert not (tmp_path / "m.git").exists()


def test_a_server_here_that_refuses_pushes_to_its_checkout_is_refused(tmp_path: Path) -> None:
    """Remote mode: a server on this host whose work tree has main checked out would refuse
    every landing's push (git's receive.denyCurrentBranch), so `init --remote` says so;
    with updateInstead, git keeps that checkout in step itself, and init goes through. A
    mirror is only a cache: `serve` refuses one whose linked worktree has main checked out."""
    server = main_checkout(tmp_path, keep=None, name="server").path
    mirror = tmp_path / "m.git"
    done = run_integrator("init", "--repo", str(mirror), "--remote", str(server))
    assert done.returncode == 2, done.stderr
    assert "receive.denyCurrentBranch updateInstead" in done.stderr
    git("config", "receive.denyCurrentBranch", "updateInstead", cwd=server)
    done = run_integrator("init", "--repo", str(mirror), "--remote", str(server))
    assert done.returncode == 0, done.stderr
    git("worktree", "add", "-q", str(tmp_path / "mw"), "main", cwd=mirror)
    spool = tmp_path / "spool"
    done = run_integrator("serve", "--repo", str(mirror), "--spool", str(spool), "--once")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "only a cache" in done.stderr and str(tmp_path / "mw") in done.stderr


def test_serve_refuses_a_checkout_made_after_init(tmp_path: Path) -> None:
    """Regression: main checked out after `init` (in the main work tree) went unnoticed by
    `serve`; it refuses to start (exit 2), naming the work tree."""
    path = main_checkout(tmp_path, keep=None).path
    git("switch", "-q", "--detach", cwd=path)
    assert run_integrator("init", "--repo", str(path)).returncode == 0
    git("switch", "-q", "main", cwd=path)
    spool = tmp_path / "spool"
    done = run_integrator("serve", "--repo", str(path), "--spool", str(spool), "--once")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"checked out in the work tree {path}" in done.stderr


def _candidate(tmp_path: Path, canon: Canon, text: str) -> tuple[Path, str]:
    canon.clock.now = canon.clock.now.replace(year=2030)  # the CLI reads the real clock
    contract = canon.issue("docs", ["docs/**"], lease=datetime.timedelta(days=3650))
    path = tmp_path / "docs.json"
    path.write_text(contract.to_json())
    return path, canon.commit({"docs/index.md": text, "docs/new.md": "new\n"})


def _integrate(
    canon: Canon, contract: Path, candidate: str, fault: str | None = None
) -> tuple[int, str]:
    env = {"INTEGRATOR_FAULT": fault} if fault else {}
    done = run_integrator(
        "integrate", "--repo", str(canon.path), "--contract", str(contract), "--candidate",
        candidate, env=env,
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr


def test_a_kept_checkout_follows_integrate_and_waits_for_a_conflicting_change(
    tmp_path: Path,
) -> None:
    """A local edit of a file the landing changes holds the landing (exit 4, naming the work
    tree and the file; no ref moved, the edit kept); once it is gone the candidate lands and
    the work tree is main's, index and files."""
    canon = main_checkout(tmp_path)
    contract, candidate = _candidate(tmp_path, canon, "# landed\n")
    (canon.path / "docs" / "index.md").write_text("# mine\n")
    before = _refs(canon.path)
    code, out = _integrate(canon, contract, candidate)
    assert code == 4, out
    assert str(canon.path) in out and "docs/index.md" in out
    assert _refs(canon.path) == before
    assert (canon.path / "docs" / "index.md").read_text() == "# mine\n"
    git("checkout", "--", "docs/index.md", cwd=canon.path)
    code, out = _integrate(canon, contract, candidate)
    assert code == 0, out
    assert in_step(canon.path)
    assert (canon.path / "docs" / "index.md").read_text() == "# landed\n"
    assert (canon.path / "docs" / "new.md").read_text() == "new\n"


def test_a_crash_between_the_checkout_and_the_ref_is_repaired(tmp_path: Path) -> None:
    """Killed with the work tree updated and the ref not yet committed: the next run puts the
    work tree back on main (before it meets the lock files the crash left), and once the
    operator removes those, the candidate lands with the work tree in step."""
    canon = main_checkout(tmp_path)
    contract, candidate = _candidate(tmp_path, canon, "# landed\n")
    old = git("rev-parse", MAIN, cwd=canon.path)
    code, _ = _integrate(canon, contract, candidate, fault="kill:after-checkout")
    assert code == -signal.SIGKILL
    assert git("rev-parse", MAIN, cwd=canon.path) == old
    assert (canon.path / "docs" / "index.md").read_text() == "# landed\n"
    assert status(canon.path) != ""  # the work tree ran ahead of its HEAD
    assert (canon.path / ".git" / "integrator-checkout").exists()
    locks = sorted((canon.path / ".git").rglob("*.lock"))
    assert locks
    code, out = _integrate(canon, contract, candidate)
    assert code == 4 and "is locked" in out, out
    assert in_step(canon.path) and git("rev-parse", MAIN, cwd=canon.path) == old
    assert not (canon.path / ".git" / "integrator-checkout").exists()
    for lock in locks:
        os.unlink(lock)
    code, out = _integrate(canon, contract, candidate)
    assert code == 0, out
    assert in_step(canon.path)
    assert (canon.path / "docs" / "index.md").read_text() == "# landed\n"
