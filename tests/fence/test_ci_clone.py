"""A CI clone without claim refs cannot accept a forged contract: it says what it checked."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from tests.canon import make_canon
from tests.gitutil import commit_files, git


def _gate(repo: Path, contract: Path, candidate: str, *extra: str) -> tuple[int, dict[str, Any]]:
    proc = subprocess.run(
        [sys.executable, "-m", "integrator", "gate", "--repo", str(repo), "--contract",
         str(contract), "--candidate", candidate, "--json", *extra],
        capture_output=True, check=False,
    )  # fmt: skip
    return proc.returncode, json.loads(proc.stdout)


def test_a_widened_contract_in_a_plain_clone_goes_to_review(tmp_path: Path) -> None:
    """In a clone that fetched no refs/integrator/*, a contract widened to `**` is REVIEW
    CLAIM_UNVERIFIED (exit 3); --static asks for its own rules only and says so; once the
    claims are fetched, the forgery is fenced."""
    canon = make_canon(tmp_path)
    issued = canon.issue("billing", ["billing/**"], lease=timedelta(days=3650))
    forged = json.loads(issued.to_json()) | {"paths": ["**"]}
    contract = tmp_path / "forged.json"
    contract.write_text(json.dumps(forged))
    clone = tmp_path / "ci"
    git("clone", "-q", str(canon.path), str(clone), cwd=tmp_path)
    git("config", "integrator.repoId", issued.repo, cwd=clone)
    cand = commit_files(
        clone, {"auth/login.py": "stolen\n"}, "outside", parent=issued.base_commit, ref=None
    )

    code, verdict = _gate(clone, contract, cand)
    assert code == 3
    assert [v["code"] for v in verdict["violations"]] == ["CLAIM_UNVERIFIED"]
    assert "static" not in verdict

    code, verdict = _gate(clone, contract, cand, "--static")
    assert code == 0
    assert verdict["static"] is True and verdict["violations"] == []

    git("fetch", "-q", "origin", "+refs/integrator/*:refs/integrator/*", cwd=clone)
    code, verdict = _gate(clone, contract, cand)
    assert code == 1
    assert [v["code"] for v in verdict["violations"]] == ["CONTRACT_DIGEST_MISMATCH"]


def test_path_violations_are_still_reported_beside_claim_unverified(tmp_path: Path) -> None:
    """CLAIM_UNVERIFIED does not hide what the contract's own rules find: both are listed."""
    canon = make_canon(tmp_path)
    issued = canon.issue("billing", ["billing/**"], lease=timedelta(days=3650))
    contract = tmp_path / "billing.json"
    contract.write_text(issued.to_json())
    clone = tmp_path / "ci"
    git("clone", "-q", str(canon.path), str(clone), cwd=tmp_path)
    git("config", "integrator.repoId", issued.repo, cwd=clone)
    cand = commit_files(
        clone, {"auth/login.py": "x\n"}, "outside", parent=issued.base_commit, ref=None
    )
    code, verdict = _gate(clone, contract, cand)
    assert code == 1
    codes = {v["code"] for v in verdict["violations"]}
    assert codes == {"PATH_NOT_OWNED", "CLAIM_UNVERIFIED"}
