"""`integrator submit` — hand a candidate commit to the daemon through its spool."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from integrator import refnames
from integrator.commands._common import configured, print_json, read_input, say
from integrator.commands._progress import Progress
from integrator.documents.rules import rules_from_bytes
from integrator.errors import EXIT_OK, InfrastructureError, UsageError
from integrator.fleet.keys import ENV as KEY_ENV
from integrator.fleet.submit import (
    SETTLED,
    document_of,
    filed,
    intake_landing,
    landing,
    lifecycle_code,
    poll,
    publish,
    to_intake,
    verdict_document,
    wait_published,
    wait_settled_intake,
)
from integrator.store.spool import Spool


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
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--spool",
        type=Path,
        metavar="DIR",
        help="the daemon's spool folder (default: $INTEGRATOR_SPOOL, else [defaults] spool of the configuration file)",
    )
    where.add_argument(
        "--intake",
        metavar="URL",
        help=f"a git repository the daemons serve (push to {refnames.SUBMIT}...)",
    )
    parser.add_argument(
        "--contract",
        metavar="FILE",
        help="contract JSON, - for stdin (default: the contract `task claim` bound to the "
        "worktree --repo is in)",
    )
    parser.add_argument("--candidate", required=True, metavar="REV", help="the candidate commit")
    parser.add_argument(
        "--repo", default=".", metavar="PATH", help="where REV lives (default: current folder)"
    )
    parser.add_argument(
        "--bundle", action="store_true", help="ship the commits as a bundle (another clone)"
    )
    parser.add_argument(
        "--key",
        type=Path,
        metavar="FILE",
        help="the attempt key issued with the contract, to sign the submission (default: "
        "$INTEGRATOR_ATTEMPT_KEY, else CONTRACT.key beside the contract file, where "
        "`contract issue -o CONTRACT` writes it, else the key bound into the worktree by "
        "`task claim`, else the key store of --repo)",
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
        "--create",
        action="store_true",
        help="make --spool DIR a spool when it is not one yet (without it, a folder that is "
        "not a spool is refused: a mistyped path would otherwise become an empty spool no "
        "daemon reads)",
    )
    parser.add_argument(
        "--urgent",
        action="store_true",
        help="the priority lane: the daemon lands it before the rest of its drain",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    configured(parser, spool="optional")
    parser.set_defaults(func=run)


def _key(args: argparse.Namespace) -> Path | None:
    """--key, else FILE.key beside a contract FILE (where `contract issue -o` writes it)."""
    given: Path | None = args.key
    if given is not None or os.environ.get(KEY_ENV):
        return given  # find_key reads the variable
    if args.contract != "-":
        beside = Path(args.contract + ".key")
        if os.path.lexists(beside):
            return beside
    return None


def _bound_contract(repo: Path) -> str:
    """The contract file bound to the worktree `repo` is in (`task claim` wrote it)."""
    from integrator.errors import ConfigurationError
    from integrator.fleet.bound import checkout_of

    try:
        path = checkout_of(repo).binding_dir / "contract.json"
    except ConfigurationError:
        path = None
    if path is None or not path.is_file():
        raise UsageError(
            f"no --contract given and no contract is bound to {repo} (`integrator task claim` "
            "binds one to the worktree it claims); pass --contract FILE"
        )
    say(f"integrator: submitting under the bound contract {path}", err=True)
    return str(path)


def run(args: argparse.Namespace) -> int:
    if args.contract is None:
        args.contract = _bound_contract(Path(args.repo))
    args.key = _key(args)
    if args.intake:
        return _to_intake(args)
    if args.spool is None:
        raise UsageError(
            "submit needs --spool DIR or --intake URL (or $INTEGRATOR_SPOOL, or [defaults] "
            "spool in the configuration file)"
        )
    spool = _spool(Path(args.spool), create=args.create)
    doc = publish(
        spool, read_input(args.contract), args.candidate, Path(args.repo), args.bundle,
        urgent=args.urgent, key=args.key,
    )  # fmt: skip
    sid = str(doc["submission"])
    if "unsigned" in doc:
        say(f"integrator: warning: {doc['unsigned']}", err=True)
    if args.wait is None:
        if args.json:
            print_json(doc)
        else:
            say(sid)
            say(
                f"integrator: wrote submission {sid} (candidate {str(doc['candidate'])[:12]}) "
                f"into {spool.root}/new/; its verdict: integrator status --spool "
                f"{spool.root} --submission {sid}",
                err=True,
            )
        return 0
    return wait_for(spool, sid, args.wait, as_json=args.json)


def _spool(root: Path, *, create: bool) -> Spool:
    """The spool at `root`, refused when it is not one (unless `create`): a folder a daemon
    serves has its `new/` and `tmp/` folders (`serve` makes them when it starts)."""
    spool = Spool(root)
    if create:
        return spool.ensure()
    if all(spool.folder(name).is_dir() for name in ("tmp", "new")):
        return spool
    if not root.exists():
        why = "does not exist"
    elif not root.is_dir():
        why = "is not a folder"
    else:
        why = "is not a spool (no tmp/ and new/ in it)"
    raise UsageError(
        f"spool {root} {why}: check the path, start `integrator serve --spool {root}` "
        "first (it creates the spool), or pass --create"
    )


def _to_intake(args: argparse.Namespace) -> int:
    if args.bundle:
        raise UsageError("--bundle is for a spool; a push to the intake carries the objects")
    data = read_input(args.contract)
    pushed = to_intake(
        args.intake, data, args.candidate, Path(args.repo), urgent=bool(args.urgent), key=args.key
    )
    sid = pushed.submission
    if pushed.unsigned:
        say(f"integrator: warning: {pushed.unsigned}", err=True)
    if args.wait is None:
        if args.json:
            out = {"submission": sid, "candidate": pushed.candidate, "intake": args.intake}
            if pushed.unsigned:
                out["unsigned"] = pushed.unsigned
            print_json(out)
        else:
            say(sid)
        return 0
    task_id = rules_from_bytes(data).task_id  # what to_intake pushed under (it parsed it too)
    return wait_intake(
        args.intake, pushed.repo, task_id, sid, args.wait, candidate=pushed.candidate,
        as_json=args.json,
    )  # fmt: skip


def wait_intake(
    url: str,
    repo: Path,
    task_id: str,
    sid: str,
    timeout: float,
    *,
    candidate: str | None = None,
    as_json: bool,
    until: str = "decided",
    canonical: str | None = None,
) -> int:
    """Wait for the intake to publish a verdict for submission `sid` of task `task_id` (on
    `candidate`, when known: a verdict on another is an error); print it with where its
    landing is now (read from the canonical server), return the code they mean together.
    Meanwhile standard error says what it waits for (a thread says it: each look is a fetch
    that waits by itself), the last word said before the answer is printed."""
    from integrator.records.landings import describe

    started = time.monotonic()
    if timeout >= 1:
        say(f"integrator: waiting up to {timeout:g} s for the verdict of {sid} on {url}", err=True)
    state = [f"waiting for its verdict on {url}"]  # what the main thread waits for now

    looks = [""]  # how many looks at the intake so far, shown beside the state

    def looked(count: int, untrusted: str | None) -> None:
        looks[0] = f", {count} look{'s' * (count > 1)}"
        if untrusted:
            state[0] = f"waiting for a trusted verdict on {url} (not believed: {untrusted})"

    with Progress(f"integrator: {sid}", timeout).ticking(lambda: state[0], lambda: looks[0]):
        found = wait_published(url, repo, task_id, sid, timeout, candidate=candidate, looked=looked)
        doc, code = document_of(sid, found.rejected, found.document)
        where = intake_landing(url, repo, doc, canonical)
        if until == "promoted" and code == EXIT_OK:
            if where is None:
                raise InfrastructureError(
                    f"{sid} is ACCEPTED, but neither the clone's origin nor the intake holds a "
                    "queue to tell where its landing is: name the canonical repository with "
                    "--canonical URL"
                )
            if where["state"] not in SETTLED:
                state[0] = f"ACCEPTED, waiting for its promotion ({describe(where)})"
                left = max(0.0, timeout - (time.monotonic() - started))
                where = wait_settled_intake(url, repo, sid, doc, left, canonical)
                # an ejection publishes a new verdict
                found = wait_published(url, repo, task_id, sid, 0, candidate=candidate)
                doc, code = document_of(sid, found.rejected, found.document)
    code = lifecycle_code(code, where, until)
    return report_landing(sid, doc, code, where, rejected=found.rejected, as_json=as_json)


def waiting_in(spool: Spool, sid: str) -> str:
    """Where submission `sid` is while no verdict is filed: in work/, or its place in new/."""
    if spool.folder("work").joinpath(sid).exists():
        return "being decided (work/)"
    queued = spool.entries("new")
    if sid in queued:
        ahead = queued.index(sid)
        return f"waiting in new/ ({ahead} submitted before it)" if ahead else "next in new/"
    return "between folders"


def wait_for(spool: Spool, sid: str, timeout: float, *, as_json: bool) -> int:
    """Wait for the daemon to file `sid`, saying on stderr where it is meanwhile; print its
    verdict and return its exit code."""
    say(f"integrator: submitted {sid}; waiting up to {timeout:g} s for its verdict", err=True)
    progress = Progress(f"integrator: {sid}", timeout)

    def look() -> tuple[str, Path] | None:
        found = filed(spool, sid)
        if found is None:
            progress.update(waiting_in(spool, sid))
        return found

    try:
        folder, path = poll(
            look,
            timeout,
            f"no verdict for {sid} within {timeout:g} s; it is still queued (is the daemon "
            "running?)",
        )
    finally:
        progress.done()
    doc, code = verdict_document(sid, folder, path)
    where = landing(spool, sid)
    code = lifecycle_code(code, where, "decided")
    return report_landing(sid, doc, code, where, rejected=folder == "rejected", as_json=as_json)


def report_landing(
    sid: str,
    doc: dict[str, Any],
    code: int,
    where: dict[str, object] | None,
    *,
    rejected: bool,
    as_json: bool,
) -> int:
    """`report_document`, and where the landing is now (`landing` in the JSON document,
    one more line in the text): the same on every channel (docs/lifecycle.md)."""
    if where is not None and as_json:
        doc["landing"] = where
    report_document(sid, doc, code, rejected=rejected, as_json=as_json)
    if where is not None and not as_json:
        from integrator.records.landings import describe

        say(f"  {describe(where)}")
    return code


def report_document(
    sid: str, doc: dict[str, Any], code: int, *, rejected: bool, as_json: bool
) -> int:
    """Print a filed or published verdict (or rejection); the exit code it stands for."""
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
