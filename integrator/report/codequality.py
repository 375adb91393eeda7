"""GitLab Code Quality: a JSON array of issues, one per violation."""

from __future__ import annotations

import json

from integrator.documents.verdict import REVIEW_CODES, Verdict, Violation
from integrator.report.common import fingerprint, message


def _severity(violation: Violation) -> str:
    if not violation.enforced:
        return "info"
    return "major" if violation.code in REVIEW_CODES else "blocker"


def render_codequality(verdict: Verdict) -> str:
    """GitLab Code Quality: a JSON array with one issue per violation."""
    issues = [
        {
            "description": f"{v.code.value}: {message(v)}",
            "check_name": v.code.value,
            "fingerprint": fingerprint(v),
            "severity": _severity(v),
            "location": {"path": v.path if v.path is not None else ".", "lines": {"begin": 1}},
        }
        for v in verdict.violations
    ]
    return json.dumps(issues, indent=2, ensure_ascii=False)
