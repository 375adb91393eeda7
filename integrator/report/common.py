"""Pieces every renderer shares: identity lines, messages, codes, fingerprints."""

from __future__ import annotations

import hashlib
import json

from integrator.documents.verdict import Code, Decision, Verdict, Violation

SHORT_OID = 12


def fingerprint(violation: Violation) -> str:
    """SHA-256 hex of (code, path, resource): the same problem keeps it across candidates."""
    key = json.dumps(
        [violation.code.value, violation.path, violation.resource],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def short(oid: str | None) -> str:
    return oid[:SHORT_OID] if oid else "-"


def message(violation: Violation) -> str:
    """The detail, naming the resource when there is one (the path goes in the location)."""
    if violation.resource:
        return f"{violation.detail} (resource {violation.resource})"
    return violation.detail


def identity(verdict: Verdict) -> list[tuple[str, str]]:
    return [
        ("candidate", short(verdict.candidate)),
        ("task", verdict.task_id or "-"),
        ("attempt", verdict.attempt_id or "-"),
        ("generation", "-" if verdict.generation is None else str(verdict.generation)),
    ]


def distinct_codes(verdict: Verdict) -> list[tuple[Code, bool]]:
    """Codes in order of first appearance, each with whether any of its violations enforces."""
    seen: dict[Code, bool] = {}
    for v in verdict.violations:
        seen[v.code] = seen.get(v.code, False) or v.enforced
    return list(seen.items())


def needs_fallback_failure(verdict: Verdict) -> bool:
    """Whether a non-accepted verdict needs a failure of its own to read as failed."""
    # A non-accepted verdict must read as failed even if it carries no enforced violation.
    return verdict.decision is not Decision.ACCEPTED and not any(
        v.enforced for v in verdict.violations
    )
