"""One fetch per batch in remote mode, against a real `git daemon` on 127.0.0.1: the view a
batch fetched is handed to the engine once, on the same thread, and the claims a mirror
pushes are remembered as seen when the push is applied, so a server that moves a claim
back behind them is still caught."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from integrator.records.canonical import Canonical
from tests.gitutil import git
from tests.gitutil import run_integrator_raw as cli
from tests.remote_world import RemoteWorld

SEEN = "refs/integrator/seen/claims/"
CLAIMS = "refs/integrator/claims/"


def _fetches(canonical: Canonical) -> int:
    return canonical.traffic()["fetches"]


def test_a_kept_view_serves_one_reuse_on_its_thread_and_nothing_else(
    remote: RemoteWorld,
) -> None:
    """refresh(keep=True) fetches; the next refresh(reuse=True) on that thread does not, a
    second one does; a plain refresh always fetches, and so does a reuse on another thread."""
    mirror = remote.mirror("host")
    with Canonical(mirror) as canonical:
        canonical.refresh(keep=True)
        assert _fetches(canonical) == 1
        canonical.refresh(reuse=True)
        assert _fetches(canonical) == 1  # the batch's view, taken over
        canonical.refresh(reuse=True)
        assert _fetches(canonical) == 2  # handed over once only
        canonical.refresh(keep=True)
        canonical.refresh()
        assert _fetches(canonical) == 4  # a plain refresh never takes a kept view
        canonical.refresh(reuse=True)
        assert _fetches(canonical) == 5  # ...and it dropped the kept one
        canonical.refresh(keep=True)
        other = threading.Thread(target=lambda: canonical.refresh(reuse=True))
        other.start()
        other.join()
        assert _fetches(canonical) == 7  # another thread's refresh fetches for itself
        assert canonical.traffic()["batch_views"] == 3


def test_the_daemon_fetches_once_and_pushes_once_per_batch(
    remote: RemoteWorld, tmp_path: Path
) -> None:
    """A drain of three submissions in one batch makes one fetch and one push between
    daemon.ready and daemon.drained, and lands all three on the server."""
    mirror = remote.mirror("host")
    contracts = []
    heads = []
    for i in range(3):
        contract = tmp_path / f"c{i}.json"
        remote.issue(mirror, f"t{i}", [f"t{i}/**"], contract)
        agent = remote.agent(f"a{i}")
        (agent / f"t{i}" / "f.txt").write_text(f"agent {i}\n")
        git("commit", "-qam", f"agent {i}", cwd=agent)
        git("push", "-q", str(mirror), f"HEAD:refs/heads/agent{i}", cwd=agent)
        contracts.append(contract)
        heads.append(git("rev-parse", "HEAD", cwd=agent))
    spool = tmp_path / "spool"
    for contract, head in zip(contracts, heads, strict=True):
        done = cli("submit", "--spool", str(spool), "--contract", str(contract),
                   "--candidate", head, "--repo", str(mirror), "--create")  # fmt: skip
        assert done.returncode == 0, done.stderr.decode()
    config = tmp_path / "serve.toml"
    config.write_text("[serve]\nbatch-seconds = 60\n")  # one batch however slow the host
    done = cli("serve", "--repo", str(mirror), "--spool", str(spool), "--once", "--no-watch",
               "--no-promote", "--log-format", "json", "--config", str(config))  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    events: dict[str, dict[str, Any]] = {}
    for line in (done.stdout + done.stderr).decode().splitlines():
        if line.startswith("{"):
            doc = json.loads(line)
            events.setdefault(doc["event"], doc)
    ready, drained = events["daemon.ready"], events["daemon.drained"]
    assert drained["batch_views"] - ready["batch_views"] == 1
    assert drained["fetches"] - ready["fetches"] == 1
    assert drained["pushes"] - ready["pushes"] == 1
    assert sorted(remote.landed()) == sorted(heads)


def test_a_claim_moved_back_behind_this_mirrors_own_push_is_remembered_as_rewritten(
    remote: RemoteWorld, tmp_path: Path
) -> None:
    """The landing's push consumes the claim and the mirror marks the consumed commit seen
    as the push is applied; the server then moving the claim back to the unconsumed commit
    (an ancestor of it, not a descendant) is found by the next fetch as a rewrite."""
    mirror = remote.mirror("host")
    contract = tmp_path / "c.json"
    remote.issue(mirror, "t0", ["t0/**"], contract)
    issued = git("rev-parse", f"{CLAIMS}t0", cwd=remote.canon)
    agent = remote.agent("a0")
    (agent / "t0" / "f.txt").write_text("agent\n")
    git("commit", "-qam", "agent", cwd=agent)
    git("push", "-q", str(mirror), "HEAD:refs/heads/agent", cwd=agent)
    done = cli("integrate", "--repo", str(mirror), "--contract", str(contract),
               "--candidate", git("rev-parse", "HEAD", cwd=agent), "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    consumed = git("rev-parse", f"{CLAIMS}t0", cwd=remote.canon)
    assert consumed != issued
    assert git("rev-parse", f"{SEEN}t0", cwd=mirror) == consumed  # seen as it was pushed
    git("update-ref", f"{CLAIMS}t0", issued, cwd=remote.canon)  # the server moves it back
    with Canonical(mirror) as canonical:
        canonical.refresh()
        assert canonical.rewritten == {"t0": (consumed, issued)}
