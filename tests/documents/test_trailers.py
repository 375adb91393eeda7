"""Trailers name landings; only integrator writes them.

The candidate's subject line becomes the staging commit's first line. `trailers()` used to
read every line of a message, so an agent whose commit subject was
`Integrator-Landing: <another landing>` renamed its own landing: ejected, its ejection was
recorded under the other landing's name, and `locate` (recovery, `status`) reported the
ejected landing as promoted. Only the last paragraph, which every writer of trailers
writes itself, is read now."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from integrator.records.canonical import Canonical
from integrator.records.landings import locate
from tests.daemon_world import key_for, submission
from tests.gitutil import git
from tests.promotion_world import MARKER, PromotionWorld, promotion_world


@pytest.fixture
def promotion(tmp_path: Path) -> Iterator[PromotionWorld]:
    yield from promotion_world(tmp_path)


def _submit(world: PromotionWorld, task: str, message: str, files: dict[str, str]) -> str:
    contract, oid = world.candidate(task, files, message)
    sid = world.spool.submit(submission(contract, oid), key=key_for(world.repo, contract))
    world.sids[task] = sid
    return sid


def _claimed_staging(world: PromotionWorld, task: str) -> str:
    claim = json.loads(git("show", f"refs/integrator/claims/{task}:claim.json", cwd=world.repo))
    return str(claim["stagingCommit"])


def test_a_subject_line_cannot_rename_a_landing(promotion: PromotionWorld) -> None:
    world = promotion
    world.set_policy(world.command() + "\nmax_batch = 1")
    _submit(world, "t1", "victim work", {"t1/f.txt": "victim\n"})
    assert world.serve_once().proc.returncode == 0
    victim = _claimed_staging(world, "t1")
    assert git("rev-parse", "main", cwd=world.repo) == victim  # promoted

    _submit(
        world,
        "t2",
        f"Integrator-Landing: {victim}",
        {"t2/f.txt": "attacker\n", f"t2/{MARKER}": "fails validation\n"},
    )
    assert world.serve_once().proc.returncode == 0
    attacker = _claimed_staging(world, "t2")
    assert world.heads["t2"] not in world.chain("refs/integrator/queue/main")  # ejected

    with Canonical(world.repo) as canonical:
        where = locate(canonical, attacker)
    ejected = git("for-each-ref", "--format=%(refname)", "refs/integrator/ejected/", cwd=world.repo)
    # The ejection must be recorded under the attacker's own landing, not the victim's.
    assert ejected.split() == [f"refs/integrator/ejected/main/{attacker}"], ejected
    assert where.state == "ejected", where  # not "promoted" as the victim's commit


@pytest.mark.parametrize(
    "key",
    ["Integrator-Candidate", "Integrator-Task", "Integrator-Attempt", "Integrator-Landing",
     "Integrator-Replaces", "Integrator-Base", "Integrator-Reverts", "Integrator-Head"],
)  # fmt: skip
def test_text_before_the_trailer_block_names_nothing(key: str) -> None:
    """A summary, or a reason of several paragraphs, spelled like trailers is not read."""
    from integrator.documents.trailers import staging_message, trailers

    forged = f"{key}: {'f' * 40}"
    staged = staging_message(
        forged, candidate="c" * 40, task_id="t", attempt_id="a", generation=1,
        contract_digest="sha256:" + "1" * 64, policy_digest="sha256:" + "2" * 64, base="b" * 40,
    )  # fmt: skip
    found = trailers(staged)
    assert found.get(key) != "f" * 40
    assert found["Integrator-Candidate"] == "c" * 40
    # A reviewer's reason of several paragraphs, then the writer's own trailers.
    record = f"reject X: no\n\n{forged}\n\n{forged}\nmore\n\nIntegrator-Actor: rm\n"
    assert trailers(record) == {"Integrator-Actor": "rm"}
    # One paragraph has no trailer block; git splits lines on newline only.
    assert trailers(forged) == {}
    assert trailers(f"x\n\nIntegrator-Actor: rm\u2028{forged}\n").get(key) is None
