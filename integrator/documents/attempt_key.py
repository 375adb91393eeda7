"""Attempt keys: the secret only an attempt's holder gets, and the signature it puts on a
submission (docs/security.md, "Identity").

Issuing a contract also makes an Ed25519 key pair. The public half goes into the claim
(`claim.json` `attemptKey`, written by integrator on the authority ref); the private half
goes to whoever the coordinator hands the contract to, in a key file (`integrator.
attempt-key.v1`, mode 0600). A submission carries a signature by that key over what makes
it one submission — task, attempt, generation, contract digest, submission id and
candidate — so a contract someone else read, or a submission id someone else saw, is no
longer enough to submit: the daemon checks the signature against the key the claim
recorded for that very contract before it does any work.

Keys are made and checked by the `cryptography` package; nothing here is hand-written
cryptography. The module imports it only when a key is made, used or checked, so reading a
claim stays cheap.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from integrator import jsontext
from integrator.limits import MAX_VERDICT_KEYS

KEY_SCHEMA = "integrator.attempt-key.v1"
SIGNATURE_SCHEMA = "integrator.submission-signature.v1"
PUBLIC_PREFIX = "ed25519:"
# 32 bytes of key, 64 of signature, in standard base64 (with padding).
PUBLIC_RE = re.compile(r"^ed25519:[A-Za-z0-9+/]{43}=$")
SIGNATURE_RE = re.compile(r"^[A-Za-z0-9+/]{86}==$")
KEY_FILE_BYTES = 4096  # an attempt key file is a few hundred bytes


class AttemptKeyError(ValueError):
    """A key file or signature that is not one (its message says what is wrong)."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str, size: int, what: str) -> bytes:
    try:
        raw = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as err:
        raise AttemptKeyError(f"{what} is not base64") from err
    if len(raw) != size:
        raise AttemptKeyError(f"{what} is {len(raw)} bytes, not {size}")
    return raw


def signed_message(
    *, task: str, attempt: str, generation: int, contract: str, submission: str, candidate: str
) -> bytes:
    """The bytes an attempt key signs for one submission: every field that makes it this
    submission, one per line (none of them may hold a line break: ids are ref name
    components, the digest and candidate are hex)."""
    fields = {
        "task": task,
        "attempt": attempt,
        "generation": str(generation),
        "contract": contract,
        "submission": submission,
        "candidate": candidate,
    }
    for name, value in fields.items():
        if "\n" in value or "\r" in value:
            raise AttemptKeyError(f"{name} holds a line break")
    lines = [SIGNATURE_SCHEMA] + [f"{name} {value}" for name, value in fields.items()]
    return ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape")


@dataclass(frozen=True)
class AttemptKey:
    """The private half of one attempt's key, and what it was issued for."""

    task_id: str
    attempt_id: str
    generation: int
    contract_digest: str
    private: bytes  # the 32-byte Ed25519 seed
    public: str  # ed25519:<base64>
    # The integrators' verdict keys its holder trusts (`verdict_key`): the coordinator's.
    verdict_keys: tuple[str, ...] = ()

    def sign(self, message: bytes) -> str:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        return _b64(Ed25519PrivateKey.from_private_bytes(self.private).sign(message))

    def signature(self, submission: str, candidate: str) -> dict[str, str]:
        """The `signature` object of a submission document with id `submission`."""
        message = signed_message(
            task=self.task_id,
            attempt=self.attempt_id,
            generation=self.generation,
            contract=self.contract_digest,
            submission=submission,
            candidate=candidate,
        )
        return {"submission": submission, "key": self.public, "value": self.sign(message)}

    def document(self) -> dict[str, Any]:
        return {
            "schema": KEY_SCHEMA,
            "taskId": self.task_id,
            "attemptId": self.attempt_id,
            "generation": self.generation,
            "contractDigest": self.contract_digest,
            "public": self.public,
            "private": _b64(self.private),
        } | ({"verdictKeys": list(self.verdict_keys)} if self.verdict_keys else {})

    def to_bytes(self) -> bytes:
        return json.dumps(self.document(), indent=2).encode() + b"\n"


def new_key(
    task_id: str,
    attempt_id: str,
    generation: int,
    contract_digest: str,
    *,
    verdict_keys: tuple[str, ...] = (),
) -> AttemptKey:
    """A fresh key pair for the contract `contract_digest` of (task, attempt, generation)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    seed = key.private_bytes(
        serialization.Encoding.Raw,
        serialization.PrivateFormat.Raw,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    return AttemptKey(
        task_id, attempt_id, generation, contract_digest, seed, PUBLIC_PREFIX + _b64(public),
        verdict_keys,
    )  # fmt: skip


def key_document(data: bytes, schema: str, what: str, limit: int) -> dict[str, Any]:
    """The JSON object of a key file of `schema` (at most `limit` bytes), or AttemptKeyError
    saying why it is not one."""
    if len(data) > limit:
        raise AttemptKeyError(f"{what} is at most {limit} bytes")
    try:
        doc = jsontext.loads(data)
    except ValueError as err:
        raise AttemptKeyError(f"not a JSON document: {err}") from err
    if not isinstance(doc, dict) or doc.get("schema") != schema:
        raise AttemptKeyError(f"not an {schema} document")
    return doc


def parse_key(data: bytes) -> AttemptKey:
    """An `integrator.attempt-key.v1` document; AttemptKeyError says what is wrong with it. The
    private half must be the public half's: a file with a mismatched pair is refused."""
    doc = key_document(data, KEY_SCHEMA, "an attempt key file", KEY_FILE_BYTES)
    strings = {}
    for name in ("taskId", "attemptId", "contractDigest", "public", "private"):
        value = doc.get(name)
        if not isinstance(value, str):
            raise AttemptKeyError(f"{name} is not a string")
        strings[name] = value
    generation = doc.get("generation")
    if type(generation) is not int or generation < 1:
        raise AttemptKeyError("generation is not a positive integer")
    if not PUBLIC_RE.match(strings["public"]):
        raise AttemptKeyError("public is not ed25519:<base64 of 32 bytes>")
    seed = _unb64(strings["private"], 32, "private")
    trusted = doc.get("verdictKeys", [])
    if (
        not isinstance(trusted, list)
        or len(trusted) > MAX_VERDICT_KEYS
        or not all(isinstance(k, str) and PUBLIC_RE.match(k) for k in trusted)
    ):
        raise AttemptKeyError(
            f"verdictKeys is not a list of at most {MAX_VERDICT_KEYS} ed25519:<base64> keys"
        )
    key = AttemptKey(
        strings["taskId"], strings["attemptId"], generation, strings["contractDigest"],
        seed, strings["public"], tuple(trusted),
    )  # fmt: skip
    if public_of(seed) != key.public:
        raise AttemptKeyError("the private key is not the public key's other half")
    return key


def public_of(seed: bytes) -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    public = Ed25519PrivateKey.from_private_bytes(seed).public_key()
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return PUBLIC_PREFIX + _b64(raw)


def verify(public: str, message: bytes, value: str) -> bool:
    """Whether `value` is the signature of `message` by the key `public` (ed25519:…).
    Malformed keys and signatures are simply not valid signatures."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    if not PUBLIC_RE.match(public) or not SIGNATURE_RE.match(value):
        return False
    try:
        raw_key = _unb64(public.removeprefix(PUBLIC_PREFIX), 32, "key")
        raw_sig = _unb64(value, 64, "signature")
        Ed25519PublicKey.from_public_bytes(raw_key).verify(raw_sig, message)
    except (AttemptKeyError, InvalidSignature, ValueError):
        return False
    return True


def signature_problem(
    *,
    issued: str | None,
    signature: Mapping[str, object] | None,
    sid: str,
    task: str,
    attempt: str,
    generation: int,
    contract: str,
    candidate: str,
) -> str | None:
    """Why the submission `sid` may not be decided on behalf of the attempt whose contract it
    carries, None when it may: `issued` is the public key the claim recorded for that
    contract (None: issued before attempt keys, nothing to check), `signature` the
    submission's. The reason is the submitter's to act on (a REJECTED submission)."""
    if issued is None:
        return None
    if signature is None:
        return (
            f"the submission is not signed: the claim of task {task!r} issued this contract "
            "with an attempt key, and only its holder may submit under it (integrator submit "
            "signs with the key the coordinator issued: pass --key FILE)"
        )
    if signature.get("submission") != sid:
        return (
            "the submission's signature was made for another submission id: a signed "
            "document cannot be handed in again under a new id (submit again to sign anew)"
        )
    message = signed_message(
        task=task, attempt=attempt, generation=generation, contract=contract,
        submission=sid, candidate=candidate,
    )  # fmt: skip
    value = signature.get("value")
    if (
        signature.get("key") != issued
        or not isinstance(value, str)
        or not verify(issued, message, value)
    ):
        return (
            f"the submission's signature is not by the attempt key the claim of task {task!r} "
            f"recorded for attempt {attempt!r} generation {generation} (a key of another "
            "attempt, or a signature over other fields)"
        )
    return None
