"""Who can tell a landing was reverted: every reader of the queue, not only the host that
made the revert — the revert's staging commit names what it undoes, so a clone that never
had the revert commit itself (another host's mirror, an agent reading the server) sees it;
and `Finder`, which reads the queue once for many landings, answers as `locate` does."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from integrator.cli import main
from integrator.documents.trailers import trailers
from integrator.records.canonical import Canonical
from integrator.records.landings import Finder, locate, whereabouts
from tests.gitutil import git
from tests.rollout_world import make_rollout


def test_a_clone_without_the_revert_commit_sees_the_revert(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three landings, the middle one reverted: the revert's staging commit carries
    `Integrator-Reverts`; a mirror clone of the repository (no candidate objects: nothing
    names them) locates the reverted landing as reverted, the others as promoted; Finder
    and locate agree on every landing, in the repository and in the clone."""
    world = make_rollout(tmp_path)
    for label, task in (("a", "billing"), ("b", "search"), ("c", "docs")):
        path = f"src/{task}/**" if task != "docs" else "docs/**"
        name = f"src/{task}/x.py" if task != "docs" else "docs/x.md"
        world.submit(label, task, [path], {name: f"{label}\n"})
    world.drain()
    staging = {label: world.staging(label) for label in "abc"}
    capsys.readouterr()
    assert main(["revert", "--repo", str(world.repo), staging["b"], "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    revert, landed = done["revertCommit"], done["verdict"]["stagingCommit"]
    message = git("log", "-1", "--format=%B", landed, cwd=world.repo)
    assert trailers(message)["Integrator-Reverts"] == staging["b"]
    clone = tmp_path / "clone.git"
    git("clone", "-q", "--mirror", "--no-local", str(world.repo), str(clone), cwd=tmp_path)
    never = subprocess.run(
        ["git", "cat-file", "-e", revert], cwd=clone, capture_output=True, check=False
    )
    assert never.returncode != 0  # no ref names the revert commit: the clone never got it
    for repo in (world.repo, clone):
        where = whereabouts(repo, staging["b"])
        assert where is not None and where["state"] == "reverted", (repo, where)
        assert where["revertedBy"] == landed
        with Canonical(repo) as canonical:
            finder = Finder(canonical)
            for name in (*staging.values(), landed):
                assert finder.locate(name) == locate(canonical, name), (repo, name)
        assert whereabouts(repo, staging["a"])["state"] == "promoted"  # type: ignore[index]


def test_a_candidate_that_says_it_reverts_another_landing_reverts_nothing(
    tmp_path: Path,
) -> None:
    """An agent's candidate whose message ends in `Integrator-Reverts: <someone's landing>`
    lands under its own task: its staging commit carries no such trailer, and the other
    landing is still promoted, not reverted, however the queue is read."""
    world = make_rollout(tmp_path)
    world.submit("a", "billing", ["src/billing/**"], {"src/billing/x.py": "a\n"})
    world.drain()
    victim = world.staging("a")
    contract = world.issue("search", ["src/search/**"])
    forged = world.commit(
        contract.base_commit,
        {"src/search/x.py": "b\n"},
        f"search: work\n\nIntegrator-Reverts: {victim}\n",
    )
    world.hand_in("b", contract.wire(), forged)
    world.drain()
    landed = world.staging("b")
    assert "Integrator-Reverts" not in trailers(git("log", "-1", "--format=%B", landed,
                                                    cwd=world.repo))  # fmt: skip
    where = whereabouts(world.repo, victim)
    assert where is not None and where["state"] == "promoted", where
    with Canonical(world.repo) as canonical:
        assert Finder(canonical).locate(victim).state == "promoted"
