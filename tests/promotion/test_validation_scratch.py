"""Validation checkouts a dead promoter left behind are removed; nobody else's are touched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from integrator.promotion import scratch
from tests.promotion_world import PromotionWorld


def _folder(root: Path, name: str) -> Path:
    folder = root / f"{scratch.PREFIX}{name}"
    (folder / "checkout").mkdir(parents=True)
    (folder / "checkout" / "big.txt").write_text("x\n")
    return folder


def _owned_by_a_process_that_ended(folder: Path) -> None:
    """The owner line a real process wrote for itself, then exited."""
    code = (
        "import pathlib, sys; from integrator.promotion import scratch; "
        "scratch.mark(pathlib.Path(sys.argv[1]))"
    )
    subprocess.run([sys.executable, "-c", code, str(folder)], check=True)


def test_only_folders_of_gone_owners_are_abandoned(tmp_path: Path) -> None:
    dead = _folder(tmp_path, "dead")
    _owned_by_a_process_that_ended(dead)
    mine = _folder(tmp_path, "mine")
    scratch.mark(mine)  # this process runs
    reused = _folder(tmp_path, "reused")  # our pid, another start time: a reused pid
    boot, pid, _ = scratch.owner_line().split()
    (reused / scratch.OWNER_FILE).write_text(f"{boot} {pid} 1\n")
    rebooted = _folder(tmp_path, "rebooted")
    (rebooted / scratch.OWNER_FILE).write_text(f"another-boot {pid} 1\n")
    young = _folder(tmp_path, "young")  # no owner yet: a run that is starting
    old = _folder(tmp_path, "old")
    os.utime(old, (time.time() - 2 * scratch.UNOWNED_AGE_S,) * 2)
    # Never followed, never someone else's, never another name.
    target = _folder(tmp_path, "target-outside")
    _owned_by_a_process_that_ended(target)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep\n")
    (tmp_path / f"{scratch.PREFIX}link").symlink_to(outside)
    linked = _folder(tmp_path, "linked-owner")
    dead_line = tmp_path / "dead-line"
    dead_line.write_text("another-boot 1 1\n")
    (linked / scratch.OWNER_FILE).symlink_to(dead_line)
    theirs = _folder(tmp_path, "theirs")
    _owned_by_a_process_that_ended(theirs)
    if os.getuid() == 0:
        os.chown(theirs, 65534, 65534)  # another user's folder
    unrelated = tmp_path / "other-tool-dead"
    unrelated.mkdir()

    found = {p.name.removeprefix(scratch.PREFIX) for p in scratch.abandoned(tmp_path)}
    expected = {"dead", "reused", "rebooted", "old", "target-outside"}
    if os.getuid() != 0:
        expected.add("theirs")  # not ours to chown away: it is ours, and its owner is gone
    assert found == expected
    removed = scratch.sweep(tmp_path)
    assert {p.name.removeprefix(scratch.PREFIX) for p in removed} == expected
    assert not dead.exists() and mine.exists() and young.exists() and linked.exists()
    assert (outside / "keep.txt").read_text() == "keep\n"
    assert unrelated.exists()


def test_read_only_parts_of_an_abandoned_checkout_are_removed(tmp_path: Path) -> None:
    """A validation command may make its checkout read-only; the sweep still removes it."""
    dead = _folder(tmp_path, "ro")
    _owned_by_a_process_that_ended(dead)
    (dead / "checkout").chmod(0o500)
    (dead / "checkout" / "big.txt").chmod(0o400)
    assert scratch.sweep(tmp_path) == [dead]
    assert not dead.exists()


def test_a_killed_promoters_checkout_is_removed_by_the_next(promotion: PromotionWorld) -> None:
    """A real `integrator promote` killed while its command runs leaves its checkout; the
    next promoter on the host removes it and says so."""
    world = promotion
    tmp = world.tmp / "scratch"
    tmp.mkdir()
    started = world.tmp / "started"
    world.set_policy(f'command = ["sh", "-c", "echo $$ > {started}; exec sleep 60"]\ntimeout = 300')
    world.submit("t0")
    assert world.serve_once("--no-promote").proc.returncode == 0
    env = {"TMPDIR": str(tmp)}
    promoter = world.run("promote", "--repo", str(world.repo), "--once", "--log-format",
                         "json", env=env, name="promote")  # fmt: skip
    for _ in range(600):  # until the command runs (or the promoter ended early)
        if (started.exists() and started.read_text().strip()) or promoter.proc.poll() is not None:
            break
        time.sleep(0.1)
    assert promoter.proc.poll() is None, promoter.text()
    promoter.proc.send_signal(signal.SIGKILL)
    promoter.proc.wait()
    command_pid = int(started.read_text())
    os.kill(command_pid, signal.SIGKILL)  # its own session: the kill did not reach it
    [left] = list(tmp.glob(f"{scratch.PREFIX}*"))
    assert (left / "checkout").is_dir() and (left / scratch.OWNER_FILE).is_file()

    world.set_policy('command = ["true"]')
    again = world.promote_once(env=env)
    assert again.proc.returncode == 0, again.text()
    assert list(tmp.glob(f"{scratch.PREFIX}*")) == []
    swept = again.events("promote.swept")
    assert swept and swept[0]["folders"] == 1


def test_removing_a_checkout_never_changes_what_a_link_in_it_names(tmp_path: Path) -> None:
    """A read-only folder holding a link to a file outside: the folder goes, the file's
    mode stays (chmod would have followed the link)."""
    outside = tmp_path / "outside.txt"
    outside.write_text("keep\n")
    outside.chmod(0o600)
    dead = _folder(tmp_path, "linked")
    _owned_by_a_process_that_ended(dead)
    (dead / "checkout" / "link").symlink_to(outside)
    (dead / "checkout").chmod(0o500)
    # What removal does where a file cannot be unlinked (root never gets there: check it
    # directly), then the sweep.
    scratch.make_writable(str(dead / "checkout" / "link"))
    assert (outside.stat().st_mode & 0o777) == 0o600
    assert ((dead / "checkout").stat().st_mode & 0o777) == 0o700
    assert scratch.sweep(tmp_path) == [dead]
    assert not dead.exists()
    assert outside.read_text() == "keep\n" and (outside.stat().st_mode & 0o777) == 0o600
