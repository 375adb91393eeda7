"""`integrator review list|show|approve|reject|web` — the release manager's work on held candidates."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from integrator import refnames
from integrator.commands._common import configured, print_json, read_input, say
from integrator.daemon import logs
from integrator.errors import EXIT_OK, UsageError
from integrator.escape import visible, write_text

if TYPE_CHECKING:
    from integrator.documents.verdict import Verdict
    from integrator.review.actions import Held, Review
    from integrator.review.changes import FileDiff

RED, GREEN, CYAN, YELLOW, BOLD, RESET = (
    "\033[31m", "\033[32m", "\033[36m", "\033[33m", "\033[1m", "\033[0m",
)  # fmt: skip


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "review",
        help="list, show, approve or reject candidates held as FENCED or REVIEW",
        description="Held candidates wait in the spool's fenced/ and review/ folders, kept "
        f"alive by {refnames.HELD}<id>. Approval never bypasses the fence: it runs the "
        "candidate through integrate again under the contract the coordinator re-issued or "
        "expanded. Every action is recorded in the held ref's history and in the mirror.",
    )
    inner = parser.add_subparsers(dest="review_command", metavar="ACTION", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--spool",
            type=Path,
            metavar="DIR",
            help="the spool (default: $INTEGRATOR_SPOOL, else [defaults] spool of the configuration file)",
        )
        p.add_argument(
            "--repo", type=Path, metavar="PATH", help="canonical repo (default: the daemon's)"
        )
        configured(p, spool="required")
        p.add_argument("--mirror", type=Path, metavar="FILE", help="SQLite registry")
        p.add_argument("--json", action="store_true", help="print the result as JSON")

    list_parser = inner.add_parser(
        "list", help="held candidates with their codes, and expansion requests not granted"
    )
    common(list_parser)
    list_parser.set_defaults(func=run_list)

    show = inner.add_parser("show", help="a held candidate's violations beside its diff")
    show.add_argument("id", help="submission id")
    common(show)
    show.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    show.set_defaults(func=run_show)

    approve = inner.add_parser(
        "approve", help="run it through integrate again under a re-issued contract"
    )
    approve.add_argument("id", help="submission id")
    common(approve)
    approve.add_argument(
        "--contract",
        metavar="FILE",
        help="the re-issued or expanded contract (default: the task's live claim)",
    )
    approve.add_argument("--actor", default=None, help="who approves (default: user@host)")
    approve.add_argument("--reason", help="why, for the record")
    approve.set_defaults(func=run_approve)

    reject = inner.add_parser("reject", help="archive it with a reason; nothing is integrated")
    reject.add_argument("id", help="submission id")
    common(reject)
    reject.add_argument("--reason", required=True, help="why, for the record")
    reject.add_argument("--actor", default=None, help="who rejects (default: user@host)")
    reject.set_defaults(func=run_reject)

    _register_requeue(inner, common)
    _register_mark(inner)

    web = inner.add_parser(
        "web",
        help="serve the review pages (read-only unless --token-file is given)",
        description="Held candidates, each beside its contract and recomputed diff, the "
        "queue, and approve/reject forms, on http://127.0.0.1:8787/ by default. Pages only "
        "read; approving or rejecting needs the token in --token-file (log in on the page, "
        "or send `Authorization: Bearer TOKEN`) and goes through the same code as the "
        "commands above. A non-loopback --http is refused without a token and without "
        "--allow-host. "
        "/api/held and /api/held/ID return what `list --json` and `show ID --json` print.",
    )
    web.add_argument(
        "--spool",
        type=Path,
        metavar="DIR",
        help="the spool (default: $INTEGRATOR_SPOOL, else [defaults] spool of the configuration file)",
    )
    configured(web, spool="required")
    web.add_argument(
        "--repo", type=Path, metavar="PATH", help="canonical repo (default: the daemon's)"
    )
    web.add_argument("--mirror", type=Path, metavar="FILE", help="SQLite registry")
    web.add_argument(
        "--http",
        default="127.0.0.1:8787",
        metavar="HOST:PORT",
        help="where to listen (default 127.0.0.1:8787; port 0 picks a free one)",
    )
    web.add_argument(
        "--token-file",
        type=Path,
        metavar="FILE",
        help="a file holding the review token (not readable by other users)",
    )
    web.add_argument(
        "--actor", default=None, help="who the token acts as in the records (default: user@host)"
    )
    web.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="a Host header to serve besides the bound loopback address (repeatable; "
        "required off loopback: any other Host is refused)",
    )
    web.add_argument(
        "--log-file",
        type=Path,
        metavar="FILE",
        help="append the log (every request, every action and refusal) to FILE, created "
        "0600 (default: standard error)",
    )
    web.add_argument(
        "--log-format", choices=("auto", "json", "console"), default="auto", help="default auto"
    )
    web.set_defaults(func=run_web)


def _register_requeue(inner: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    requeue = inner.add_parser(
        "requeue",
        help="resubmit a candidate ejected by validation, under a new attempt",
        description="An ejected candidate's claim stays consumed (its landing happened), so "
        "requeueing reclaims the task (generation + 1, a new attempt, the same paths and "
        "resources, the candidate's own base) and submits the candidate again under that "
        "contract: it goes through the fence and validation like any other. The held "
        "record is archived naming the new submission. Refused when the task's claim moved "
        "on since (someone else holds it).",
    )
    requeue.add_argument("id", help="submission id")
    common(requeue)
    requeue.add_argument("--reason", required=True, help="why, for the record")
    requeue.add_argument("--actor", default=None, help="who requeues (default: user@host)")
    requeue.add_argument("--urgent", action="store_true", help="in the priority lane")
    requeue.set_defaults(func=run_requeue)


def _register_mark(inner: Any) -> None:
    mark = inner.add_parser(
        "mark-false-positive",
        help="record that the fence was wrong about a landing or a held submission",
        description="Mark a recorded submission — a held submission's id, or a landing's "
        "staging commit — a false positive: the fence (observe or enforce) was wrong about "
        f"it. Recorded in git on {refnames.FALSE_POSITIVES}<ID> (who, when, why, which "
        "codes; none named: all), like the other review actions; `integrator report observe` "
        "counts marks per category, and a category is ready for enforce only without any. "
        "--withdraw records that an earlier mark was itself a mistake.",
    )
    mark.add_argument("id", help="submission id, or the staging commit of a landing")
    mark.add_argument("--repo", type=Path, metavar="PATH", help="canonical repo")
    mark.add_argument("--spool", type=Path, metavar="DIR", help="the spool (names the repo)")
    mark.add_argument("--reason", required=True, help="why, for the record")
    mark.add_argument("--code", action="append", default=[], metavar="CODE", help="only this code")
    mark.add_argument("--withdraw", action="store_true", help="withdraw an earlier mark")
    mark.add_argument("--actor", default=None, help="who marks (default: user@host)")
    mark.add_argument("--json", action="store_true", help="print the mark as JSON")
    mark.set_defaults(func=run_mark)


@contextlib.contextmanager
def _review(args: argparse.Namespace, *, engine: bool = False) -> Iterator[Review]:
    from integrator.landing.engine import Integrator
    from integrator.review.actions import open_review

    logs.configure(stream=logs.STDERR)
    with open_review(
        args.spool, args.repo, args.mirror, engine=Integrator if engine else None
    ) as review:
        yield review


def _codes(verdict: Verdict) -> str:
    return ", ".join(dict.fromkeys(v.code.value for v in verdict.violations)) or "-"


def run_list(args: argparse.Namespace) -> int:
    from integrator.review.actions import expansion_lines, listing
    from integrator.review.documents import summary_document
    from integrator.store.spool import Spool

    logs.configure(stream=logs.STDERR)  # stdout carries the listing
    spool = Spool(args.spool).existing()
    items = listing(spool, args.repo)
    if args.json:
        print_json([summary_document(h) for h in items])
        return EXIT_OK
    requests = expansion_lines(spool, args.repo)
    if not items and not requests:
        say("nothing is held for review")
    for h in items:
        v = h.verdict
        say(
            f"{h.sid}  {v.decision.value:<7} {v.task_id or '-':<20} gen {v.generation or '-':<3} "
            f"{h.submission.candidate[:12]}  {_codes(v)}"
        )
    for line in requests:
        say(line)
    return EXIT_OK


def run_show(args: argparse.Namespace) -> int:
    from integrator.records.held import history
    from integrator.review.documents import show_document_of

    with _review(args) as review:
        held = review.get(args.id)
        base, files = review.diff(held)
        records = history(review.canonical, held.sid)
    if args.json:
        print_json(show_document_of(held, base, files, records))
        return EXIT_OK
    color = args.color == "always" or (
        args.color == "auto" and sys.stdout.isatty() and "NO_COLOR" not in os.environ
    )
    write_text(render_show(held, base, files, [a.wire() for _, a in records], color=color))
    return EXIT_OK


def render_show(
    held: Held,
    base: str | None,
    files: list[FileDiff],
    actions: list[dict[str, Any]],
    *,
    color: bool,
) -> str:
    """Violations first, then each file's patch under the violations that name it.

    Every piece of data (names, details, reasons, patch lines) is spelled out with
    `visible` before any colour of ours is added: an escape in a patch line cannot erase
    the line above it, a bidirectional override cannot reorder it.
    """

    def paint(code: str, text: str) -> str:
        return f"{code}{text}{RESET}" if color else text

    def v_(value: object) -> str:
        return visible(str(value))

    v = held.verdict
    who = held.submission.submitter
    out = [
        paint(BOLD, f"submission {held.sid}  {v.decision.value}  ({held.folder}/)"),
        f"task {v_(v.task_id)}  attempt {v_(v.attempt_id)}  generation {v.generation}",
        f"candidate {v_(held.submission.candidate)}  base {v_(v.base or '-')}",
        f"submitted by {v_(who.user)}@{v_(who.host)} at {held.submission.submitted_at.isoformat()}",
        "",
        paint(BOLD, "violations"),
    ]
    in_diff = {id(x) for f in files for x in f.violations}
    for x in v.violations:
        where = "" if id(x) in in_diff else "  (not in the diff)" if x.path else ""
        line = f"  ✗ {x.code.value:<20} {v_(x.subject)}: {v_(x.detail)}{where}"
        out.append(paint(RED, line))
    if not v.violations:
        out.append("  none")
    out += ["", paint(BOLD, "history")]
    for a in actions:
        codes = " ".join(a.get("codes", []))
        line = f"  {a['at']}  {a['action']:<8} by {a['actor']}: {a.get('decision') or ''} {codes} {a.get('reason') or ''}"
        out.append(v_(line.rstrip()))
    out += ["", paint(BOLD, f"diff {v_(base or '(empty tree)')}..{v_(held.submission.candidate)}")]
    if not files and base is None:
        out.append("  the candidate's objects are not in the repository")
    for f in files:
        out.append("")
        for x in f.violations:
            out.append(paint(RED, f"✗ {x.code.value}: {v_(x.detail)}"))
        for line in f.patch.splitlines():
            out.append(_paint_line(visible(line, keep_tabs=True), paint))
    return "\n".join(out) + "\n"


def _paint_line(line: str, paint: Any) -> str:
    if line.startswith(("+++", "---", "diff --git", "index ")):
        return str(paint(BOLD, line))
    if line.startswith("+"):
        return str(paint(GREEN, line))
    if line.startswith("-"):
        return str(paint(RED, line))
    if line.startswith("@@"):
        return str(paint(CYAN, line))
    return line


def run_approve(args: argparse.Namespace) -> int:
    from integrator.review.actions import default_actor

    contract = read_input(args.contract) if args.contract else None
    with _review(args, engine=True) as review:
        verdict = review.approve(args.id, args.actor or default_actor(), contract, args.reason)
    _print_verdict(args, args.id, verdict)
    return verdict.exit_code


def run_reject(args: argparse.Namespace) -> int:
    from integrator.review.actions import default_actor

    with _review(args) as review:
        review.reject(args.id, args.actor or default_actor(), args.reason)
    if args.json:
        print_json({"submission": args.id, "action": "reject", "folder": "archived"})
    else:
        say(f"{args.id} rejected and archived: {args.reason}")
    return EXIT_OK


def run_requeue(args: argparse.Namespace) -> int:
    from integrator.promotion.requeue import requeue
    from integrator.review.actions import default_actor

    with _review(args) as review:
        new_sid, contract = requeue(
            review, args.id, args.actor or default_actor(), args.reason, urgent=args.urgent
        )
    if args.json:
        print_json(
            {"submission": args.id, "action": "requeue", "requeuedAs": new_sid,
             "contract": contract.wire()}
        )  # fmt: skip
    else:
        say(
            f"{args.id} requeued as {new_sid} (task {contract.task_id}, attempt "
            f"{contract.attempt_id}, generation {contract.ownership_generation})"
        )
    return EXIT_OK


def _print_verdict(args: argparse.Namespace, sid: str, verdict: Verdict) -> None:
    if args.json:
        print_json({"submission": sid, "action": "approve", "verdict": verdict.wire()})
        return
    codes = _codes(verdict)
    say(f"{sid} {verdict.decision.value}" + (f" ({codes})" if verdict.violations else ""))
    for x in verdict.violations:
        say(f"  {x.code.value} {x.subject}: {x.detail}")
    if verdict.staging_commit:
        say(f"  landed as {verdict.staging_commit}")


def run_web(args: argparse.Namespace) -> int:
    """Serve the review pages until SIGINT or SIGTERM."""
    from integrator.landing.engine import Integrator
    from integrator.review.actions import default_actor, open_review
    from integrator.review.documents import show_document, summary_document
    from integrator.tokens import read_token
    from integrator.web.app import Backend, WebConfig
    from integrator.web.server import serve

    stream = logs.append_to(args.log_file) if args.log_file else logs.STDERR
    logs.configure(fmt=args.log_format, stream=stream)
    token = read_token(args.token_file) if args.token_file else None
    with open_review(args.spool, args.repo, args.mirror):
        pass  # the spool and the repository are there before anything listens

    def opener(engine: bool) -> contextlib.AbstractContextManager[Review]:
        lander = Integrator if engine else None
        return open_review(args.spool, args.repo, args.mirror, engine=lander)

    backend = Backend(open_review=opener, summary=summary_document, show=show_document)
    config = WebConfig(token=token, actor=args.actor or default_actor())
    return serve(args.http, config, backend, sys.stdout, args.allow_host)


def run_mark(args: argparse.Namespace) -> int:
    from integrator.documents.verdict import Code
    from integrator.records.canonical import Canonical
    from integrator.records.marks import FalsePositive, write_mark
    from integrator.review.actions import default_actor
    from integrator.rollout.observe import find_subject
    from integrator.rollout.records import Records
    from integrator.store.spool import Spool

    unknown = [c for c in args.code if c not in Code.__members__]
    if unknown:
        raise UsageError(f"unknown code(s): {', '.join(unknown)}")
    repo = args.repo or (Spool(args.spool).existing().repo_path() if args.spool else None)
    if repo is None:
        raise UsageError("pass --repo PATH (or --spool DIR of a daemon that names its repository)")
    with Canonical(repo) as canonical:
        canonical.refresh()
        record = find_subject(Records(canonical), args.id)
        mark = FalsePositive(
            subject=record.key,
            kind=record.kind,
            candidate=record.candidate,
            task_id=record.task_id,
            codes=list(dict.fromkeys(args.code)),
            actor=args.actor or default_actor(),
            at=canonical.clock(),
            reason=args.reason,
            withdrawn=args.withdraw,
        )
        commit = write_mark(canonical, mark)
    if args.json:
        print_json({**mark.wire(), "commit": commit})
    else:
        verb = (
            "withdrew the false-positive mark on" if args.withdraw else "marked a false positive:"
        )
        say(f"{verb} {record.describe()} ({', '.join(mark.codes) or 'all codes'}): {args.reason}")
    return EXIT_OK
