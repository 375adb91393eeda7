"""Canonical JSON (RFC 8785) and the `sha256:<hex>` digests built on it."""

from __future__ import annotations

import hashlib
from typing import Any

import rfc8785


def canonical_bytes(document: Any) -> bytes:
    """RFC 8785 canonical JSON of a JSON-compatible value."""
    return bytes(rfc8785.dumps(document))


def digest_of(document: Any) -> str:
    """`sha256:<hex>` over the RFC 8785 canonical form of `document`."""
    return "sha256:" + hashlib.sha256(canonical_bytes(document)).hexdigest()
