"""A host that reads a claim consumed by this very candidate while its mirror's queue does
not hold the landing yet (the server's transaction renames the claim before the queue, and
a fetch in between sees exactly that) reads the server again before it answers: the
submission is the landing another host made (ACCEPTED, recovered), not CLAIM_CONSUMED."""

from __future__ import annotations

from pathlib import Path

from integrator.documents.contract import OwnershipContract
from integrator.landing.history import QueueHistory
from integrator.records.canonical import Canonical
from tests.daemon.test_remote import _candidate, _submit
from tests.gitutil import git
from tests.remote_world import RemoteWorld, remote

__all__ = ["remote"]  # the fixture


def test_a_landing_seen_by_its_claim_first_is_recovered(
    remote: RemoteWorld, tmp_path: Path
) -> None:
    coordinator = remote.mirror("coordinator")
    contract_file = tmp_path / "c0.json"
    remote.issue(coordinator, "t0", ["t0/**"], contract_file)
    agent = _candidate(remote, 0, {"t0/f.txt": "agent 0\n"})
    _submit(remote, agent, contract_file)
    lander = remote.mirror("host-a")
    assert remote.serve(lander, tmp_path / "spool-a", "--once").wait(120) == 0
    candidate = git("rev-parse", "HEAD", cwd=agent)
    assert candidate in remote.landed()

    reader = remote.mirror("host-b")  # fetched everything: the landing and its claim
    git("fetch", "-q", str(agent), "HEAD", cwd=reader)  # the candidate, as the intake brings it
    queue = "refs/integrator/queue/main"
    before = git("rev-parse", f"{queue}~1", cwd=reader)
    git("update-ref", queue, before, cwd=reader)  # as a fetch between the two renames saw it
    contract = OwnershipContract.model_validate_json(contract_file.read_bytes())
    with Canonical(reader) as canonical:
        claim = canonical.claim("t0")
        assert claim is not None and claim.view.candidate == candidate
        verdict = QueueHistory(canonical).earlier_landing(contract, claim, candidate)
    assert verdict is not None, "the landing was not recognised"
    assert (verdict.decision.value, verdict.recovered) == ("ACCEPTED", True)
    assert git("rev-parse", queue, cwd=reader) != before  # it read the server again
