"""Edit first, claim afterwards is refused: an expansion request carries the workspace's
tree and HEAD, a workspace that already changed a requested path gets nothing, and a
candidate whose history edited a granted path before the grant is fenced."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from integrator.cli import main
from integrator.documents.expansion import ExpansionRequest
from integrator.documents.verdict import Code, Decision
from integrator.errors import ReviewRequired
from integrator.fleet.expansion import build_request
from integrator.records.expansions import Expansions
from tests.canon import Canon, make_canon
from tests.gitutil import commit_files, git


@pytest.fixture
def canon(tmp_path: Path) -> Canon:
    return make_canon(tmp_path)


def _worktree(canon: Canon, tmp_path: Path, base: str) -> Path:
    path = tmp_path / "agent"
    git("worktree", "add", "-q", "--detach", str(path), base, cwd=canon.path)
    return path


def _expand(canon: Canon, request: ExpansionRequest) -> object:
    with canon.open() as canonical:
        return Expansions(canonical).expand(request)


def test_a_clean_workspace_is_granted(canon: Canon, tmp_path: Path) -> None:
    """Asking before writing: the request names the workspace's tree and HEAD; granted."""
    contract = canon.issue("billing", ["billing/**"])
    work = _worktree(canon, tmp_path, contract.base_commit)
    (work / "billing" / "invoice.py").write_text("invoice = 2\n")  # inside the contract: fine
    request = build_request(work, contract, ["docs/billing.md"])
    assert request.workspace_head == contract.base_commit
    assert request.workspace_tree is not None
    expanded = _expand(canon, request)
    assert expanded.ownership_generation == 2  # type: ignore[attr-defined]


@pytest.mark.parametrize("how", ["untracked", "staged", "committed", "committed-then-reverted"])
def test_a_workspace_that_already_wrote_the_path_gets_nothing(
    canon: Canon, tmp_path: Path, how: str
) -> None:
    """The requested path already written — untracked, staged, committed, or committed and
    reverted — routes the request to review; the claim is not changed."""
    contract = canon.issue("billing", ["billing/**"])
    work = _worktree(canon, tmp_path, contract.base_commit)
    target = work / "docs" / "billing.md"
    target.write_text("written first\n")
    if how != "untracked":
        git("add", "docs/billing.md", cwd=work)
    if how.startswith("committed"):
        git("commit", "-qm", "write first", cwd=work)
    if how == "committed-then-reverted":
        git("rm", "-q", "docs/billing.md", cwd=work)
        git("commit", "-qm", "hide it", cwd=work)
    claim_before = canon.ref("refs/integrator/claims/billing")
    with pytest.raises(ReviewRequired, match=r"already changed docs/billing\.md"):
        _expand(canon, build_request(work, contract, ["docs/billing.md"]))
    assert canon.ref("refs/integrator/claims/billing") == claim_before


def test_a_request_without_a_workspace_tree_is_never_granted(canon: Canon) -> None:
    """The old form (digests only) cannot be verified: review, nothing granted."""
    contract = canon.issue("billing", ["billing/**"])
    request = ExpansionRequest.model_validate(
        {
            "schema": "integrator.expansion.v1",
            "taskId": "billing",
            "contractDigest": contract.digest,
            "expectedGeneration": 1,
            "treeDigest": "sha256:" + "0" * 64,
            "diffDigest": "sha256:" + "0" * 64,
            "addPaths": ["docs/billing.md"],
        }
    )
    with pytest.raises(ReviewRequired, match="names no workspaceTree"):
        _expand(canon, request)


def test_request_expansion_cli_then_expand_cli(
    canon: Canon, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The agent's `contract request-expansion` writes a request `contract expand` grants
    (exit 0), and one from a dirty workspace is refused with exit 3."""
    contract = canon.issue("billing", ["billing/**"])
    bound = tmp_path / "billing.json"
    bound.write_text(contract.to_json())
    work = _worktree(canon, tmp_path, contract.base_commit)
    request = tmp_path / "request.json"
    args = ["contract", "request-expansion", "--worktree", str(work), "--contract", str(bound)]
    assert main([*args, "--add-path", "docs/billing.md", "-o", str(request)]) == 0
    assert json.loads(request.read_text())["workspaceTree"]
    (work / "auth").mkdir(exist_ok=True)
    (work / "auth" / "sso.py").write_text("sso\n")
    dirty = tmp_path / "dirty.json"
    assert main([*args, "--add-path", "auth/sso.py", "-o", str(dirty)]) == 0
    expand = ["contract", "expand", "--repo", str(canon.path), "--request"]
    assert main([*expand, str(dirty)]) == 3
    assert main([*expand, str(request), "-o", str(tmp_path / "gen2.json")]) == 0


def test_history_that_edited_a_granted_path_before_the_grant_is_fenced(
    canon: Canon, tmp_path: Path
) -> None:
    """A candidate merging a commit that changed the granted path without building on the
    workspace the grant inspected is FENCED EDIT_BEFORE_GRANT; built on it, it lands."""
    contract = canon.issue("billing", ["billing/**"])
    base = contract.base_commit
    early = commit_files(canon.path, {"docs/billing.md": "early\n"}, "early", parent=base, ref=None)
    work = _worktree(canon, tmp_path, base)
    (work / "billing" / "invoice.py").write_text("invoice = 3\n")
    git("commit", "-qam", "billing work", cwd=work)
    inspected = git("rev-parse", "HEAD", cwd=work)
    expanded = _expand(canon, build_request(work, contract, ["docs/billing.md"]))
    gen2 = expanded.to_json().encode()  # type: ignore[attr-defined]
    git("merge", "-q", "--no-edit", early, cwd=work)
    sneaky = git("rev-parse", "HEAD", cwd=work)
    fenced = canon.integrate(gen2, sneaky)
    assert fenced.decision is Decision.FENCED
    assert [(v.code, v.path) for v in fenced.violations] == [
        (Code.EDIT_BEFORE_GRANT, "docs/billing.md")
    ]
    git("reset", "-q", "--hard", inspected, cwd=work)
    (work / "docs" / "billing.md").write_text("written after the grant\n")
    git("add", "docs/billing.md", cwd=work)
    git("commit", "-qm", "docs after the grant", cwd=work)
    landed = canon.integrate(gen2, git("rev-parse", "HEAD", cwd=work))
    assert landed.decision is Decision.ACCEPTED, landed.violations
