"""The ownership contract model: strict v1 parsing, ref-safe ids, canonical digests."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from integrator.documents.contract import parse_contract
from integrator.documents.verdict import Code, Decision, Verdict, Violation
from integrator.errors import ContractError
from integrator.refnames import refname_problem
from tests.factories import contract_doc, create_contract


def test_valid_contract_round_trips() -> None:
    """A valid document parses and its wire form parses back to an equal contract."""
    contract = create_contract()
    assert parse_contract(contract.to_json()) == contract


def test_unknown_field_is_rejected_by_name() -> None:
    """An unknown field rejects the whole contract and the error names it."""
    with pytest.raises(ContractError, match="surprise"):
        parse_contract(json.dumps(contract_doc(surprise=1)))


def test_unknown_resource_kind_is_rejected_by_name() -> None:
    """A resource kind a v1 reader does not know rejects the contract, naming the kind."""
    with pytest.raises(ContractError, match="'database'"):
        parse_contract(json.dumps(contract_doc(resources=["database:main"])))


@pytest.mark.parametrize(
    "resource",
    [
        "api:Invoice.v2",
        "schema:Event",
        "migration-slot:billing",
        "lockfile:pnpm-lock.yaml",
        "codegen:client",
        "symbol:pkg.fn",
        "submodule:vendor/lib",
        "ci:deploy",
    ],
)
def test_every_v1_resource_kind_is_accepted(resource: str) -> None:
    """The eight v1 kinds are accepted."""
    assert create_contract(resources=[resource]).resources == [resource]


@pytest.mark.parametrize(
    "bad",
    [
        "a/b",
        "",
        ".hidden",
        "x.lock",
        "a..b",
        "a b",
        "a~1",
        "a^",
        "a:b",
        "a?",
        "a*",
        "a[",
        "a\\b",
        "@",
        "a@{1",
        "end.",
    ],
)
def test_ids_must_be_one_ref_component(bad: str) -> None:
    """taskId and attemptId are refused when git check-ref-format (or '/') would refuse them."""
    assert refname_problem(bad) is not None
    with pytest.raises(ContractError, match="taskId"):
        parse_contract(json.dumps(contract_doc(taskId=bad)))


def test_negation_and_unsafe_globs_are_refused() -> None:
    """'!' patterns, '..' components and .git globs are refused in contracts."""
    for bad in ["!src/**", "../x/**", "src/.git/**", "/.GIT/config"]:
        with pytest.raises(ContractError, match="paths"):
            parse_contract(json.dumps(contract_doc(paths=[bad])))


def test_naive_lease_time_is_refused() -> None:
    """A lease time without a time zone is refused."""
    with pytest.raises(ContractError, match="expiresAt"):
        parse_contract(
            json.dumps(contract_doc(lease={"holder": "a", "expiresAt": "2026-06-01T13:00:00"}))
        )


def test_strict_types() -> None:
    """Strict parsing: a generation given as a string is refused, not coerced."""
    with pytest.raises(ContractError, match="ownershipGeneration"):
        parse_contract(json.dumps(contract_doc(ownershipGeneration="7")))


def test_digest_is_canonical() -> None:
    """The digest ignores key order and whitespace and changes with any field."""
    doc = contract_doc()
    shuffled = json.dumps(dict(reversed(list(doc.items()))), indent=4)
    a = parse_contract(json.dumps(doc))
    b = parse_contract(shuffled)
    assert a.digest == b.digest
    assert a.digest.startswith("sha256:")
    assert len(a.digest) == len("sha256:") + 64
    assert create_contract(ownershipGeneration=2).digest != a.digest


def test_digest_is_rfc8785_of_wire_form() -> None:
    """The digest is SHA-256 over the RFC 8785 form (pinned against a known value)."""
    import hashlib

    import rfc8785

    contract = create_contract()
    expected = "sha256:" + hashlib.sha256(rfc8785.dumps(contract.wire())).hexdigest()
    assert contract.digest == expected


@pytest.mark.parametrize("field", ["ownershipGeneration", "maxPatchBytes"])
def test_integers_beyond_what_json_holds_exactly_are_refused(field: str) -> None:
    """2**64 passes 'ge=1' but cannot be canonicalised (RFC 8785): CONTRACT_INVALID, not
    a crash of whoever parses it."""
    with pytest.raises(ContractError, match=field):
        parse_contract(json.dumps(contract_doc(**{field: 2**64})).encode())
    assert parse_contract(json.dumps(contract_doc(**{field: 2**53 - 1})).encode())


@settings(max_examples=300, deadline=None)
@given(
    detail=st.text(max_size=60),
    path=st.text(max_size=30),
    holder=st.text(min_size=1, max_size=20).filter(lambda s: len(s.strip()) > 0),
)
def test_to_json_writes_the_bytes_json_dumps_would(detail: str, path: str, holder: str) -> None:
    """Documents are written by pydantic's serializer: byte for byte what
    `json.dumps(wire, indent=2, ensure_ascii=False)` writes, for any text in them (control
    and format characters, non-ASCII, quotes and backslashes), so files and record blobs
    written before and after read the same."""
    contract = create_contract(lease={"holder": holder, "expiresAt": "2026-06-01T13:00:00Z"})
    verdict = Verdict(
        decision=Decision.FENCED,
        violations=[Violation(code=Code.PATH_NOT_OWNED, path=path, detail=detail)],
        task_id="t",
        attempt_id="a",
        generation=1,
        candidate="0" * 40,
        contract_digest=contract.digest,
    )
    for document in (contract, verdict):
        expected = json.dumps(document.wire(), indent=2, ensure_ascii=False)
        assert document.to_json() == expected
