"""Verdict keys: integrator's signature on every verdict it publishes on an intake, so a
verdict ref someone else wrote there is never believed (docs/security.md, "Identity").

An intake that cannot protect `refs/integrator/verdicts/*` (GitHub, a plain repository)
lets any writer put a verdict there before the daemon decides. So each daemon that has a
verdict key (`integrator.verdict-key.v1`, mode 0600, named by the mirror's
`integrator.verdictKeyFile`) adds `verdict.sig` beside the document it publishes: an
Ed25519 signature over the task, the submission id, the document's name and its SHA-256.
Readers trust the public keys they were given out of band — the coordinator writes its
`integrator.trustedVerdictKey` values into every attempt key file it hands out, and
`submit`/`sync` keep them in the clone's config — and, once they have any, believe no
verdict that is not signed by one of them.

Signing and checking use the `cryptography` package (through `attempt_key`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from integrator import jsontext
from integrator.documents.attempt_key import (
    PUBLIC_RE,
    AttemptKeyError,
    _b64,
    _unb64,
    key_document,
    public_of,
    verify,
)
from integrator.limits import VERDICT_SIGNATURE_BYTES

KEY_SCHEMA = "integrator.verdict-key.v1"
SIGNATURE_SCHEMA = "integrator.verdict-signature.v1"
SIGNATURE_FILE = "verdict.sig"  # beside verdict.json or rejection.json in a verdict commit
KEY_FILE_BYTES = 4096
TRUSTED_CONFIG = "integrator.trustedVerdictKey"  # multi-valued: ed25519:<base64>
KEY_FILE_CONFIG = "integrator.verdictKeyFile"  # the daemon's private verdict key
TRUSTED_ENV = "INTEGRATOR_VERDICT_KEYS"  # comma-separated public keys a reader trusts

__all__ = [
    "KEY_FILE_CONFIG", "SIGNATURE_FILE", "TRUSTED_CONFIG", "TRUSTED_ENV", "VerdictKey",
    "new_verdict_key", "parse_verdict_key", "signature_problem", "trusted_keys",
]  # fmt: skip


def signed_message(task: str, submission: str, name: str, document: bytes) -> bytes:
    """What a verdict key signs: the submission it answers and the document's digest."""
    for what, value in (("task", task), ("submission", submission), ("name", name)):
        if "\n" in value or "\r" in value:
            raise AttemptKeyError(f"{what} holds a line break")
    digest = "sha256:" + hashlib.sha256(document).hexdigest()
    lines = [SIGNATURE_SCHEMA, f"task {task}", f"submission {submission}", f"name {name}",
             f"document {digest}"]  # fmt: skip
    return ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape")


@dataclass(frozen=True)
class VerdictKey:
    """A private signing key: a daemon's verdict key, or an authority key
    (`authority_key`); the two differ only in their file's schema."""

    private: bytes  # the 32-byte Ed25519 seed
    public: str  # ed25519:<base64>
    schema: str = KEY_SCHEMA

    def sign_bytes(self, message: bytes) -> str:
        """The base64 Ed25519 signature of `message`."""
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        return _b64(Ed25519PrivateKey.from_private_bytes(self.private).sign(message))

    def sign(self, task: str, submission: str, name: str, document: bytes) -> bytes:
        """The `verdict.sig` document for `document` (named `name`) of that submission."""
        value = self.sign_bytes(signed_message(task, submission, name, document))
        doc = {"schema": SIGNATURE_SCHEMA, "key": self.public, "value": value}
        return json.dumps(doc).encode() + b"\n"

    def to_bytes(self) -> bytes:
        doc = {"schema": self.schema, "public": self.public, "private": _b64(self.private)}
        return json.dumps(doc, indent=2).encode() + b"\n"


def new_verdict_key(schema: str = KEY_SCHEMA) -> VerdictKey:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    seed = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    return VerdictKey(seed, public_of(seed), schema)


def parse_verdict_key(data: bytes, schema: str = KEY_SCHEMA) -> VerdictKey:
    """An `integrator.verdict-key.v1` document, or one of `schema` (AttemptKeyError says
    what is wrong)."""
    doc = key_document(data, schema, "a key file", KEY_FILE_BYTES)
    public, private = doc.get("public"), doc.get("private")
    if not isinstance(public, str) or not PUBLIC_RE.match(public):
        raise AttemptKeyError("public is not ed25519:<base64 of 32 bytes>")
    if not isinstance(private, str):
        raise AttemptKeyError("private is not a string")
    seed = _unb64(private, 32, "private")
    if public_of(seed) != public:
        raise AttemptKeyError("the private key is not the public key's other half")
    return VerdictKey(seed, public, schema)


def trusted_keys(values: list[str]) -> frozenset[str]:
    """The well-formed public keys among configured values (others are not keys)."""
    found = {v.strip() for value in values for v in value.split(",")}
    return frozenset(v for v in found if PUBLIC_RE.match(v))


def _parsed(signature: bytes) -> tuple[str, str] | str:
    """(key, value) of a `verdict.sig` document, or why it is not one."""
    if len(signature) > VERDICT_SIGNATURE_BYTES:
        return f"its verdict.sig is over {VERDICT_SIGNATURE_BYTES} bytes"
    try:
        doc: Any = jsontext.loads(signature)
    except ValueError:
        return "its verdict.sig is not JSON"
    if not isinstance(doc, dict) or doc.get("schema") != SIGNATURE_SCHEMA:
        return f"its verdict.sig is not an {SIGNATURE_SCHEMA} document"
    key, value = doc.get("key"), doc.get("value")
    if not isinstance(key, str) or not isinstance(value, str):
        return "its verdict.sig has no key and value"
    return key, value


def signature_problem(
    trusted: frozenset[str],
    signature: bytes | None,
    *,
    task: str,
    submission: str,
    name: str,
    document: bytes,
) -> str | None:
    """Why `signature` (a `verdict.sig` document, None when there is none) does not make
    `document` a verdict a trusted integrator published for this submission; None when it
    does. A signature over another submission, another document or by a key not trusted
    is no signature."""
    parsed = _parsed(signature) if signature is not None else "it is not signed (no verdict.sig)"
    if isinstance(parsed, str):
        return parsed
    key, value = parsed
    if key not in trusted:
        return "it is signed by a key this reader does not trust"
    try:
        message = signed_message(task, submission, name, document)
    except AttemptKeyError as err:
        return str(err)
    return None if verify(key, message, value) else "its signature is not valid for this verdict"
