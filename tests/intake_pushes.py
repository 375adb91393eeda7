"""What a hostile party pushes to an intake, for tests: submission commits under names of
its choosing (another task's id, many refs for one commit), verdicts planted on an intake
no hook guards, and the size of what a daemon's spool holds."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from integrator.documents import envelope
from integrator.documents.attempt_key import parse_key
from integrator.fleet import intake
from tests.gitutil import git

SUBMIT = "refs/integrator/submit/"
VERDICTS = "refs/integrator/verdicts/"


def submission_document(
    contract: dict[str, Any], candidate: str, *, key: Path | None = None, sid: str | None = None
) -> bytes:
    """A well-formed submission.json of `candidate` under `contract`, signed for id `sid`
    with the attempt key in file `key` when given (the pusher's own, valid key)."""
    who = envelope.submitter("mallory", "elsewhere")
    signature = None
    if key is not None and sid is not None:
        signature = parse_key(key.read_bytes()).signature(sid, candidate)
    return envelope.submission_json(
        contract, candidate, who, datetime.now(UTC), signature=signature
    )


def submission_commit(repo: Path, document: bytes, parent: str) -> str:
    """The submission commit holding `document` as submission.json (any bytes), `parent`
    its parent: objects only, in `repo`."""
    return intake.submission_commit(repo, document, parent, "a submission\n")


def push_refs(repo: Path, url: str, commit: str, names: list[str]) -> None:
    """Push `commit` to every one of `names` (`<task>/<id>` under refs/integrator/submit/)
    in one push."""
    git("push", "-q", url, *(f"{commit}:{SUBMIT}{name}" for name in names), cwd=repo)


def push_verdict(
    repo: Path, url: str, task: str, sid: str, verdict: dict[str, Any], name: str = "verdict.json"
) -> None:
    """Plant `verdict` (as `name`) at refs/integrator/verdicts/<task>/<sid> (an intake
    without a hook lets anyone do this)."""
    blob = git("hash-object", "-w", "--stdin", cwd=repo, input=json.dumps(verdict).encode())
    tree = git("mktree", cwd=repo, input=f"100644 blob {blob}\t{name}\n".encode())
    commit = git("commit-tree", tree, "-m", "forged verdict", cwd=repo)
    git("push", "-q", "-f", url, f"{commit}:{VERDICTS}{task}/{sid}", cwd=repo)


def accepted(candidate: str, task: str) -> dict[str, Any]:
    """An ACCEPTED verdict document naming `candidate` of `task`."""
    return {"schema": "integrator.verdict.v1", "decision": "ACCEPTED", "candidate": candidate,
            "taskId": task}  # fmt: skip


def folder_bytes(root: Path) -> int:
    """Bytes of every regular file below `root`."""
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())
