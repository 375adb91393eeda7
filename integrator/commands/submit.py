"""`integrator submit` — hand a candidate commit to the daemon through its spool."""

from __future__ import annotations

import argparse
import getpass
import os
import socket
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from integrator import jsontext, refnames
from integrator.commands._common import print_json, read_input, say
from integrator.daemon.bundles import create_bundle
from integrator.documents import envelope
from integrator.documents.rules import ContractRules, rules_from_bytes
from integrator.errors import EXIT_USAGE, ContractError, InfrastructureError, UsageError
from integrator.fleet import intake
from integrator.plumbing import git
from integrator.store.spool import (
    BUNDLE_FILE,
    DECIDED,
    REJECTION_FILE,
    VERDICT_FILE,
    Spool,
    new_id,
)

# Where the daemon files a decided submission (archived/ is a later review step).
FILED = tuple(folder for folder in DECIDED if folder != "archived")


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "submit",
        help="submit a candidate commit to the daemon's spool",
        description="Write one submission (contract, candidate commit, submitter, time) into "
        "the spool, Maildir-style (tmp/, fsync, rename into new/). Agents whose clone shares "
        "the canonical object store (worktrees) send the commit id; agents on other clones "
        "add --bundle to ship the commits as a git bundle. Agents on other machines use "
        "--intake URL instead: one push carries the candidate and the submission to "
        f"{refnames.SUBMIT}<task>/<id>, and `integrator status` reads the verdict. "
        "Prints the submission id.",
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--spool", type=Path, metavar="DIR", help="the daemon's spool folder")
    where.add_argument(
        "--intake",
        metavar="URL",
        help=f"a git repository the daemons serve (push to {refnames.SUBMIT}...)",
    )
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
    parser.add_argument(
        "--urgent",
        action="store_true",
        help="the priority lane: the daemon lands it before the rest of its drain",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(func=run)


def submitter(repo: Path) -> dict[str, Any]:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return envelope.submitter(user, socket.gethostname(), os.getpid(), str(repo))


def run(args: argparse.Namespace) -> int:
    if args.intake:
        return _to_intake(args)
    spool = Spool(args.spool)
    doc = publish(
        spool, read_input(args.contract), args.candidate, Path(args.repo), args.bundle,
        urgent=args.urgent,
    )  # fmt: skip
    sid = str(doc["submission"])
    if args.wait is None:
        if args.json:
            print_json(doc)
        else:
            say(sid)
        return 0
    return wait_for(spool, sid, args.wait, as_json=args.json)


def _submission(
    document: dict[str, Any],
    candidate: str,
    repo: Path,
    now: datetime,
    *,
    bundle: bool,
    urgent: bool,
) -> bytes:
    """The submission document of `candidate` under the contract `document`."""
    who = submitter(repo)
    name = BUNDLE_FILE if bundle else None
    try:
        return envelope.submission_json(document, candidate, who, now, bundle=name, urgent=urgent)
    except ValueError as err:  # what the daemon's reader would refuse, refused here
        raise ContractError(f"contract is invalid: {err}", [str(err)]) from err


def _resolve(data: bytes, rev: str, repo: Path) -> tuple[ContractRules, str, Path, str]:
    """The contract's rules, its base commit, the clone and the candidate commit `rev`
    names there.

    A contract is refused here when the guard's plain reading of it fails (schema, task,
    generation, globs) or its base is not a commit id; the daemon's gate judges the rest
    and fences what fails there (CONTRACT_INVALID), so nothing is lost.
    """
    rules = rules_from_bytes(data)
    base = rules.document.get("baseCommit")
    if not isinstance(base, str) or envelope.OBJECT_ID_RE.fullmatch(base) is None:
        raise ContractError("contract is invalid: baseCommit: not a commit id", ["baseCommit"])
    repo_path = repo.resolve()
    return rules, base, repo_path, git.rev_parse_commit(repo_path, rev)


def publish(
    spool: Spool, data: bytes, rev: str, repo: Path, bundle: bool, *, urgent: bool = False
) -> dict[str, object]:
    """Write one submission into the spool; the `--json` document `submit` prints (the MCP
    server's `submit` returns the same document)."""
    rules, base, repo_path, candidate = _resolve(data, rev, repo)
    now = datetime.now(UTC)
    with spool.draft(now) as draft:
        if bundle:
            create_bundle(repo_path, candidate, base, draft / BUNDLE_FILE)
        submission = _submission(
            rules.document, candidate, repo_path, now, bundle=bundle, urgent=urgent
        )
        sid = spool.publish(draft, submission, urgent=urgent)
    return {"submission": sid, "candidate": candidate, "path": str(spool.folder("new") / sid)}


def _to_intake(args: argparse.Namespace) -> int:
    if args.bundle:
        raise UsageError("--bundle is for a spool; a push to the intake carries the objects")
    rules, _, repo_path, candidate = _resolve(
        read_input(args.contract), args.candidate, Path(args.repo)
    )
    task_id = rules.task_id
    now = datetime.now(UTC)
    sid = new_id(now)
    submission = _submission(
        rules.document, candidate, repo_path, now, bundle=False, urgent=bool(args.urgent)
    )
    message = f"submission {sid} of task {task_id}\n"
    commit = intake.submission_commit(repo_path, submission, candidate, message)
    intake.push_submission(args.intake, repo_path, task_id, sid, commit)
    if args.wait is None:
        if args.json:
            print_json({"submission": sid, "candidate": candidate, "intake": args.intake})
        else:
            say(sid)
        return 0
    return wait_intake(args.intake, repo_path, sid, args.wait, as_json=args.json)


def wait_intake(url: str, repo: Path, sid: str, timeout: float, *, as_json: bool) -> int:
    """Poll the intake until a verdict for `sid` is published; print it, return its code."""
    deadline = time.monotonic() + timeout
    delay = 0.1
    while True:
        found = intake.find_verdict(url, repo, sid)
        if found is not None:
            return report_document(sid, found.rejected, found.document, as_json=as_json)
        if time.monotonic() >= deadline:
            raise InfrastructureError(
                f"no verdict for {sid} on {url} within {timeout:g} s; it is still queued (is "
                "a daemon serving the intake?)"
            )
        time.sleep(delay)
        delay = min(delay * 1.5, 1.0)


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
    rejected = folder == "rejected"
    data = (path / (REJECTION_FILE if rejected else VERDICT_FILE)).read_bytes()
    return document_of(sid, rejected, data, folder)


def document_of(
    sid: str, rejected: bool, data: bytes, folder: str | None = None
) -> tuple[dict[str, Any], int]:
    """The document (and exit code) of a verdict or rejection, as filed or published."""
    if rejected:
        rejection: dict[str, Any] = jsontext.loads(data)
        return rejection, EXIT_USAGE
    from integrator.documents.verdict import (
        Verdict,  # only when waiting: keeps submit's start-up short
    )

    verdict = Verdict.model_validate_json(data)
    doc: dict[str, Any] = {"submission": sid, "verdict": verdict.wire()}
    if folder is not None:
        doc["folder"] = folder
    return doc, verdict.exit_code


def _report(sid: str, folder: str, path: Path, *, as_json: bool) -> int:
    rejected = folder == "rejected"
    data = (path / (REJECTION_FILE if rejected else VERDICT_FILE)).read_bytes()
    return report_document(sid, rejected, data, as_json=as_json, folder=folder)


def report_document(
    sid: str, rejected: bool, data: bytes, *, as_json: bool, folder: str | None = None
) -> int:
    """Print a filed or published verdict (or rejection); the exit code it stands for."""
    doc, code = document_of(sid, rejected, data, folder)
    if as_json:
        print_json(doc)
    elif rejected:
        say(f"{sid} REJECTED: {doc.get('reason')}")
    else:
        verdict = doc["verdict"]
        violations = verdict.get("violations", [])
        codes = ", ".join(dict.fromkeys(v["code"] for v in violations))
        say(f"{sid} {verdict['decision']}" + (f" ({codes})" if codes else ""))
        for v in violations:
            subject = v.get("path") or v.get("resource") or "-"
            say(f"  {v['code']} {subject}: {v['detail']}")
    return code
