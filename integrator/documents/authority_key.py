"""Authority keys: the coordinator's and integrators' signature on the commits that carry
authority — claims, the claims index, the policy, the claims pause and queue control — so a
mirror never believes such a ref someone else wrote on a server that cannot guard it
(docs/security.md, "Authority keys").

A signature is one extra header of the commit object itself, after `committer`:

    integrator-sig <public key> <ref> <base64 signature>

over the line `integrator.authority-signature.v1`, the ref the commit was written for, and
the commit's bytes without that header (its tree, parents, dates and message: everything
that makes it this commit, its place in the chain included). git keeps unknown headers
(`git fsck --strict` and `receive.fsckObjects` accept them) and ignores them. A signed
commit moved to another ref is no longer signed: the ref is part of what was signed.

Which keys a mirror trusts is its own configuration (`integrator.trustedAuthorityKey`), never
something it fetches: that is the trust anchor a new mirror needs to refuse a forged claim
it meets first.
"""

from __future__ import annotations

from integrator.documents.attempt_key import PUBLIC_RE, verify
from integrator.documents.verdict_key import VerdictKey, new_verdict_key, parse_verdict_key
from integrator.limits import AUTHORITY_COMMIT_BYTES as MAX_HEADER_BYTES
from integrator.refnames import ref_problem

KEY_SCHEMA = "integrator.authority-key.v1"
CONTEXT = b"integrator.authority-signature.v1\n"
HEADER = b"integrator-sig"
KEY_FILE_CONFIG = "integrator.authorityKeyFile"  # this host's private authority key
TRUSTED_CONFIG = "integrator.trustedAuthorityKey"  # multi-valued: ed25519:<base64>
TRUSTED_ENV = "INTEGRATOR_AUTHORITY_KEYS"  # comma-separated, for readers without a config

__all__ = [
    "KEY_FILE_CONFIG", "KEY_SCHEMA", "TRUSTED_CONFIG", "TRUSTED_ENV", "new_authority_key",
    "parse_authority_key", "sign_commit", "signature_problem",
]  # fmt: skip


def new_authority_key() -> VerdictKey:
    return new_verdict_key(KEY_SCHEMA)


def parse_authority_key(data: bytes) -> VerdictKey:
    return parse_verdict_key(data, KEY_SCHEMA)


def _message(ref: str, unsigned: bytes, repository: str) -> bytes:
    lines = (f"repository {repository}\n" + ref + "\n").encode("utf-8", "surrogateescape")
    return CONTEXT + lines + unsigned


def sign_commit(raw: bytes, ref: str, key: VerdictKey, repository: str = "") -> bytes:
    """`raw` (a commit object's bytes, unsigned) with the header that signs it for `ref` of
    the repository whose identity is `repository` (a record of one repository is no
    record of another that trusts the same key)."""
    if ref_problem(ref) is not None or " " in ref or "\n" in repository:
        raise ValueError(f"not a ref name: {ref!r}")
    head, sep, body = raw.partition(b"\n\n")
    if not sep:
        raise ValueError("not a commit object (no blank line after the headers)")
    value = key.sign_bytes(_message(ref, raw, repository))
    line = b" ".join((HEADER, key.public.encode(), ref.encode(), value.encode()))
    return head + b"\n" + line + b"\n\n" + body


def _split(raw: bytes) -> tuple[list[bytes], list[bytes], bytes] | str:
    """(the signature lines, the other header lines, the body), or why it cannot be read."""
    head, sep, body = raw.partition(b"\n\n")
    if not sep:
        return "it is not a commit object"
    if len(head) > MAX_HEADER_BYTES:
        return f"its headers are over {MAX_HEADER_BYTES} bytes"
    lines = head.split(b"\n")
    signed = [line for line in lines if line.startswith(HEADER + b" ")]
    other = [line for line in lines if not line.startswith(HEADER + b" ")]
    if signed and lines[-1] != signed[-1]:
        return "its integrator-sig header is not the last one"  # one signed form, one id
    return signed, other, body


def signature_problem(  # noqa: PLR0911 — one return per reason to refuse
    trusted: frozenset[str], raw: bytes, ref: str, repository: str = ""
) -> str | None:
    """Why the commit `raw`, read at `ref` of the repository `repository`, was not written
    by a holder of a trusted authority key for that ref; None when it was."""
    split = _split(raw)
    if isinstance(split, str):
        return split
    signed, other, body = split
    if not signed:
        return "it is not signed (no integrator-sig header)"
    if len(signed) > 1:
        return "it carries more than one integrator-sig header"
    parts = signed[0].split(b" ")
    if len(parts) != 4:
        return "its integrator-sig header is not <key> <ref> <signature>"
    key = parts[1].decode("ascii", "replace")
    if not PUBLIC_RE.match(key):
        return "its integrator-sig key is not ed25519:<base64 of 32 bytes>"
    if parts[2] != ref.encode("utf-8", "surrogateescape"):
        return "it was signed for another ref"
    if key not in trusted:
        return "it is signed by a key this mirror does not trust"
    unsigned = b"\n".join(other) + b"\n\n" + body
    value = parts[3].decode("ascii", "replace")
    valid = verify(key, _message(ref, unsigned, repository), value)
    return None if valid else "its signature is not valid for this ref of this repository"
