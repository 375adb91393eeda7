"""SARIF 2.1.0, as GitHub code scanning ingests it: one rule per code, one result per
violation.

What GitHub (and the SARIF Multitool's GitHub rules) require, and how each is met:

- Every rule has `shortDescription` (the code's one-line summary), `fullDescription` (the
  summary and what the code decides) and `help` as `text` and `markdown` (the next step).
- Every result has exactly one location with a `physicalLocation`: `artifactLocation.uri`
  relative to the repository root (`uriBaseId` `%SRCROOT%`) and `region.startLine` 1 —
  integrator judges whole files, never lines. The file is chosen by
  `integrator.report.common.anchor`: the violation's own path; for a resource-only
  violation (a lockfile's RESOURCE_NOT_OWNED) the first path that touched the resource; for
  a claim-level one (STALE_GENERATION, LEASE_EXPIRED, CONTRACT_DIGEST_MISMATCH …, which
  have neither) the contract file when `integrator gate --contract FILE` names a file in
  the work tree, else the verdict's first changed path, else `integrator-contract.json`
  (CONTRACT_STANDIN, a name that stands for the contract). `properties.anchor` says which
  (`path`, `resource`, `contract`, `changed`, `standin`). A resource is also given as a
  `logicalLocations` entry (kind `resource`) next to the physical location, never alone:
  the Multitool crashes on a location that has only logical locations.
- `uri` percent-encodes the path's raw bytes: a path that is not UTF-8 (written in git's
  quoted form in the verdict) is unquoted first, so `src/bad\\377` becomes `src/bad%FF`.
- `partialFingerprints` holds `integrator/v1` (SHA-256 of code, path and resource: the same
  problem keeps it across candidates and rewordings) and `primaryLocationLineHash`, the
  one GitHub reads: its first 16 hex digits and `:<n>`, the n-th result of the run with
  that value (GitHub's own hashes count repeats the same way). It is not a hash of the
  line's text because the result is about the change, not about a line.
"""

from __future__ import annotations

import json
from urllib.parse import quote

from integrator.documents.verdict import CODE_SUMMARY, REVIEW_CODES, Code, Verdict
from integrator.paths import unquote_path
from integrator.report.common import anchor, distinct_codes, fingerprint, message
from integrator.report.hints import hint
from integrator.version import __version__

SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)

FINGERPRINT_KEY = "integrator/v1"
LINE_HASH_KEY = "primaryLocationLineHash"
SRCROOT = "%SRCROOT%"

# Inline Markdown that could change how a hint reads (`<task>` would be raw HTML).
_MD_SPECIAL = frozenset("\\`*_[]<>|")


def uri(written: str) -> str:
    """A relative URI reference for a path in the form verdicts write it (`quote_path`).

    `%`, `:` (a scheme look-alike), spaces and non-ASCII are percent-encoded; a quoted path
    is unquoted first so the URI carries the raw bytes (surrogateescape restores them).
    """
    return quote(unquote_path(written), safe="/", errors="surrogateescape")


def _md(text: str) -> str:
    return "".join(f"\\{ch}" if ch in _MD_SPECIAL else ch for ch in text)


def _rule(code: Code) -> dict[str, object]:
    decides = "REVIEW" if code in REVIEW_CODES else "FENCED"
    summary = CODE_SUMMARY[code]
    effect = f"When enforced, the candidate is {decides}; in observe mode it is only reported."
    step = hint(code)
    return {
        "id": code.value,
        # A name for people, distinct from the opaque id (the Multitool's SARIF1001).
        "name": "".join(part.capitalize() for part in code.value.split("_")),
        "shortDescription": {"text": summary},
        "fullDescription": {"text": f"{summary} {effect}"},
        "help": {
            "text": f"{summary} {effect} Next step: {step}.",
            "markdown": (
                f"**{_md(code.value)}**: {_md(summary)}\n\n{_md(effect)}\n\n"
                f"**Next step:** {_md(step)}."
            ),
        },
        "defaultConfiguration": {"level": "error"},
        "properties": {"decides": decides},
    }


def render_sarif(verdict: Verdict, *, contract_path: str | None = None) -> str:
    """SARIF 2.1.0: one rule per code present, one result per violation, each located at a
    file (see the module docstring); `contract_path` is the contract file, relative to the
    repository root in the form verdicts write paths, when the gate was given one there."""
    codes = [code for code, _ in distinct_codes(verdict)]
    index = {code: i for i, code in enumerate(codes)}
    seen: dict[str, int] = {}
    results: list[dict[str, object]] = []
    for v in verdict.violations:
        where = anchor(v, verdict, contract_path)
        key = fingerprint(v)
        seen[key[:16]] = seen.get(key[:16], 0) + 1
        location: dict[str, object] = {
            "physicalLocation": {
                "artifactLocation": {"uri": uri(where.path), "uriBaseId": SRCROOT},
                "region": {"startLine": 1},
            }
        }
        if v.resource is not None:
            location["logicalLocations"] = [{"name": v.resource, "kind": "resource"}]
        results.append(
            {
                "ruleId": v.code.value,
                "ruleIndex": index[v.code],
                "level": "error" if v.enforced else "warning",
                "message": {"text": message(v)},
                "locations": [location],
                "partialFingerprints": {
                    FINGERPRINT_KEY: key,
                    LINE_HASH_KEY: f"{key[:16]}:{seen[key[:16]]}",
                },
                "properties": {"mode": v.mode, "anchor": where.kind.value},
            }
        )
    run_properties = {
        key: value
        for key, value in (
            ("decision", verdict.decision.value),
            ("candidate", verdict.candidate),
            ("taskId", verdict.task_id),
            ("attemptId", verdict.attempt_id),
            ("generation", verdict.generation),
            ("static", verdict.static),
        )
        if value is not None
    }
    document = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "integrator",
                        "version": __version__,
                        "rules": [_rule(code) for code in codes],
                    }
                },
                "results": results,
                "properties": run_properties,
            }
        ],
    }
    return json.dumps(document, indent=2, ensure_ascii=False)
