"""Attempt keys: what a signature binds, and key files no one else may read."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from integrator.documents.attempt_key import (
    AttemptKeyError,
    new_key,
    parse_key,
    signature_problem,
    signed_message,
    verify,
)
from integrator.errors import ConfigurationError
from integrator.store.keys import KeyStore, read_key_file, write_key

DIGEST = "sha256:" + "ab" * 32
SID = "20261201T000000000000Z-0000abcd"
CANDIDATE = "cd" * 20
FIELDS = {
    "task": "t1",
    "attempt": "t1-a",
    "generation": 3,
    "contract": DIGEST,
    "submission": SID,
    "candidate": CANDIDATE,
}


def _problem(issued: str | None, signature: dict[str, str] | None, **changed: object) -> str | None:
    fields = {**FIELDS, **changed}
    return signature_problem(
        issued=issued,
        signature=signature,
        sid=str(fields["submission"]),
        task=str(fields["task"]),
        attempt=str(fields["attempt"]),
        generation=int(str(fields["generation"])),
        contract=str(fields["contract"]),
        candidate=str(fields["candidate"]),
    )


def test_a_signature_verifies_for_exactly_what_it_signed() -> None:
    key = new_key("t1", "t1-a", 3, DIGEST)
    signature = key.signature(SID, CANDIDATE)
    assert _problem(key.public, signature) is None
    assert _problem(None, None) is None  # a contract issued before keys: nothing to check
    unsigned = _problem(key.public, None)
    assert unsigned is not None and "not signed" in unsigned


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("task", "t2"),
        ("attempt", "t1-b"),
        ("generation", 4),
        ("contract", "sha256:" + "00" * 32),
        ("candidate", "ef" * 20),
    ],
)
def test_every_field_is_bound(field: str, value: object) -> None:
    """A signature over one submission says nothing about another task, attempt,
    generation, contract or candidate."""
    key = new_key("t1", "t1-a", 3, DIGEST)
    problem = _problem(key.public, key.signature(SID, CANDIDATE), **{field: value})
    assert problem is not None and "not by the attempt key" in problem


def test_a_signature_moved_to_another_id_is_refused() -> None:
    key = new_key("t1", "t1-a", 3, DIGEST)
    signature = key.signature(SID, CANDIDATE)
    problem = _problem(key.public, signature, submission="20261201T000000000001Z-00000001")
    assert problem is not None and "another submission id" in problem


def test_another_keys_signature_over_the_right_fields_is_refused() -> None:
    """The attacker's own (valid) key, signing the victim's fields."""
    victim = new_key("t1", "t1-a", 3, DIGEST)
    attacker = new_key("t1", "t1-a", 3, DIGEST)  # same fields, another key pair
    forged = attacker.signature(SID, CANDIDATE)
    assert _problem(victim.public, forged) is not None
    # ... and a document naming the victim's key but carrying the attacker's signature.
    assert _problem(victim.public, {**forged, "key": victim.public}) is not None


@given(st.text(max_size=120), st.text(max_size=120))
def test_garbage_keys_and_signatures_never_verify(public: str, value: str) -> None:
    message = signed_message(
        task="t", attempt="a", generation=1, contract=DIGEST, submission=SID, candidate=CANDIDATE
    )
    assert verify(public, message, value) is False
    assert verify("ed25519:" + public, message, value) is False


def test_a_line_break_cannot_shift_fields() -> None:
    with pytest.raises(AttemptKeyError):
        signed_message(
            task="t\ncandidate x", attempt="a", generation=1, contract=DIGEST,
            submission=SID, candidate=CANDIDATE,
        )  # fmt: skip


def test_key_documents_round_trip_and_refuse_mismatched_halves() -> None:
    key = new_key("t1", "t1-a", 3, DIGEST)
    assert parse_key(key.to_bytes()) == key
    other = new_key("t1", "t1-a", 3, DIGEST)
    doc = json.loads(key.to_bytes())
    doc["public"] = other.public
    with pytest.raises(AttemptKeyError, match="other half"):
        parse_key(json.dumps(doc).encode())
    with pytest.raises(AttemptKeyError, match="at most"):
        parse_key(b" " * 5000)
    for field in ("taskId", "generation", "private"):
        broken = json.loads(key.to_bytes())
        broken[field] = None
        with pytest.raises(AttemptKeyError):
            parse_key(json.dumps(broken).encode())


def test_key_files_are_private_and_never_read_through_a_link(tmp_path: Path) -> None:
    key = new_key("t1", "t1-a", 3, DIGEST)
    store = KeyStore(tmp_path / "store")
    path = store.save(key)
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert os.stat(path.parent).st_mode & 0o777 == 0o700
    assert store.load("t1", "t1-a", 3) == key
    assert store.load("t1", "t1-a", 4) is None
    os.chmod(path, 0o640)
    with pytest.raises(ConfigurationError, match="readable by others"):
        read_key_file(path)
    link = tmp_path / "link.key"
    target = write_key(tmp_path / "real.key", key)
    link.symlink_to(target)
    with pytest.raises(ConfigurationError, match="cannot open"):
        read_key_file(link)
    with pytest.raises(ConfigurationError, match="cannot name a key file"):
        store.load("../escape", "a", 1)
    pipe = tmp_path / "pipe.key"
    os.mkfifo(pipe, 0o600)  # planted where a key is looked for: refused, never waited on
    with pytest.raises(ConfigurationError, match="not a regular file"):
        read_key_file(pipe)
