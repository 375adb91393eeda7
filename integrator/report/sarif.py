"""SARIF 2.1.0, as GitHub code scanning ingests it: one rule per code, one result per
violation."""

from __future__ import annotations

import json
from urllib.parse import quote

from integrator import __version__
from integrator.documents.verdict import CODE_SUMMARY, REVIEW_CODES, Verdict
from integrator.report.common import distinct_codes, fingerprint, message
from integrator.report.hints import hint

SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)


FINGERPRINT_KEY = "integrator/v1"


def _uri(path: str) -> str:
    # A SARIF uri is a URI reference: `%`, `:` (scheme look-alike), spaces and non-ASCII
    # must be percent-encoded. surrogateescape restores undecodable bytes of git paths.
    return quote(path, safe="/", errors="surrogateescape")


def render_sarif(verdict: Verdict) -> str:
    """SARIF 2.1.0: one rule per code present, one result per violation."""
    codes = [code for code, _ in distinct_codes(verdict)]
    index = {code: i for i, code in enumerate(codes)}
    rules = [
        {
            "id": code.value,
            "name": code.value,
            "shortDescription": {"text": CODE_SUMMARY[code]},
            "help": {"text": hint(code)},
            "defaultConfiguration": {"level": "error"},
            "properties": {"decides": "REVIEW" if code in REVIEW_CODES else "FENCED"},
        }
        for code in codes
    ]
    results: list[dict[str, object]] = []
    for v in verdict.violations:
        result: dict[str, object] = {
            "ruleId": v.code.value,
            "ruleIndex": index[v.code],
            "level": "error" if v.enforced else "warning",
            "message": {"text": message(v)},
            "partialFingerprints": {FINGERPRINT_KEY: fingerprint(v)},
            "properties": {"mode": v.mode},
        }
        location: dict[str, object] = {}
        if v.path is not None:
            location["physicalLocation"] = {
                "artifactLocation": {"uri": _uri(v.path), "uriBaseId": "%SRCROOT%"}
            }
        if v.resource is not None:
            location["logicalLocations"] = [{"name": v.resource, "kind": "resource"}]
        if location:
            result["locations"] = [location]
        results.append(result)
    run_properties = {
        key: value
        for key, value in (
            ("decision", verdict.decision.value),
            ("candidate", verdict.candidate),
            ("taskId", verdict.task_id),
            ("attemptId", verdict.attempt_id),
            ("generation", verdict.generation),
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
                        "rules": rules,
                    }
                },
                "results": results,
                "properties": run_properties,
            }
        ],
    }
    return json.dumps(document, indent=2, ensure_ascii=False)
