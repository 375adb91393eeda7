"""The submission document written without its model: what `integrator submit` produces.

`integrator submit` runs after every task an agent finishes, so it builds the
`integrator.submission.v1` document as plain JSON instead of importing the models
(pydantic costs more of a cold start than the whole submission). The daemon reads every
submission through the model in `integrator.documents.submission`, and tests pin that what
is written here is exactly what the model reads and writes.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

SUBMISSION_SCHEMA = "integrator.submission.v1"
BUNDLE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,100}\.bundle$")
_OBJECT_ID_RE = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
# The submitter's self-reported fields, cut to what the model admits.
_LIMITS = {"user": 200, "host": 255, "repo": 4096}


def submitter(
    user: str, host: str, pid: int | None = None, repo: str | None = None
) -> dict[str, Any]:
    fields: dict[str, Any] = {"user": user[: _LIMITS["user"]] or "unknown"}
    fields["host"] = host[: _LIMITS["host"]] or "unknown"
    if pid is not None:
        fields["pid"] = pid
    if repo is not None:
        fields["repo"] = repo[: _LIMITS["repo"]]
    return fields


def submission_json(
    contract: dict[str, Any],
    candidate: str,
    who: dict[str, Any],
    submitted_at: datetime,
    *,
    bundle: str | None = None,
    urgent: bool = False,
) -> bytes:
    """The document's bytes, as the model's `to_json` writes them (ValueError when the
    candidate or the bundle name is not one the model admits)."""
    if not _OBJECT_ID_RE.match(candidate):
        raise ValueError(f"{candidate!r} is not a full commit id")
    if bundle is not None and not BUNDLE_NAME_RE.match(bundle):
        raise ValueError(f"{bundle!r} is not a plain file name ending in .bundle")
    stamp = submitted_at.astimezone(UTC).isoformat().replace("+00:00", "Z")
    document: dict[str, Any] = {
        "schema": SUBMISSION_SCHEMA,
        "contract": contract,
        "candidate": candidate,
        "submitter": who,
        "submittedAt": stamp,
    }
    if bundle is not None:
        document["bundle"] = bundle
    if urgent:
        document["urgent"] = True
    return json.dumps(document, indent=2, ensure_ascii=False).encode() + b"\n"
