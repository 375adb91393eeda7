"""The public Python API: a gate and an integrate on a real repository, and a light import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import integrator
from integrator import api
from tests.gitutil import commit_files, declare_bare, git, make_repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A prepared canonical repository with two folders."""
    path = declare_bare(make_repo(tmp_path / "canon"))
    commit_files(
        path, {"billing/a.py": "a = 1\n", "docs/i.md": "# i\n"}, "base", ref="refs/heads/main"
    )
    integrator.init(path, target="main")
    return path


def test_every_api_name_is_reachable_from_the_package() -> None:
    """`integrator.<name>` offers exactly `integrator.api.__all__`, each the same object."""
    assert set(integrator._API) == set(api.__all__)
    for name in api.__all__:
        assert getattr(integrator, name) is getattr(api, name)
    with pytest.raises(AttributeError):
        _ = integrator.no_such_name


def test_gate_then_integrate_through_the_api(repo: Path) -> None:
    """An issued contract gates ACCEPTED without moving a ref, then lands once."""
    contract = integrator.issue(
        repo, integrator.IssueRequest(task_id="billing", paths=("billing/**",))
    )
    candidate = commit_files(
        repo, {"billing/a.py": "a = 2\n"}, "billing change", parent=contract.base_commit, ref=None
    )
    queue_before = git("rev-parse", "refs/integrator/queue/main", cwd=repo)
    verdict = integrator.gate(repo, contract, candidate)
    assert verdict.decision is integrator.Decision.ACCEPTED
    assert git("rev-parse", "refs/integrator/queue/main", cwd=repo) == queue_before
    landed = integrator.integrate(repo, contract.to_json().encode(), candidate)
    assert landed.decision is integrator.Decision.ACCEPTED
    assert landed.staging_commit == git("rev-parse", "refs/integrator/queue/main", cwd=repo)
    again = integrator.gate(repo, contract, candidate)
    assert again.recovered is True  # the claim is consumed by this very landing


def test_a_stale_attempt_is_fenced_through_the_api(repo: Path, tmp_path: Path) -> None:
    """After a forced reclaim, the first attempt's contract is STALE_GENERATION."""
    first = integrator.issue(repo, integrator.IssueRequest(task_id="docs", paths=("docs/**",)))
    second = integrator.reclaim(repo, "docs", force=True)
    assert second.ownership_generation == first.ownership_generation + 1
    candidate = commit_files(
        repo, {"docs/i.md": "# late\n"}, "late", parent=first.base_commit, ref=None
    )
    path = tmp_path / "first.json"
    path.write_text(first.to_json())
    verdict = integrator.integrate(repo, path, candidate)
    assert verdict.decision is integrator.Decision.FENCED
    assert verdict.codes == [integrator.Code.STALE_GENERATION]


def test_out_of_contract_paths_and_errors_through_the_api(repo: Path, tmp_path: Path) -> None:
    """A write outside the contract is PATH_NOT_OWNED; an unreadable file is a UsageError."""
    contract = integrator.issue(
        repo, integrator.IssueRequest(task_id="billing", paths=("billing/**",))
    )
    candidate = commit_files(
        repo, {"docs/i.md": "# mine\n"}, "outside", parent=contract.base_commit, ref=None
    )
    verdict = integrator.gate(repo, contract, candidate)
    assert verdict.codes == [integrator.Code.PATH_NOT_OWNED]
    with pytest.raises(integrator.UsageError):
        integrator.gate(repo, tmp_path / "missing.json", candidate)
    with pytest.raises(integrator.ClaimConflictError):
        integrator.issue(repo, integrator.IssueRequest(task_id="other", paths=("billing/x/**",)))


def _modules_loaded(args: list[str], stdin: bytes = b"") -> set[str]:
    """The top-level modules a real `python -m integrator ARGS` process has imported."""
    probe = (
        "import runpy, sys\n"
        f"sys.argv = ['integrator', *{args!r}]\n"
        "try:\n    runpy.run_module('integrator', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "sys.stderr.write('\\nMODULES ' + ' '.join(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], input=stdin, capture_output=True, check=False
    )
    marker = proc.stderr.rpartition(b"\nMODULES ")[2]
    return set(marker.decode().split())


def test_the_package_import_is_light() -> None:
    """`import integrator` and `integrator.gate` work from a fresh interpreter."""
    proc = subprocess.run(
        [sys.executable, "-c", "import integrator, sys; print(integrator.gate.__name__)"],
        capture_output=True,
        check=True,
    )
    assert proc.stdout.decode().strip() == "gate"


@pytest.mark.parametrize(
    ("args", "stdin"),
    [
        (["submit", "--help"], b""),
        (["guard"], b"{}"),
        (["guard"], b'{"hook_event_name": "PreToolUse", "tool_name": "Read", "tool_input": {}}'),
    ],
)
def test_agent_commands_do_not_load_libgit2(args: list[str], stdin: bytes) -> None:
    """The commands agents run in tight loops start without importing pygit2."""
    loaded = _modules_loaded(args, stdin)
    assert "integrator" in loaded
    assert "pygit2" not in loaded
