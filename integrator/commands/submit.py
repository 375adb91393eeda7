"""`integrator submit` — hand a candidate commit to the daemon through its spool."""

from __future__ import annotations

import argparse
import getpass
import json
import os
import socket
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from integrator.commands._common import print_json, read_input, say
from integrator.daemon.bundles import create_bundle
from integrator.daemon.spool import BUNDLE_FILE, DECIDED, REJECTION_FILE, VERDICT_FILE, Spool
from integrator.documents.contract import parse_contract
from integrator.documents.submission import Submission, Submitter
from integrator.errors import EXIT_USAGE, InfrastructureError
from integrator.repo import git

# Where the daemon files a decided submission (archived/ is a later review step).
FILED = tuple(folder for folder in DECIDED if folder != "archived")


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "submit",
        help="submit a candidate commit to the daemon's spool",
        description="Write one submission (contract, candidate commit, submitter, time) into "
        "the spool, Maildir-style (tmp/, fsync, rename into new/). Agents whose clone shares "
        "the canonical object store (worktrees) send the commit id; agents on other clones "
        "add --bundle to ship the commits as a git bundle. Prints the submission id.",
    )
    parser.add_argument("--spool", required=True, type=Path, metavar="DIR", help="the spool")
    parser.add_argument(
        "--contract", required=True, metavar="FILE", help="contract JSON, - for stdin"
    )
    parser.add_argument("--candidate", required=True, metavar="REV", help="the candidate commit")
    parser.add_argument(
        "--repo", default=".", metavar="PATH", help="where REV lives (default: current folder)"
    )
    parser.add_argument(
        "--bundle", action="store_true", help="ship the commits as a bundle (another clone)"
    )
    parser.add_argument(
        "--wait",
        type=float,
        nargs="?",
        const=300.0,
        metavar="SECONDS",
        help="wait for the verdict (default 300 s) and exit with its code",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(func=run)


def submitter(repo: Path) -> Submitter:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return Submitter(user=user, host=socket.gethostname(), pid=os.getpid(), repo=str(repo))


def run(args: argparse.Namespace) -> int:
    spool = Spool(args.spool)
    doc = publish(spool, read_input(args.contract), args.candidate, Path(args.repo), args.bundle)
    sid = str(doc["submission"])
    if args.wait is None:
        if args.json:
            print_json(doc)
        else:
            say(sid)
        return 0
    return wait_for(spool, sid, args.wait, as_json=args.json)


def publish(spool: Spool, data: bytes, rev: str, repo: Path, bundle: bool) -> dict[str, object]:
    """Write one submission into the spool; the `--json` document `submit` prints (the MCP
    server's `submit` returns the same document)."""
    contract = parse_contract(data)  # refuse locally what the gate would fence anyway
    document = json.loads(data)
    repo_path = repo.resolve()
    candidate = git.rev_parse_commit(repo_path, rev)
    now = datetime.now(UTC)
    with spool.draft(now) as draft:
        if bundle:
            create_bundle(repo_path, candidate, contract.base_commit, draft / BUNDLE_FILE)
        submission = Submission.model_validate(
            {
                "schema": "integrator.submission.v1",
                "contract": document,
                "candidate": candidate,
                "submitter": submitter(repo_path),
                "submittedAt": now,
                "bundle": BUNDLE_FILE if bundle else None,
            }
        )
        sid = spool.publish(draft, submission)
    return {"submission": sid, "candidate": candidate, "path": str(spool.folder("new") / sid)}


def wait_for(spool: Spool, sid: str, timeout: float, *, as_json: bool) -> int:
    """Poll until the daemon files `sid`; print its verdict and return its exit code."""
    deadline = time.monotonic() + timeout
    delay = 0.02
    while True:
        found = filed(spool, sid)
        if found is not None:
            return _report(sid, *found, as_json=as_json)
        if time.monotonic() >= deadline:
            raise InfrastructureError(
                f"no verdict for {sid} within {timeout:g} s; it is still queued (is the daemon "
                "running?)"
            )
        time.sleep(delay)
        delay = min(delay * 1.5, 0.5)


def filed(spool: Spool, sid: str) -> tuple[str, Path] | None:
    """The folder the daemon filed `sid` in, and its path; None while it is still queued."""
    for folder in FILED:
        path = spool.folder(folder) / sid
        if path.is_dir():
            return folder, path
    return None


def verdict_document(sid: str, folder: str, path: Path) -> tuple[dict[str, Any], int]:
    """The `--wait --json` document of a filed submission, and the exit code it means."""
    if folder == "rejected":
        return json.loads((path / REJECTION_FILE).read_bytes()), EXIT_USAGE
    from integrator.documents.verdict import (
        Verdict,  # only when waiting: keeps submit's start-up short
    )

    verdict = Verdict.model_validate_json((path / VERDICT_FILE).read_bytes())
    return {"submission": sid, "folder": folder, "verdict": verdict.wire()}, verdict.exit_code


def _report(sid: str, folder: str, path: Path, *, as_json: bool) -> int:
    doc, code = verdict_document(sid, folder, path)
    if folder == "rejected":
        if as_json:
            print_json(doc)
        else:
            say(f"{sid} REJECTED: {doc.get('reason')}")
        return code
    from integrator.documents.verdict import Verdict

    verdict = Verdict.model_validate_json((path / VERDICT_FILE).read_bytes())
    if as_json:
        print_json(doc)
    else:
        codes = ", ".join(dict.fromkeys(v.code.value for v in verdict.violations))
        say(f"{sid} {verdict.decision.value}" + (f" ({codes})" if codes else ""))
        for v in verdict.violations:
            say(f"  {v.code.value} {v.subject}: {v.detail}")
    return verdict.exit_code
