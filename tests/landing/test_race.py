"""Concurrent integrators as real processes against one queue head."""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
from pathlib import Path

from tests.canon import Canon, make_canon
from tests.gitutil import git


def _start(canon: Canon, contract_file: Path, candidate: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "integrator",
            "integrate",
            "--repo",
            str(canon.path),
            "--contract",
            str(contract_file),
            "--candidate",
            candidate,
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _finish(proc: subprocess.Popen[bytes]) -> tuple[int, dict[str, object]]:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode in (0, 1, 3), err.decode()
    return proc.returncode, json.loads(out)


def test_k_integrators_each_land_exactly_once(tmp_path: Path) -> None:
    """Six processes integrating disjoint tasks from one queue head all land, once each."""
    files = {f"t{i}/f.txt": f"{i}\n" for i in range(6)}
    canon = make_canon(tmp_path, files)
    canon.clock.now = canon.clock.now.replace(year=2030)  # leases must outlive the real clock
    jobs = []
    for i in range(6):
        contract = canon.issue(f"t{i}", [f"t{i}/**"], lease=datetime.timedelta(days=3650))
        path = tmp_path / f"c{i}.json"
        path.write_text(contract.to_json())
        cand = canon.commit({f"t{i}/f.txt": f"{i} changed\n", f"t{i}/new.txt": "n\n"})
        jobs.append((path, cand))
    procs = [_start(canon, path, cand) for path, cand in jobs]
    results = [_finish(p) for p in procs]
    assert [code for code, _ in results] == [0] * 6, results
    staging = {doc["stagingCommit"] for _, doc in results}
    assert len(staging) == 6
    chain = git("rev-list", "--first-parent", "refs/integrator/queue/main", cwd=canon.path).split()
    assert staging <= set(chain)
    assert len(chain) == 7  # base + exactly one staging commit per task
    for i in range(6):
        assert git("show", f"main:t{i}/f.txt", cwd=canon.path) == f"{i} changed"


def _billing(folder: Path) -> tuple[Canon, Path]:
    """A canonical repository with a long-lived billing claim, its contract in a file."""
    canon = make_canon(folder)
    canon.clock.now = canon.clock.now.replace(year=2030)  # leases must outlive the real clock
    contract = canon.issue("billing", ["billing/**"], lease=datetime.timedelta(days=3650))
    path = folder / "c.json"
    path.write_text(contract.to_json())
    return canon, path


def test_same_claim_lands_at_most_once(tmp_path: Path) -> None:
    """Two candidates racing on one claim: exactly one lands, the other is fenced."""
    canon, path = _billing(tmp_path)
    c1 = canon.commit({"billing/invoice.py": "one\n"})
    c2 = canon.commit({"billing/tax.py": "two\n"})
    results = [_finish(p) for p in [_start(canon, path, c1), _start(canon, path, c2)]]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 1]
    fenced = next(doc for code, doc in results if code == 1)
    got = {v["code"] for v in fenced["violations"]}  # type: ignore[attr-defined]
    assert got & {"CLAIM_CONSUMED", "REF_MOVED"}
    chain = git("rev-list", "--first-parent", "refs/integrator/queue/main", cwd=canon.path).split()
    assert len(chain) == 2


def test_same_candidate_from_two_integrators_is_accepted_by_both(tmp_path: Path) -> None:
    """Two processes integrating one submission: it lands once; the loser of the race is
    answered with that landing (recovered), never fenced."""
    for round_ in range(3):  # the race is timing-dependent: run it on a few fresh claims
        canon, path = _billing(tmp_path / f"round{round_}")
        cand = canon.commit({"billing/invoice.py": "one\n"})
        results = [_finish(p) for p in [_start(canon, path, cand), _start(canon, path, cand)]]
        assert [code for code, _ in results] == [0, 0], results
        assert len({doc["stagingCommit"] for _, doc in results}) == 1
        chain = git("rev-list", "--first-parent", "refs/integrator/queue/main", cwd=canon.path)
        assert len(chain.split()) == 2
