"""Ownership stays exclusive under races: eight coordinators making overlapping claims live
at once (issue, reclaim, expand) leave exactly one live claim per glob, every time, each
signed with the authority key.

`make test` runs 4 trials of each; `make soak` runs 20 (INTEGRATOR_RACE_TRIALS)."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from integrator.documents.expansion import ExpansionRequest
from integrator.errors import IntegratorError
from integrator.fence.overlap import patterns_overlap
from integrator.records import verdict_keys
from integrator.records.attempt_keys import stored_key
from integrator.records.canonical import Canonical
from integrator.records.claims import Claims, IssueRequest
from integrator.records.expansions import Expansions
from integrator.records.policy_ref import set_policy
from tests.canon import make_canon
from tests.gitutil import git

COORDINATORS = 8
TRIALS = int(os.environ.get("INTEGRATOR_RACE_TRIALS", "4"))
ZERO = "sha256:" + "0" * 64
LEASE = timedelta(days=3650)

Operation = Callable[[Canonical, int], object]


def _worker(repo: str, op: Operation, i: int, gate: object, out: object) -> None:
    """One coordinator process: wait for the others, then run `op` and report."""
    gate.wait()  # type: ignore[attr-defined]
    try:
        with Canonical(repo) as canonical:
            op(canonical, i)
        result = "ok"
    except IntegratorError as err:
        result = type(err).__name__
    out.put((i, result))  # type: ignore[attr-defined]


def _race(repo: Path, op: Operation) -> dict[int, str]:
    """Run `op` in COORDINATORS real processes released at one barrier."""
    ctx = multiprocessing.get_context("fork")
    gate = ctx.Barrier(COORDINATORS)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(str(repo), op, i, gate, out)) for i in range(COORDINATORS)
    ]
    for proc in procs:
        proc.start()
    results = dict(out.get(timeout=60) for _ in procs)
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0
    return results


def _live_on(repo: Path, glob: str) -> list[str]:
    with Canonical(repo) as canonical:
        return [
            c.view.task_id
            for c in canonical.claims()
            if c.view.state == "live" and any(patterns_overlap(glob, p) for p in c.contract.paths)
        ]


def _keys_match(repo: Path) -> None:
    """Every live claim's attempt key is the one the key store holds for its contract: of
    coordinators racing, the winner's key is the one recorded and stored, and no loser's
    key fits a live claim."""
    with Canonical(repo) as canonical:
        for claim in canonical.claims():
            if claim.view.state != "live":
                continue
            stored = stored_key(canonical, claim.contract)
            assert stored is not None, claim.view.task_id
            assert stored.public == claim.view.attempt_key, claim.view.task_id
            ref = Canonical.claim_ref(claim.view.task_id)
            assert canonical.authority_problem(ref, claim.oid) is None, ref
        index = canonical.ref("refs/integrator/claims-index")
        assert index is not None
        assert canonical.authority_problem("refs/integrator/claims-index", index) is None


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A canonical repository whose records are signed (an authority key, trusted): every
    racing coordinator signs what it writes, and a live claim must carry its signature."""
    canon = make_canon(tmp_path_factory.mktemp("races"))
    key = canon.path.parent / "authority.key"
    verdict_keys.configure(canon.path / ".git", key, [], verdict_keys.AUTHORITY)
    with canon.open() as canonical:
        set_policy(canonical, canonical.policy_state(signed=False).text)
    return canon.path


def test_concurrent_issues_of_one_glob_leave_one_live_claim(repo: Path) -> None:
    """Eight `issue`s of overlapping contracts at once: one wins, seven are refused."""
    for trial in range(TRIALS):
        glob = f"issue{trial}/**"

        def issue(canonical: Canonical, i: int, glob: str = glob, trial: int = trial) -> object:
            request = IssueRequest(task_id=f"i{trial}-{i}", paths=(glob,), lease=LEASE)
            return Claims(canonical).issue(request)

        results = _race(repo, issue)
        assert sorted(results.values()).count("ok") == 1, results
        assert len(_live_on(repo, glob)) == 1
        _keys_match(repo)


def test_concurrent_reclaims_of_overlapping_claims_leave_one_live(repo: Path) -> None:
    """Eight revoked claims on one glob reclaimed at once: one comes back, seven stay out."""
    for trial in range(TRIALS):
        glob = f"reclaim{trial}/**"
        with Canonical(repo) as canonical:
            claims = Claims(canonical)
            for i in range(COORDINATORS):
                task = f"r{trial}-{i}"
                claims.issue(IssueRequest(task_id=task, paths=(glob,), lease=LEASE))
                claims.revoke(task, "make room for the next")

        def reclaim(canonical: Canonical, i: int, trial: int = trial) -> object:
            return Claims(canonical).reclaim(f"r{trial}-{i}", lease=LEASE)

        results = _race(repo, reclaim)
        assert list(results.values()).count("ok") == 1, results
        assert len(_live_on(repo, glob)) == 1
        _keys_match(repo)


def test_concurrent_expansions_onto_one_glob_grant_one(repo: Path) -> None:
    """Eight disjoint claims each asking to add the same glob at once: one is granted."""
    for trial in range(TRIALS):
        glob = f"expand{trial}/**"
        with Canonical(repo) as canonical:
            contracts = [
                Claims(canonical).issue(
                    IssueRequest(
                        task_id=f"e{trial}-{i}", paths=(f"own{trial}-{i}/**",), lease=LEASE
                    )
                )
                for i in range(COORDINATORS)
            ]
        requests = [
            ExpansionRequest.model_validate(
                {
                    "schema": "integrator.expansion.v1",
                    "taskId": c.task_id,
                    "contractDigest": c.digest,
                    "expectedGeneration": c.ownership_generation,
                    "treeDigest": ZERO,
                    "diffDigest": ZERO,
                    "workspaceTree": git("rev-parse", f"{c.base_commit}^{{tree}}", cwd=repo),
                    "addPaths": [glob],
                }
            )
            for c in contracts
        ]

        def expand(
            canonical: Canonical, i: int, requests: list[ExpansionRequest] = requests
        ) -> object:
            return Expansions(canonical).expand(requests[i])

        results = _race(repo, expand)
        assert list(results.values()).count("ok") == 1, results
        assert len(_live_on(repo, glob)) == 1
        _keys_match(repo)
