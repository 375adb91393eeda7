"""The guard's plain reading of a contract agrees with the contract model, and refuses
what the model refuses in the fields it reads."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from integrator.documents.bounds import CEILING_LIMITS
from integrator.documents.rules import rules_from_bytes
from integrator.errors import ContractError
from tests.factories import contract_doc, create_contract

SEGMENTS = st.sampled_from(["src", "docs", "a b", "é", "lib", "x.py", "*", "**", "*.md", "?"])
GLOBS = st.lists(SEGMENTS, min_size=1, max_size=4).map("/".join)
PATHS = st.lists(st.sampled_from(["src", "docs", "é", "lib", "x.py", "a.md", "a b"]), min_size=1,
                 max_size=4).map("/".join)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(
    allow=st.lists(GLOBS, min_size=1, max_size=4),
    deny=st.lists(GLOBS, max_size=3),
    worktree=st.one_of(st.none(), st.sampled_from(["alice", "w-2"])),
    generation=st.integers(min_value=1, max_value=2**40),
    probes=st.lists(PATHS, min_size=1, max_size=6),
)
def test_rules_digest_and_match_as_the_model_does(
    allow: list[str], deny: list[str], worktree: str | None, generation: int, probes: list[str]
) -> None:
    """For any contract the model accepts, the plain rules have the model's digest and
    allow and deny every path exactly as the model's matcher does."""
    overrides: dict[str, Any] = {"paths": allow, "deny": deny, "ownershipGeneration": generation}
    if worktree is not None:
        overrides["worktreeId"] = worktree
    try:
        model = create_contract(**overrides)
    except ContractError:
        return  # a glob the model refuses: the refusal side is pinned below
    rules = rules_from_bytes(model.to_json().encode())
    assert rules.digest == model.digest
    assert (rules.task_id, rules.worktree_id, rules.ownership_generation) == (
        model.task_id,
        model.worktree_id,
        model.ownership_generation,
    )
    for path in probes:
        assert rules.matcher().match(path) == model.matcher().match(path)


@pytest.mark.parametrize(
    "overrides",
    [
        {"schema": "coding.workspace.ownership.v2"},
        {"taskId": "a/b"},
        {"taskId": "x.lock"},
        {"taskId": 7},
        {"ownershipGeneration": True},
        {"ownershipGeneration": "1"},
        {"ownershipGeneration": 0},
        {"paths": []},
        {"paths": "src/**"},
        {"paths": ["!src/**"]},
        {"paths": ["src/../.git/config"]},
        {"paths": ["src/**"] * (CEILING_LIMITS.max_globs + 1)},  # the guard reads to the ceilings
        {"deny": [3]},
        {"deny": ["[[:alpha:]]"]},
        {"worktreeId": ""},
        {"worktreeId": ["alice"]},
    ],
)
def test_rules_refuse_what_the_model_refuses(overrides: dict[str, Any]) -> None:
    """Each field the guard reads is refused in the shapes the contract model refuses."""
    data = json.dumps(contract_doc(**overrides)).encode()
    with pytest.raises(ContractError):
        create_contract(**overrides)
    with pytest.raises(ContractError):
        rules_from_bytes(data)


@pytest.mark.parametrize(
    "data", [b"", b"[]", b"null", b"{", b"\xff\xfe", b" " * (CEILING_LIMITS.contract_bytes + 1)]
)
def test_rules_refuse_documents_that_are_no_contract(data: bytes) -> None:
    """Bytes that are not a JSON object, or past the contract size limit, are refused."""
    with pytest.raises(ContractError):
        rules_from_bytes(data)
