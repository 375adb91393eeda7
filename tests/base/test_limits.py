"""Inputs an agent controls have documented limits, checked before the work they bound:
passing one is a verdict or a clear error, never a crash, and work below it stays small."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from integrator.documents.contract import OwnershipContract, parse_contract
from integrator.documents.verdict import Code, Decision
from integrator.errors import ContractError
from integrator.limits import CONTRACT_BYTES, MAX_GLOBS, MAX_TREE_DEPTH
from tests.factories import Gate, contract_doc
from tests.gitutil import commit_files, git, make_repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = make_repo(tmp_path / "repo")
    commit_files(path, {"src/a.py": "a\n"}, "base")
    return path


def _deep_tree(repo: Path, depth: int) -> str:
    """A tree `depth` folders deep with one file at the bottom, built with git mktree."""
    blob = git("hash-object", "-w", "--stdin", cwd=repo, input=b"deep\n")
    tree = git("mktree", cwd=repo, input=f"100644 blob {blob}\tf.txt\n".encode())
    for _ in range(depth):
        tree = git("mktree", cwd=repo, input=f"040000 tree {tree}\td\n".encode())
    src = git("rev-parse", "HEAD:src", cwd=repo)
    root = git(
        "mktree", cwd=repo, input=f"040000 tree {tree}\tdeep\n040000 tree {src}\tsrc\n".encode()
    )
    return git("commit-tree", root, "-p", "HEAD", "-m", "deep", cwd=repo)


@pytest.mark.parametrize("depth", [MAX_TREE_DEPTH + 5, 1100])
def test_a_tree_deeper_than_the_limit_is_unsafe_not_a_crash(repo: Path, depth: int) -> None:
    """A tree 1,100 folders deep (fsck --strict accepts it) is UNSAFE_PATH, not a
    RecursionError; it is refused past MAX_TREE_DEPTH."""
    cand = _deep_tree(repo, depth)
    git("fsck", "--strict", "--no-dangling", cwd=repo)
    verdict = Gate(repo).run(git("rev-parse", "HEAD", cwd=repo), cand, paths=["**"])
    assert verdict.decision is Decision.FENCED
    assert verdict.codes == [Code.UNSAFE_PATH]
    assert f"more than {MAX_TREE_DEPTH} folders deep" in verdict.violations[0].detail


def test_a_tree_within_the_limit_is_walked(repo: Path) -> None:
    """Just under the limit the deep file is an ordinary change."""
    cand = _deep_tree(repo, MAX_TREE_DEPTH - 2)
    verdict = Gate(repo).run(git("rev-parse", "HEAD", cwd=repo), cand, paths=["**"])
    assert verdict.decision is Decision.ACCEPTED, verdict.violations
    assert verdict.changes == 1


def _many_renames(repo: Path, n: int) -> tuple[str, str]:
    """n files deleted and n similar ones added under other names (all share common lines)."""
    common = "".join(f"shared line {i}\n" for i in range(20))
    base = commit_files(
        repo,
        {f"old/f{i}.txt": common + f"own {i}\n" for i in range(n)},
        "base",
        parent=None,
        ref=None,
    )
    edits: dict[str, object] = {f"old/f{i}.txt": None for i in range(n)}
    edits.update({f"new/g{i}.txt": common + f"own {i}\nmore {i}\n" for i in range(n)})
    cand = commit_files(repo, edits, "renamed", parent=base, ref=None)  # type: ignore[arg-type]
    return base, cand


def test_rename_naming_stays_close_to_gits_cost(repo: Path) -> None:
    """400 deleted × 400 added similar files: the gate costs about what `git diff -M` does
    (pairwise scoring took seconds here), measured in the same run; the renames are named."""
    base, cand = _many_renames(repo, 400)
    started = time.perf_counter()
    git("diff", "--name-status", "-M", base, cand, cwd=repo)
    git_seconds = time.perf_counter() - started
    gate = Gate(repo)
    started = time.perf_counter()
    verdict = gate.run(base, cand, paths=["**"], maxPatchBytes=10**9)
    ours = time.perf_counter() - started
    assert verdict.decision is Decision.ACCEPTED
    assert verdict.changes == 400  # 400 renames, each named
    assert ours < max(3.0, 15 * git_seconds), (ours, git_seconds)


def test_a_patch_over_its_limit_names_no_inexact_renames(repo: Path) -> None:
    """Over maxPatchBytes the verdict is PATCH_TOO_LARGE and no blob is read for naming."""
    base, cand = _many_renames(repo, 50)
    verdict = Gate(repo).run(base, cand, paths=["**"], maxPatchBytes=1000)
    assert verdict.codes == [Code.PATCH_TOO_LARGE]
    assert verdict.changes == 100  # 50 deletions and 50 additions, unpaired


def test_a_contract_past_its_size_is_refused_before_parsing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """80,000 globs (2.4 s to parse) are refused by size before the model sees a byte."""
    doc = contract_doc(paths=[f"p{i}/**" for i in range(80_000)])
    data = json.dumps(doc).encode()
    assert len(data) > CONTRACT_BYTES
    parsed: list[int] = []

    def recording(raw: bytes) -> object:
        parsed.append(len(raw))
        raise AssertionError("the model was asked to parse an oversized contract")

    monkeypatch.setattr(OwnershipContract, "model_validate_json", recording)
    with pytest.raises(ContractError, match="more than the limit"):
        parse_contract(data)
    assert parsed == []


def test_a_contract_with_too_many_globs_is_invalid() -> None:
    """Within the size limit, more than MAX_GLOBS patterns is CONTRACT_INVALID."""
    doc = contract_doc(paths=[f"p{i}" for i in range(MAX_GLOBS + 1)])
    with pytest.raises(ContractError, match=f"at most {MAX_GLOBS}"):
        parse_contract(json.dumps(doc).encode())


def test_a_two_thousand_file_commit_can_be_claimed_path_by_path(tmp_path: Path) -> None:
    """With the default limits a contract may name 2,000 paths one by one (a real commit of
    git's own history touches 1,833 files), and the candidate touching all of them lands."""
    from datetime import timedelta

    from integrator.landing.engine import Integrator
    from integrator.records.canonical import Canonical
    from integrator.records.claims import Claims, IssueRequest
    from tests.canon import make_canon

    files = {f"pkg/module_{i:04d}.py": "x = 0\n" for i in range(2000)}
    canon = make_canon(tmp_path, files)
    with Canonical(canon.path) as canonical:
        contract = Claims(canonical).issue(
            IssueRequest(task_id="wide", paths=tuple(files), lease=timedelta(hours=1))
        )
        candidate = commit_files(
            canon.path, dict.fromkeys(files, "x = 1\n"), "touch all",
            parent=contract.base_commit, ref=None,
        )  # fmt: skip
        verdict = Integrator(canonical).integrate(contract.to_json().encode(), candidate)
    assert len(contract.paths) == 2000
    assert verdict.decision is Decision.ACCEPTED, verdict.violations[:3]


@pytest.mark.parametrize("text", ["99999999999d", "36501d", "9999999999999999999999w"])
def test_an_absurd_duration_is_a_usage_error_not_a_traceback(text: str) -> None:
    """A lease or age past MAX_DURATION_DAYS is refused with what the limit is, in the
    parser every command and the MCP server share (it overflowed timedelta before)."""
    from integrator.clock import parse_duration
    from integrator.limits import MAX_DURATION_DAYS

    with pytest.raises(ValueError, match=f"longer than {MAX_DURATION_DAYS} days"):
        parse_duration(text)
    assert parse_duration(f"{MAX_DURATION_DAYS}d").days == MAX_DURATION_DAYS
