"""Limits from the operator: the policy's `[limits]` raises what a contract may name, and the
gate, `contract issue` and the daemon admit contracts under the limits of the policy in
force — real `integrator` processes on a real canonical repository."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from integrator.documents.policy import default_policy_text
from integrator.documents.verdict import Code, Decision, Verdict
from integrator.limits import MAX_GLOBS
from integrator.store.spool import REJECTION_FILE, VERDICT_FILE, Spool
from tests.gitutil import commit_files, git, make_repo, run_integrator

RAISED = 6000  # past the default of 5,000 globs
RAISED_POLICY = default_policy_text() + f"\n[limits]\nmax_globs = {RAISED}\n"


def _paths(folder: str) -> list[str]:
    return [f"/{folder}/module_{i:05d}.py" for i in range(RAISED)]


def _issue(repo: Path, task: str, paths: list[str], out: Path) -> tuple[int, str]:
    args = [arg for path in paths for arg in ("--path", path)]
    done = run_integrator(
        "contract", "issue", "--repo", str(repo), "--task", task, "--lease", "2h",
        "-o", str(out), *args,
    )  # fmt: skip
    return done.returncode, done.stderr


def _gate(repo: Path, contract: Path, candidate: str) -> tuple[int, dict[str, Any]]:
    done = run_integrator(
        "gate", "--repo", str(repo), "--contract", str(contract), "--candidate", candidate,
        "--json",
    )  # fmt: skip
    return done.returncode, json.loads(done.stdout)


def _through_daemon(repo: Path, spool: Spool, contract: Path, candidate: str) -> Verdict:
    submitted = run_integrator(
        "submit", "--spool", str(spool.root), "--contract", str(contract),
        "--candidate", candidate, "--repo", str(repo),
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    sid = submitted.stdout.strip()
    served = run_integrator("serve", "--once", "--repo", str(repo), "--spool", str(spool.root))
    assert served.returncode == 0, served.stderr
    found = spool.find(sid)
    assert found is not None
    return Verdict.model_validate_json((found[1] / VERDICT_FILE).read_bytes())


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = make_repo(tmp_path / "canon")
    commit_files(path, {"README.md": "hello\n"}, "base")
    done = run_integrator("init", "--repo", str(path), "--update-checkout")  # main checked out
    assert done.returncode == 0, done.stderr
    return path


def _set_policy(repo: Path, text: str, file: Path) -> None:
    file.write_text(text)
    done = run_integrator("policy", "set", str(file), "--repo", str(repo))
    assert done.returncode == 0, done.stderr


def test_a_raised_limit_admits_what_the_default_refuses(repo: Path, tmp_path: Path) -> None:
    """Under `[limits] max_globs = 6000` a contract naming 6,000 paths is issued, passes the
    gate and lands through the daemon; under the default policy the same shape is refused
    by `contract issue`, and the gate and the daemon fence one issued before with
    CONTRACT_INVALID naming the limit."""
    spool = Spool(tmp_path / "spool").ensure()
    _set_policy(repo, RAISED_POLICY, tmp_path / "raised.toml")
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    assert _issue(repo, "first", _paths("first"), first)[0] == 0
    assert _issue(repo, "second", _paths("second"), second)[0] == 0
    base = json.loads(first.read_text())["baseCommit"]
    one = commit_files(repo, {"first/module_00001.py": "x\n"}, "one", parent=base, ref=None)
    two = commit_files(repo, {"second/module_05999.py": "y\n"}, "two", parent=base, ref=None)

    code, verdict = _gate(repo, first, one)
    assert (code, verdict["decision"]) == (0, "ACCEPTED"), verdict
    landed = _through_daemon(repo, spool, first, one)
    assert landed.decision is Decision.ACCEPTED, landed.violations

    _set_policy(repo, default_policy_text(), tmp_path / "default.toml")
    refused = _issue(repo, "third", _paths("third"), tmp_path / "third.json")
    assert refused[0] == 2 and "limits.max_globs, the default" in refused[1], refused
    why = f"paths: at most {MAX_GLOBS} patterns (limits.max_globs, the default), not {RAISED}"
    code, doc = _gate(repo, second, two)
    gated = Verdict.model_validate_json(json.dumps(doc))
    assert (code, gated.codes) == (1, [Code.CONTRACT_INVALID]), doc
    assert why in gated.violations[0].detail
    fenced = _through_daemon(repo, spool, second, two)
    assert fenced.decision is Decision.FENCED
    assert fenced.codes == [Code.CONTRACT_INVALID]
    assert why in fenced.violations[0].detail
    assert git("rev-parse", "refs/integrator/queue/main", cwd=repo) == landed.staging_commit


def test_a_policy_past_a_ceiling_is_refused_naming_key_and_ceiling(
    repo: Path, tmp_path: Path
) -> None:
    """`policy set` refuses a limit past its ceiling, an unknown key and a fixed limit, each
    as a configuration error naming it; the policy in force is unchanged."""
    before = git("rev-parse", "refs/integrator/policy", cwd=repo)
    for extra, said in [
        ("max_globs = 20001", "limits.max_globs = 20001 is above its ceiling of 20000"),
        ("contract_bytes = 1048576", "limits.contract_bytes = 1048576 is above its ceiling"),
        ("max_paths = 10", "unknown key 'max_paths'; [limits] sets contract_bytes"),
        ("submission_bytes = 10", "submission_bytes is fixed"),
    ]:
        path = tmp_path / "bad.toml"
        path.write_text(default_policy_text() + f"\n[limits]\n{extra}\n")
        done = run_integrator("policy", "set", str(path), "--repo", str(repo))
        assert done.returncode == 2, (extra, done.stderr)
        assert said in done.stderr, (extra, done.stderr)
    assert git("rev-parse", "refs/integrator/policy", cwd=repo) == before


def test_a_raised_contract_copied_without_its_key_is_rejected(repo: Path, tmp_path: Path) -> None:
    """The attempt key is checked on any contract a policy could admit: under max_globs =
    6000 another agent's unsigned submission under a copied 6,000-path contract is REJECTED
    before any work, and nothing lands (the check read it at the default limits, found no
    contract, left it to the gate, and the gate, at the raised policy, landed it)."""
    spool = Spool(tmp_path / "spool").ensure()
    _set_policy(repo, RAISED_POLICY, tmp_path / "raised.toml")
    issued = tmp_path / "victim" / "wide.json"
    issued.parent.mkdir()
    assert _issue(repo, "wide", _paths("wide"), issued)[0] == 0
    stolen = tmp_path / "stolen" / "wide.json"
    stolen.parent.mkdir()
    stolen.write_bytes(issued.read_bytes())  # the contract only: the key stays with its holder
    attacker = tmp_path / "attacker"
    git("clone", "-q", str(repo), str(attacker), cwd=tmp_path)
    (attacker / "wide").mkdir()
    (attacker / "wide" / "module_00001.py").write_text("planted\n")
    git("add", "-A", cwd=attacker)
    git("commit", "-qm", "planted", cwd=attacker)
    sent = run_integrator(
        "submit", "--spool", str(spool.root), "--contract", str(stolen), "--candidate", "HEAD",
        "--repo", str(attacker), "--bundle",
    )  # fmt: skip
    assert sent.returncode == 0 and "unsigned" in sent.stderr, sent.stderr
    sid = sent.stdout.split()[-1]
    queue = git("rev-parse", "refs/integrator/queue/main", cwd=repo)
    served = run_integrator("serve", "--once", "--repo", str(repo), "--spool", str(spool.root))
    assert served.returncode == 0, served.stderr
    assert spool.entries("rejected") == [sid]
    rejection = json.loads((spool.folder("rejected") / sid / REJECTION_FILE).read_text())
    assert "not signed" in rejection["reason"]
    assert git("rev-parse", "refs/integrator/queue/main", cwd=repo) == queue
