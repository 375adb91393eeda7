"""The policy's `[limits]`: each limit on contracts and expansion requests, raised or lowered
up to its ceiling, is in the policy digest and is what contracts are admitted under."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from integrator import paths
from integrator.documents import envelope
from integrator.documents.bounds import CEILING_LIMITS, DEFAULT_LIMITS, KEYS, ContractLimits
from integrator.documents.contract import parse_contract
from integrator.documents.expansion import parse_request
from integrator.documents.policy import default_policy_text, parse_policy, policy_digest
from integrator.errors import ConfigurationError, ContractError, UsageError
from integrator.limits import (
    BUNDLE_NAME_CHARS,
    CEILINGS,
    MAX_ID_CHARS,
    SUBMISSION_BYTES,
    SUBMITTER_HOST_CHARS,
    SUBMITTER_REPO_CHARS,
    SUBMITTER_USER_CHARS,
)
from integrator.records.contract_views import expand_contract
from tests.canon import make_canon
from tests.factories import contract_doc


def _policy(extra: str) -> str:
    return default_policy_text() + f"\n[limits]\n{extra}\n"


def test_the_default_values_keep_the_digest_and_any_change_moves_it() -> None:
    """`[limits]` at the default values digests as a policy without it (every digest before
    the section stays); each key set otherwise gives its own digest."""
    plain = policy_digest(parse_policy(default_policy_text()), 4)
    before = "sha256:f409ed9e46d35e38e0efe17cfe108072dc5329a2911ceb4b5606086817c95526"
    assert policy_digest(parse_policy(default_policy_text()), 1) == before  # as before [limits]
    defaults = "\n".join(f"{key} = {getattr(DEFAULT_LIMITS, key)}" for key in KEYS)
    assert policy_digest(parse_policy(_policy(defaults)), 4) == plain
    seen = {plain}
    for key in KEYS:
        for value in (getattr(DEFAULT_LIMITS, key) + 1, CEILINGS[key]):
            digest = policy_digest(parse_policy(_policy(f"{key} = {value}")), 4)
            assert digest not in seen, (key, value)
            seen.add(digest)


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ("max_globs = 20001", "limits.max_globs = 20001 is above its ceiling of 20000"),
        ("max_resources = 1025", "limits.max_resources = 1025 is above its ceiling of 1024"),
        ("max_glob_length = 8193", "limits.max_glob_length = 8193 is above its ceiling of 8192"),
        ("contract_bytes = 917505", "limits.contract_bytes = 917505 is above its ceiling of 9175"),
        ("expansion_bytes = 917505", "limits.expansion_bytes = 917505 is above its ceiling"),
        ("max_globs = 0", "limits.max_globs = 0 is below its floor of 1"),
        ("contract_bytes = 100", "limits.contract_bytes = 100 is below its floor of 1024"),
        ("max_globs = true", "limits.max_globs: Input should be a valid integer"),
        ("max_globs = 5000.0", "limits.max_globs: Input should be a valid integer"),
        ("paths = 10", "unknown key 'paths'; [limits] sets contract_bytes, max_globs"),
        ("submission_bytes = 2097152", "submission_bytes is fixed"),
        ("policy_bytes = 1", "policy_bytes is fixed"),
    ],
)
def test_a_limit_the_policy_cannot_set_is_a_configuration_error(extra: str, said: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        parse_policy(_policy(extra), source="p.toml")
    assert said in str(refused.value)
    assert str(refused.value).startswith("p.toml: invalid policy: limits")


def test_every_ceiling_and_floor_is_admitted() -> None:
    """Each key at its ceiling, and a lowered one, is a policy; its limits are what it says."""
    at_ceilings = "\n".join(f"{key} = {CEILINGS[key]}" for key in KEYS)
    assert parse_policy(_policy(at_ceilings)).contract_limits == CEILING_LIMITS
    lowered = parse_policy(_policy("max_globs = 10\nmax_resources = 0"))
    assert lowered.contract_limits == ContractLimits(max_globs=10, max_resources=0)


def _data(**overrides: Any) -> bytes:
    return json.dumps(contract_doc(**overrides)).encode()


@pytest.mark.parametrize(
    ("key", "raised", "overrides", "said"),
    [
        ("max_globs", 6000, {"paths": [f"p/{i}" for i in range(6000)]}, "at most 5000 patterns"),
        ("max_globs", 6000, {"deny": [f"d/{i}" for i in range(5001)]}, "at most 5000 patterns"),
        ("max_resources", 300, {"resources": [f"api:r{i}" for i in range(300)]},
         "at most 256 resources"),
        ("max_glob_length", 2048, {"paths": ["src/" + "a" * 2000]},
         "pattern 0 is 2004 characters, more than 1024"),
        ("contract_bytes", 600 << 10, {"paths": [f"p/{i:0100d}" for i in range(5000)]},
         "more than the limit of 524288"),
    ],
)  # fmt: skip
def test_a_contract_past_a_default_limit_is_admitted_under_a_raised_one(
    key: str, raised: int, overrides: dict[str, Any], said: str
) -> None:
    """Refused at the default naming the key; admitted when the policy raises it; refused
    again when the policy lowers it, naming the policy's value."""
    data = _data(**overrides)
    with pytest.raises(ContractError) as refused:
        parse_contract(data)
    assert said in str(refused.value) and f"limits.{key}, the default" in str(refused.value)
    policy = parse_policy(_policy(f"{key} = {raised}"))
    assert parse_contract(data, limits=policy.contract_limits).wire()
    lowered = parse_policy(_policy(f"{key} = {1024 if key == 'contract_bytes' else 1}"))
    with pytest.raises(ContractError, match=f"limits.{key} of the policy"):
        parse_contract(data, limits=lowered.contract_limits)


def test_a_list_past_its_limit_costs_its_length_not_a_check_of_each_glob(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Past max_globs the contract is refused before any of its globs is looked at."""
    checked: list[str] = []
    real = paths.glob_problem

    def counting(pattern: str) -> str | None:
        checked.append(pattern)
        return real(pattern)

    monkeypatch.setattr(paths, "glob_problem", counting)
    with pytest.raises(ContractError, match="at most 5000 patterns"):
        parse_contract(_data(paths=[f"q/{i}" for i in range(5001)]))
    assert checked == []


def test_a_contract_at_every_ceiling_as_issued_fits_a_submission() -> None:
    """The guarantee the ceilings keep: a contract with 20,000 globs in `paths` and in
    `deny`, 1,024 resources and 896 KiB written as `contract issue` writes it (to_json)
    still fits `submission.json` (SUBMISSION_BYTES, fixed) with the largest envelope."""
    n = CEILING_LIMITS.max_globs
    doc = contract_doc(
        paths=[f"p{i}" for i in range(n)],
        deny=[f"d{i}" for i in range(n)],
        resources=[f"api:r{i}" for i in range(CEILING_LIMITS.max_resources)],
        taskId="t" * MAX_ID_CHARS,
        attemptId="a" * MAX_ID_CHARS,
        worktreeId="w" * 200,
        lease={"holder": "h" * 200, "expiresAt": "2026-06-01T13:00:00Z"},
    )
    size = len(parse_contract(json.dumps(doc), limits=CEILING_LIMITS).to_json().encode())
    room, index = CEILING_LIMITS.contract_bytes - size, 0
    while room > 0:  # lengthen globs until the document is at its ceiling
        grow = min(room, CEILING_LIMITS.max_glob_length - len(doc["paths"][index]))
        doc["paths"][index] += "x" * grow
        room, index = room - grow, index + 1
    contract = parse_contract(json.dumps(doc), limits=CEILING_LIMITS)
    assert len(contract.to_json().encode()) == CEILING_LIMITS.contract_bytes
    who = envelope.submitter(
        "u" * SUBMITTER_USER_CHARS, "h" * SUBMITTER_HOST_CHARS, 2**31, "r" * SUBMITTER_REPO_CHARS
    )
    bundle = "b" * BUNDLE_NAME_CHARS + ".bundle"
    data = envelope.submission_json(
        contract.wire(), "c" * 64, who, datetime.now(UTC), bundle=bundle, urgent=True
    )
    assert len(data) <= SUBMISSION_BYTES


def _request(contract: dict[str, Any], tree: str, add: list[str]) -> bytes:
    return json.dumps(
        {
            "schema": "integrator.expansion.v1",
            "taskId": contract["taskId"],
            "contractDigest": "sha256:" + "a" * 64,
            "expectedGeneration": contract["ownershipGeneration"],
            "treeDigest": "sha256:" + "a" * 64,
            "diffDigest": "sha256:" + "b" * 64,
            "addPaths": add,
            "workspaceTree": tree,
        }
    ).encode()


def test_an_expansion_request_is_read_under_the_policy_in_force(tmp_path: Path) -> None:
    """`contract expand` reads the request under the repository's `[limits]`: 5,500 added
    paths in 100 KiB pass `max_globs = 6000` and `expansion_bytes = 131072`; the default
    limits refuse the same request by its size, then by its count."""
    adds = [f"docs/page_{i:05d}.md" for i in range(5500)]
    raised = _policy("max_globs = 6000\nexpansion_bytes = 131072")
    canon = make_canon(tmp_path, policy=raised)
    contract = canon.issue("billing", ["billing/**"])
    request = json.loads(_request(contract.wire(), canon.tree_of("main"), adds))
    request["contractDigest"] = contract.digest
    data = json.dumps(request).encode()
    assert 64 << 10 < len(data) < 128 << 10
    expanded = expand_contract(canon.path, data)
    assert expanded.ownership_generation == 2 and len(expanded.paths) == 5501
    with pytest.raises(UsageError, match=r"more than 65536 bytes \(limits.expansion_bytes"):
        parse_request(data)
    bigger = ContractLimits(expansion_bytes=128 << 10)
    with pytest.raises(UsageError, match=r"at most 5000 patterns \(limits.max_globs, the default"):
        parse_request(data, limits=bigger)


@pytest.mark.parametrize(
    ("extra", "refused"),
    [
        ("", r"more than 65536 bytes \(limits.expansion_bytes, the default"),
        ("expansion_bytes = 262144", r"at most 5000 patterns \(limits.max_globs, the default"),
        ("expansion_bytes = 262144\nmax_globs = 6000", None),
    ],
)
def test_a_filed_expansion_request_is_held_to_the_policy_in_force(
    tmp_path: Path, extra: str, refused: str | None
) -> None:
    """An agent's filed request (`request-expansion --send`, MCP) meets the limits a request
    file handed to `contract expand` meets, measured as it is stored: 5,001 added paths are
    refused by size, then by count, and filed for the coordinator once both are raised."""
    from integrator.documents.expansion import ExpansionRequest
    from integrator.records.expansions import ExpansionEntry, Expansions

    canon = make_canon(tmp_path, policy=_policy(extra) if extra else None)
    contract = canon.issue("billing", ["billing/**"])
    adds = [f"docs/page_{i:05d}.md" for i in range(5001)]
    request = json.loads(_request(contract.wire(), canon.tree_of("main"), adds))
    request["contractDigest"] = contract.digest
    parsed = ExpansionRequest.model_validate_json(json.dumps(request))  # the model's bounds
    with canon.open() as canonical:
        if refused is not None:
            with pytest.raises(UsageError, match=refused):
                Expansions(canonical).file(parsed)
            return
        filed = Expansions(canonical).file(parsed)
    assert isinstance(filed, ExpansionEntry)  # recorded, waiting for the coordinator
    assert filed.record.state == "pending"
