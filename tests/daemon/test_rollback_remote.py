"""A queue forced back on a server that cannot guard its refs (a plain `git daemon` on
127.0.0.1, no hook) stops landing and promotion on a mirror that saw it further on; an
ejection's rebuild, which moves the queue back too, is explained by its promotion record
and stops nothing; a forged record explains it only to a mirror that trusts no authority
key (docs/security.md, "Authority keys")."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from integrator.documents.promotion import PromotionRecord
from integrator.errors import ConfigurationError
from integrator.landing.engine import Integrator
from integrator.records import verdict_keys
from integrator.records.canonical import Canonical
from tests.daemon.test_remote import _candidate
from tests.git_server import git_daemon
from tests.gitutil import git
from tests.gitutil import run_integrator_raw as cli
from tests.promotion_world import CHECK_SCRIPT, MARKER
from tests.remote_world import RemoteWorld

QUEUE, PROMOTION = "refs/integrator/queue/main", "refs/integrator/promotion/main"


def _land(world: RemoteWorld, coordinator: Path, host: Path, task: str, files: dict[str, str],
          spool: Path, *, on_main: bool = False) -> None:  # fmt: skip
    contract = world.tmp / f"{task}.json"
    if on_main:  # based on the target, not on the queue's unpromoted landings
        done = cli("contract", "issue", "--repo", str(coordinator), "--task", task, "--lease",
                   "2h", "--path", f"{task}/**", "--base", "refs/heads/main", "-o",
                   str(contract))  # fmt: skip
        assert done.returncode == 0, done.stderr.decode()
    else:
        world.issue(coordinator, task, [f"{task}/**"], contract)
    agent = _candidate(world, int(task[1:]), files)
    done = cli("submit", "--intake", world.intake, "--contract", str(contract),
               "--candidate", "HEAD", "--repo", str(agent))  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    assert world.serve(host, spool, "--once", "--no-promote").wait(120) == 0


def _forged_rebuild(world: RemoteWorld, before: str, after: str) -> None:
    """Push an "eject" promotion record no promoter wrote, rebuilding `before` at `after`."""
    canon = world.server.root / "canon.git"
    record = PromotionRecord(action="eject", target="main", at=datetime.now(UTC), actor="x",
                             before=before, after=after)  # fmt: skip
    blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=canon, check=True,
                          input=record.to_json().encode() + b"\n",
                          capture_output=True).stdout.decode().strip()  # fmt: skip
    tree = git("mktree", cwd=canon, input=f"100644 blob {blob}\tpromotion.json\n".encode())
    parent = git("rev-parse", PROMOTION, cwd=canon)
    forged = git("commit-tree", tree, "-p", parent, "-m", "eject", cwd=canon)
    git("update-ref", PROMOTION, forged, cwd=canon)


def _rolled_back(mirror: Path) -> str | None:
    with Canonical(mirror) as canonical:
        canonical.refresh()
        return canonical.rolled_back


def test_a_queue_forced_back_stops_landing_but_an_ejection_does_not(tmp_path: Path) -> None:
    files = {"t0/f.txt": "0\n", "t1/f.txt": "0\n", "ci/check.sh": CHECK_SCRIPT}
    with git_daemon(tmp_path / "srv") as server:
        world = RemoteWorld(tmp_path, server, files)
        try:
            policy = tmp_path / "policy.toml"
            policy.write_text(
                "version = 1\n[validation]\n"
                f'command = ["sh", "ci/check.sh", "{tmp_path / "runs.log"}"]\n'
            )
            coordinator = world.mirror("coordinator")
            assert cli("policy", "set", str(policy), "--repo", str(coordinator)).returncode == 0
            host = world.mirror("host-a")
            canon = server.root / "canon.git"
            base = git("rev-parse", QUEUE, cwd=canon)

            # A culprit lands, and the promoter (another host) ejects it: the queue is
            # rebuilt back at the base, explained by the promotion record.
            _land(world, coordinator, host, "t0", {"t0/f.txt": "1\n", f"t0/{MARKER}": "x\n"},
                  tmp_path / "spool-0")  # fmt: skip
            assert git("rev-parse", QUEUE, cwd=host) != base
            assert cli("promote", "--repo", str(world.mirror("promoter")), "--once").returncode == 0
            assert git("rev-parse", QUEUE, cwd=canon) == base
            assert _rolled_back(host) is None

            # An honest landing on the rebuilt queue; then someone forces the queue back.
            _land(world, coordinator, host, "t1", {"t1/f.txt": "1\n"}, tmp_path / "spool-1")
            landed = git("rev-parse", QUEUE, cwd=canon)
            assert landed != base
            git("update-ref", QUEUE, base, cwd=canon)
            problem = _rolled_back(host)
            assert problem is not None and "does not descend" in problem, problem
            with Canonical(host) as canonical:
                canonical.refresh()
                with pytest.raises(ConfigurationError, match="forced it back"):
                    Integrator(canonical).integrate_many([])
            done = cli("promote", "--repo", str(host), "--once")
            assert done.returncode == 2 and b"forced it back" in done.stderr, done.stderr
            assert _rolled_back(world.mirror("fresh")) is None  # a new mirror cannot tell

            # A forged rebuild record explains the move to a mirror without keys, not to
            # one that trusts an authority key (the record is not signed).
            _forged_rebuild(world, landed, base)
            assert _rolled_back(host) is None
            git("update-ref", "-d", "refs/integrator/seen/heads/queue/main", cwd=host)
            git("update-ref", "refs/integrator/seen/heads/queue/main", landed, cwd=host)
            verdict_keys.configure(host, tmp_path / "authority.key", [], verdict_keys.AUTHORITY)
            problem = _rolled_back(host)
            assert problem is not None and "no promotion record a trusted key signed" in problem

            # Restored on the server: landing goes on.
            git("update-ref", QUEUE, landed, cwd=canon)
            assert _rolled_back(host) is None
            assert json.loads(git("show", f"{PROMOTION}:promotion.json", cwd=canon))["actor"] == "x"
        finally:
            world.stop()


def test_an_older_signed_policy_pause_or_control_replayed_stops_the_mirror(
    tmp_path: Path,
) -> None:
    """A signature says who wrote a record, not that it is the newest: the policy, the
    claims pause and queue control only move forward (each a child of the one before), so
    an older signed one put back on the server is caught like a queue forced back."""
    from integrator.records.pause import set_pause
    from integrator.records.queue_control import set_control

    with git_daemon(tmp_path / "srv") as server:
        world = RemoteWorld(tmp_path, server, {"t0/f.txt": "0\n"})
        try:
            key = tmp_path / "authority.key"
            host = tmp_path / "host-a.git"
            done = cli("init", "--repo", str(host), "--remote", world.url, "--authority-key",
                       str(key))  # fmt: skip
            assert done.returncode == 0, done.stderr.decode()
            canon = server.root / "canon.git"
            policy = tmp_path / "policy.toml"
            for command in ("true", "sh ci/check.sh"):
                policy.write_text(f'version = 1\n[validation]\ncommand = "{command}"\n')
                assert cli("policy", "set", str(policy), "--repo", str(host)).returncode == 0
            with Canonical(host) as canonical:
                set_pause(canonical, "paused", "incident", "ops")
                set_pause(canonical, "resumed", "over", "ops")
                for paused in (True, False):
                    set_control(canonical, paused=paused, reason="look", actor="ops",
                                now=canonical.clock())  # fmt: skip
            for ref in ("refs/integrator/policy", "refs/integrator/pause",
                        "refs/integrator/queue-control/main"):  # fmt: skip
                newest = git("rev-parse", ref, cwd=canon)
                older = git("rev-parse", f"{ref}~1", cwd=canon)  # signed, and replayable
                git("update-ref", ref, older, cwd=canon)
                problem = _rolled_back(host)
                assert problem is not None and "an older record replayed" in problem, ref
                assert ref in problem
                with Canonical(host) as canonical:
                    canonical.refresh()
                    with pytest.raises(ConfigurationError, match="forced it back"):
                        Integrator(canonical).integrate_many([])
                done = cli("contract", "issue", "--repo", str(host), "--task", "t9", "--path",
                           "t0/**", "-o", str(tmp_path / "t9.json"))  # fmt: skip
                assert done.returncode == 2 and b"forced it back" in done.stderr, done.stderr
                git("update-ref", ref, newest, cwd=canon)
                assert _rolled_back(host) is None
        finally:
            world.stop()


def test_a_rebuild_of_a_head_this_mirror_never_fetched_is_explained(tmp_path: Path) -> None:
    """Host A lands a culprit; host B lands on top of it before A fetches again; the
    promoter ejects the culprit and rebuilds B's landing without it. The queue head the
    rebuild replaced was never in A's mirror: its record keeps it reachable (its last
    parent), so A can tell the rebuild from a queue forced back (found by the system soak:
    host A stopped landing for good)."""
    files = {"t0/f.txt": "0\n", "t1/f.txt": "0\n", "ci/check.sh": CHECK_SCRIPT}
    with git_daemon(tmp_path / "srv") as server:
        world = RemoteWorld(tmp_path, server, files)
        try:
            policy = tmp_path / "policy.toml"
            policy.write_text(
                "version = 1\n[validation]\n"
                f'command = ["sh", "ci/check.sh", "{tmp_path / "runs.log"}"]\n'
            )
            coordinator = world.mirror("coordinator")
            assert cli("policy", "set", str(policy), "--repo", str(coordinator)).returncode == 0
            host_a, host_b = world.mirror("host-a"), world.mirror("host-b")
            canon = server.root / "canon.git"
            _land(world, coordinator, host_a, "t0", {"t0/f.txt": "1\n", f"t0/{MARKER}": "x\n"},
                  tmp_path / "spool-a")  # fmt: skip
            seen_by_a = git("rev-parse", QUEUE, cwd=host_a)
            _land(world, coordinator, host_b, "t1", {"t1/f.txt": "1\n"}, tmp_path / "spool-b",
                  on_main=True)  # fmt: skip
            replaced = git("rev-parse", QUEUE, cwd=canon)
            missing = subprocess.run(["git", "cat-file", "-e", replaced], cwd=host_a, check=False)
            assert missing.returncode != 0  # A never fetched B's landing
            assert cli("promote", "--repo", str(world.mirror("promoter")), "--once").returncode == 0
            rebuilt = git("rev-parse", QUEUE, cwd=canon)
            assert rebuilt != replaced and git("show", f"{rebuilt}:t1/f.txt", cwd=canon) == "1"
            assert _rolled_back(host_a) is None
            assert git("rev-parse", "refs/integrator/seen/heads/queue/main", cwd=host_a) == (
                rebuilt
            ), seen_by_a
        finally:
            world.stop()
