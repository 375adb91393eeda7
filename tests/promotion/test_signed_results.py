"""Validation results are authority records: a passing result no trusted authority key
signed is not believed by a promoter of a repository that trusts such keys — it runs the
validation itself — while a repository that trusts none believes it (which is why a
server that cannot guard its refs needs the keys: docs/security.md, "Authority keys")."""

from __future__ import annotations

import subprocess

import pytest

from integrator.documents.promotion import ValidationResult
from integrator.records import verdict_keys
from integrator.records.validations import validation_ref
from tests.gitutil import git
from tests.promotion_world import PromotionWorld, now

QUEUE = "refs/integrator/queue/main"


def _forge_pass(world: PromotionWorld, head: str) -> None:
    """Record a final passing result for `head` that no promoter wrote."""
    tree = git("rev-parse", f"{head}^{{tree}}", cwd=world.repo)
    base = git("rev-parse", "refs/heads/main", cwd=world.repo)
    result = ValidationResult(target="main", head=head, tree=tree, base=base, status="pass",
                              final=True, attempt=1, at=now())  # fmt: skip
    blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=world.repo, check=True,
                          input=result.to_json().encode() + b"\n",
                          capture_output=True).stdout.decode().strip()  # fmt: skip
    listing = f"100644 blob {blob}\tresult.json\n".encode()
    commit = git("commit-tree", git("mktree", cwd=world.repo, input=listing), "-m", "pass",
                 cwd=world.repo)  # fmt: skip
    git("update-ref", validation_ref("main", head), commit, cwd=world.repo)


@pytest.mark.parametrize("keyed", [True, False], ids=["keys-trusted", "no-keys"])
def test_a_forged_passing_result_is_believed_only_without_keys(
    promotion: PromotionWorld, keyed: bool
) -> None:
    world = promotion
    if keyed:
        key = world.tmp / "authority.key"
        verdict_keys.configure(world.repo / ".git", key, [], verdict_keys.AUTHORITY)
    world.set_policy(world.command())  # signed where there is a key
    world.submit("t0", broken=True)
    served = world.serve_once("--no-promote")
    assert served.proc.returncode == 0, served.text()
    head = git("rev-parse", QUEUE, cwd=world.repo)
    before = git("rev-parse", "refs/heads/main", cwd=world.repo)
    assert head != before
    _forge_pass(world, head)
    promoted = world.promote_once()
    assert promoted.proc.returncode == 0, promoted.text()
    target = git("rev-parse", "refs/heads/main", cwd=world.repo)
    if keyed:  # not believed: the promoter ran the check itself, and ejected the culprit
        assert target == before
        assert [result for _, result in world.runs()] == ["fail"]
        assert git("rev-parse", QUEUE, cwd=world.repo) == before
    else:  # believed: the culprit is on the target without a run
        assert target == head
        assert world.runs() == []


def test_a_genuine_result_moved_to_another_key_or_scope_is_none(promotion: PromotionWorld) -> None:
    """A signed result is a result only where it was recorded: a genuine pass of one tree
    pointed at by another tree's cache entry is no cache hit (the broken head is validated,
    and ejected), and one scope's result at another scope's ref is no result."""
    from integrator.records.canonical import Canonical
    from integrator.records.validation_cache import cache_prefix, key_of
    from integrator.records.validations import latest, write_result

    world = promotion
    verdict_keys.configure(world.repo / ".git", world.tmp / "authority.key", [],
                           verdict_keys.AUTHORITY)  # fmt: skip
    world.set_policy(world.command())
    world.submit("t0")
    assert world.serve_once("--no-promote").proc.returncode == 0
    assert world.promote_once().proc.returncode == 0
    promoted = git("rev-parse", "refs/heads/main", cwd=world.repo)
    (genuine,) = git("for-each-ref", "--format=%(objectname)", cache_prefix("main"),
                     cwd=world.repo).split()  # fmt: skip
    world.submit("t1", broken=True)
    assert world.serve_once("--no-promote").proc.returncode == 0
    head = git("rev-parse", QUEUE, cwd=world.repo)
    with Canonical(world.repo) as canonical:
        config = canonical.policy_state().policy.validation
        assert config is not None
        tree = git("rev-parse", f"{head}^{{tree}}", cwd=world.repo)
        key = key_of(tree, None, config.command, config.toolchain)
    git("update-ref", cache_prefix("main") + key, genuine, cwd=world.repo)
    assert world.promote_once().proc.returncode == 0
    assert git("rev-parse", "refs/heads/main", cwd=world.repo) == promoted
    assert [r for _, r in world.runs()] == ["pass", "fail"]

    with Canonical(world.repo) as canonical:
        result = ValidationResult(target="main", head=head, tree=tree, base=promoted,
                                  status="pass", final=True, attempt=1, at=now(), scope="docs")  # fmt: skip
        commit = write_result(canonical, result, None)
    for scope in ("docs", "core"):
        git("update-ref", validation_ref("main", head, scope), commit, cwd=world.repo)
    git("update-ref", validation_ref("main", head), commit, cwd=world.repo)
    with Canonical(world.repo) as canonical:
        assert latest(canonical, "main", head, "docs") == (commit, result)
        assert latest(canonical, "main", head, "core") is None
        assert latest(canonical, "main", head) is None
