"""GitLab Code Quality: a JSON array of issues, one per violation.

GitLab validates each entry against its `codeclimate.json` schema (`description`,
`fingerprint`, `severity`, `location` required) and its documentation asks for more, all
met here: `check_name` (the code), `severity` one of info, minor, major, critical, blocker
(observed → info, review → major, fenced → blocker), `location.path` relative to the
repository and `location.lines.begin` (1: integrator judges whole files). A violation
without a path of its own is placed like a SARIF result (`integrator.report.common.anchor`):
at the first path that touched its resource, else the contract file, the first changed
path or `integrator-contract.json`. A path that is not UTF-8 stays in git's quoted form,
as in the verdict. No BOM, one array, also when empty.
"""

from __future__ import annotations

import json

from integrator.documents.verdict import REVIEW_CODES, Verdict, Violation
from integrator.report.common import anchor, fingerprint, message

SEVERITIES = ("info", "minor", "major", "critical", "blocker")


def _severity(violation: Violation) -> str:
    if not violation.enforced:
        return "info"
    return "major" if violation.code in REVIEW_CODES else "blocker"


def render_codequality(verdict: Verdict, *, contract_path: str | None = None) -> str:
    """GitLab Code Quality: a JSON array with one issue per violation."""
    issues = [
        {
            "description": f"{v.code.value}: {message(v)}",
            "check_name": v.code.value,
            "fingerprint": fingerprint(v),
            "severity": _severity(v),
            "location": {
                "path": anchor(v, verdict, contract_path).path,
                "lines": {"begin": 1},
            },
        }
        for v in verdict.violations
    ]
    return json.dumps(issues, indent=2, ensure_ascii=False)
