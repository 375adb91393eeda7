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

from integrator.limits import (
    BUNDLE_NAME_CHARS,
    MAX_NESTING,
    SUBMISSION_BYTES,
    SUBMITTER_HOST_CHARS,
    SUBMITTER_REPO_CHARS,
    SUBMITTER_USER_CHARS,
)

SUBMISSION_SCHEMA = "integrator.submission.v1"
BUNDLE_NAME_RE = re.compile(rf"^[A-Za-z0-9][A-Za-z0-9._-]{{0,{BUNDLE_NAME_CHARS}}}\.bundle$")
OBJECT_ID_RE = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # a full commit id (fullmatch)


def submitter(
    user: str, host: str, pid: int | None = None, repo: str | None = None
) -> dict[str, Any]:
    fields: dict[str, Any] = {"user": user[:SUBMITTER_USER_CHARS] or "unknown"}
    fields["host"] = host[:SUBMITTER_HOST_CHARS] or "unknown"
    if pid is not None:
        fields["pid"] = pid
    if repo is not None:
        fields["repo"] = repo[:SUBMITTER_REPO_CHARS]
    return fields


def _too_deep(value: Any) -> bool:
    """Whether `value` nests lists and objects more than MAX_NESTING deep (no recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        for child in children:
            if isinstance(child, dict | list):
                if depth == MAX_NESTING:
                    return True
                stack.append((child, depth + 1))
    return False


def submission_json(
    contract: dict[str, Any],
    candidate: str,
    who: dict[str, Any],
    submitted_at: datetime,
    *,
    bundle: str | None = None,
    urgent: bool = False,
    signature: dict[str, str] | None = None,
) -> bytes:
    """The document's bytes, as the model's `to_json` writes them. ValueError for what the
    daemon's reader would refuse: a candidate or bundle name the model does not admit, a
    contract nested more than MAX_NESTING deep or holding text that is not Unicode, or a
    document larger than SUBMISSION_BYTES."""
    if OBJECT_ID_RE.fullmatch(candidate) is None:
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
    if signature is not None:
        document["signature"] = signature
    if urgent:
        document["urgent"] = True
    if _too_deep(contract):
        raise ValueError(f"the contract nests lists and objects more than {MAX_NESTING} deep")
    try:
        # allow_nan=False: NaN and Infinity are not JSON (the model would write null).
        text = json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False)
        data = text.encode() + b"\n"
    except UnicodeEncodeError as err:  # a lone surrogate escape, such as "\\ud800"
        raise ValueError(f"the submission holds text that is not Unicode ({err.reason})") from err
    if len(data) > SUBMISSION_BYTES:
        raise ValueError(f"the submission would be {len(data)} bytes, more than {SUBMISSION_BYTES}")
    return data
