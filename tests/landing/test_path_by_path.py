"""A 2,000-file commit claimed path by path with the default limits, through the real
`integrator` CLI: `contract issue` naming every path, and `task claim` of a task owning
every path, each gated and landed (git's own history has a 1,833-file commit;
`python -m bench.replay` replays that history itself, docs/bench.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pygit2
import pytest

from integrator.limits import MAX_GLOBS
from tests.factories import task_file
from tests.gitutil import git, make_repo, run_integrator

FILES = 2000


def _commit(repo: Path, parent: str | None, text: str, ref: str | None) -> str:
    """A commit whose tree holds pkg/module_NNNN.py (FILES of them, each `text`) and README."""
    r = pygit2.Repository(str(repo))
    builder = r.TreeBuilder()
    blob = r.create_blob(text.encode())
    for i in range(FILES):
        builder.insert(f"module_{i:04d}.py", blob, pygit2.enums.FileMode.BLOB)
    root = r.TreeBuilder()
    root.insert("pkg", builder.write(), pygit2.enums.FileMode.TREE)
    root.insert("README.md", r.create_blob(b"hello\n"), pygit2.enums.FileMode.BLOB)
    sig = pygit2.Signature("t", "t@example.invalid", 1767225600, 0)
    parents = [pygit2.Oid(hex=parent)] if parent else []
    return str(r.create_commit(ref, sig, sig, text, root.write(), parents))


def _paths() -> list[str]:
    return [f"/pkg/module_{i:04d}.py" for i in range(FILES)]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = make_repo(tmp_path / "canon")
    _commit(path, None, "x = 0\n", "refs/heads/main")
    git("reset", "-q", "--hard", cwd=path)
    done = run_integrator("init", "--repo", str(path), "--update-checkout")  # main checked out
    assert done.returncode == 0, done.stderr
    return path


def _land(repo: Path, contract: Path, candidate: str) -> dict[str, Any]:
    gated = run_integrator(
        "gate", "--repo", str(repo), "--contract", str(contract), "--candidate", candidate,
        "--json",
    )  # fmt: skip
    verdict = json.loads(gated.stdout)
    assert (gated.returncode, verdict["decision"]) == (0, "ACCEPTED"), verdict["violations"][:3]
    assert verdict["changes"] == FILES
    landed = run_integrator(
        "integrate", "--repo", str(repo), "--contract", str(contract), "--candidate", candidate,
        "--json",
    )  # fmt: skip
    assert landed.returncode == 0, landed.stdout[-2000:] + landed.stderr
    result: dict[str, Any] = json.loads(landed.stdout)
    return result


def test_contract_issue_names_two_thousand_paths_and_the_commit_lands(
    repo: Path, tmp_path: Path
) -> None:
    assert FILES < MAX_GLOBS
    contract = tmp_path / "wide.json"
    args = [arg for path in _paths() for arg in ("--path", path)]
    issued = run_integrator(
        "contract", "issue", "--repo", str(repo), "--task", "wide", "--lease", "1h",
        "-o", str(contract), *args,
    )  # fmt: skip
    assert issued.returncode == 0, issued.stderr
    doc = json.loads(contract.read_text())
    assert len(doc["paths"]) == FILES
    candidate = _commit(repo, doc["baseCommit"], "x = 1\n", None)
    verdict = _land(repo, contract, candidate)
    assert verdict["decision"] == "ACCEPTED"
    queue = git("rev-parse", "refs/integrator/queue/main", cwd=repo)
    assert git("rev-parse", f"{queue}^{{tree}}", cwd=repo) == git(
        "rev-parse", f"{candidate}^{{tree}}", cwd=repo
    )


def test_a_task_owning_two_thousand_paths_is_claimed_and_lands(repo: Path, tmp_path: Path) -> None:
    """`task claim --in-place` of a task file whose `owns` lists every path one by one."""
    task = tmp_path / "WIDE.md"
    task.write_text(task_file("WIDE", [p.lstrip("/") for p in _paths()]))
    for args in (["task", "init"], ["task", "add", str(task)]):
        done = run_integrator(*args, "--repo", str(repo))
        assert done.returncode == 0, done.stderr
    claimed = run_integrator(
        "task", "claim", "--repo", str(repo), "--in-place", "--json", "--agent", "a1",
        "--lease", "1h",
    )  # fmt: skip
    assert claimed.returncode == 0, claimed.stderr
    doc = json.loads(claimed.stdout)["contract"]
    assert len(doc["paths"]) == FILES
    contract = tmp_path / "task.json"
    contract.write_text(json.dumps(doc))
    candidate = _commit(repo, doc["baseCommit"], "x = 2\n", None)
    assert _land(repo, contract, candidate)["decision"] == "ACCEPTED"
