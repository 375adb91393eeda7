"""Pieces every renderer shares: identity lines, messages, codes, fingerprints, anchors."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from enum import StrEnum

from integrator.documents.verdict import Code, Decision, Verdict, Violation
from integrator.paths import escape_undecodable

SHORT_OID = 12

# The file a result without any path of its own is shown at when the renderer knows no
# better one (the contract came on standard input, from outside the work tree, or from a
# bare repository, and the verdict names no path): it stands for the contract.
CONTRACT_STANDIN = "integrator-contract.json"


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


def printable(verdict: Verdict) -> Verdict:
    """`verdict` with undecodable bytes in `candidate` (what was typed on the command line,
    decoded with surrogateescape) written as `\\ooo`, so every format encodes as UTF-8."""
    if verdict.candidate is None:
        return verdict
    candidate = escape_undecodable(verdict.candidate)
    if candidate == verdict.candidate:
        return verdict
    return verdict.model_copy(update={"candidate": candidate})


class AnchorKind(StrEnum):
    """Where a result's file came from (SARIF `properties.anchor`)."""

    PATH = "path"  # the violation's own path
    RESOURCE = "resource"  # the first path that touched the violation's resource
    CONTRACT = "contract"  # the contract file the gate was given
    CHANGED = "changed"  # the verdict's first changed path
    STANDIN = "standin"  # CONTRACT_STANDIN


@dataclass(frozen=True)
class Anchor:
    """The repository file a result is shown at, in the written form verdicts use."""

    path: str
    kind: AnchorKind


def anchor(violation: Violation, verdict: Verdict, contract_path: str | None = None) -> Anchor:
    """The file to show `violation` at, for formats whose consumers need one (SARIF, Code
    Quality): its own path; for a resource-only violation the first path that touched the
    resource; for a claim-level one (stale generation, lease, digest …) `contract_path`
    (the contract file, repository-relative, written form) when known, else the verdict's
    first changed path, else CONTRACT_STANDIN. Stable for one verdict and contract path."""
    if violation.path is not None:
        return Anchor(violation.path, AnchorKind.PATH)
    if violation.resource is not None:
        for use in verdict.resources:
            if use.resource == violation.resource and use.paths:
                return Anchor(use.paths[0], AnchorKind.RESOURCE)
    if contract_path:
        return Anchor(contract_path, AnchorKind.CONTRACT)
    changed = [v.path for v in verdict.violations if v.path is not None]
    changed += [p for use in verdict.resources for p in use.paths]
    if changed:
        return Anchor(changed[0], AnchorKind.CHANGED)
    return Anchor(CONTRACT_STANDIN, AnchorKind.STANDIN)
