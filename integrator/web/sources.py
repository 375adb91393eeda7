"""What the review pages read from the spool and the canonical repository.

Reads only, each bounded: a candidate's patch is weighed from object headers before it is
rendered, the queue's history and the spool's folders are read up to a fixed number of
entries, and no link in a folder a producer made is followed.
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pygit2
import structlog

from integrator import jsontext
from integrator.documents.submission import Submission
from integrator.documents.trailers import TRAILER_CANDIDATE
from integrator.errors import IntegratorError, UsageError
from integrator.files import read_at_most
from integrator.limits import PAGE_PATCH_BYTES, RAW_PATCH_BYTES
from integrator.records import claims
from integrator.records.canonical import Canonical
from integrator.records.expansions import expansions
from integrator.records.held import history
from integrator.records.landings import Finder
from integrator.records.marks import FalsePositive, read_marks
from integrator.records.marks import history as marks_history
from integrator.review.actions import Held, Review, pending
from integrator.review.seen import NO_CLAIM, ClaimMark
from integrator.store.spool import ID_RE, VERDICT_FILE, Spool
from integrator.web import candidate as candidate_views
from integrator.web import queue_view, views

log = structlog.get_logger("integrator.web")

RAW_PATCH_CAP = 8 * 1024 * 1024  # bytes of raw patch served
WAITING_LIMIT = 200  # submissions listed per folder on the Queue page
LANDED_LIMIT = 25  # staging commits shown
QUEUE_WALK_LIMIT = 500  # first parents walked to find them
ACCEPTED_SCAN = 500  # newest accepted/ verdicts read to name each landing's submission
SMALL_FILE = 1 << 20


def read_small(path: Path, limit: int = SMALL_FILE) -> bytes | None:
    """A regular file's bytes (None when it is a link, not a file, or larger than `limit`)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = read_at_most(fd, limit + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data if len(data) <= limit else None


def real_folder(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def landing_of(finder: Finder, staging: str | None) -> views.LandingView | None:
    """Where the landing `staging` names is now (`records.landings.locate`, as `status`
    reads it), None without one or when it cannot be read (the page is still worth it)."""
    if staging is None:
        return None
    try:
        where = finder.wire(staging)
    except (IntegratorError, KeyError, ValueError, pygit2.GitError) as err:
        log.warning("web.landing_unreadable", staging=staging, error=str(err))
        return None
    return views.landing_view(where) if where is not None else None


# -- the Candidate page ----------------------------------------------------------------------


def candidate_page(review: Review, sid: str) -> candidate_views.CandidateView:
    """Read everything the Candidate page shows (UsageError when `sid` is not held)."""
    held = review.get(sid)
    canonical = review.canonical
    diff = review.changes(held, patch_limit=PAGE_PATCH_BYTES)
    omitted = None
    if not diff.with_patches and diff.files:
        omitted = (
            f"the changed blobs weigh {diff.weight:,} bytes, more than the "
            f"{PAGE_PATCH_BYTES:,} a page shows; the raw patch is capped at {RAW_PATCH_CAP:,}"
        )
    task, _, _ = held.subject()
    claim_chain: list[tuple[str, dict[str, object], str]] = []
    requests = []
    if task:
        try:
            claim_chain = claims.history(canonical, task)
        except (IntegratorError, KeyError, ValueError, pygit2.GitError) as err:
            log.warning("web.claim_history_unreadable", task=task, error=str(err))
        requests = expansions(canonical, task)
    return candidate_views.candidate_view(
        held,
        diff.base,
        diff.files,
        claim_chain=claim_chain,
        review_chain=history(canonical, held.sid),
        expansions=requests,
        omitted=omitted,
        mark=_mark(canonical, held.sid),
        landing=landing_of(Finder(canonical), held.verdict.staging_commit),
        claim=_claim_mark(review, held),
    )


def _claim_mark(review: Review, held: Held) -> ClaimMark:
    """The task's live claim as the page shows it (and its forms carry); unreadable, as
    none: an action then compares against what it reads itself, and says so."""
    try:
        return ClaimMark.of(review.live_claim(held))
    except (IntegratorError, KeyError, ValueError, pygit2.GitError) as err:
        log.warning("web.claim_unreadable", submission=held.sid, error=str(err))
        return NO_CLAIM


def _mark(canonical: Canonical, sid: str) -> FalsePositive | None:
    """The newest false-positive mark on `sid` (None when none can be read)."""
    try:
        found = marks_history(canonical, sid)
    except (IntegratorError, KeyError, ValueError):
        return None
    return found[0] if found else None


def raw_patch(review: Review, sid: str) -> bytes:
    """The candidate's patch as text, at most RAW_PATCH_CAP bytes (a last line says so)."""
    held = review.get(sid)
    diff = review.changes(held, patch_limit=RAW_PATCH_BYTES)
    header = f"# submission {sid}: {diff.base or '(empty tree)'}..{held.submission.candidate}\n"
    if not diff.with_patches:
        if not diff.files:
            return (header + "# no changes (or the candidate's objects are missing)\n").encode()
        return (
            header + f"# the changed blobs weigh {diff.weight:,} bytes, more than the "
            f"{RAW_PATCH_BYTES:,} served here; run git diff {diff.base} "
            f"{held.submission.candidate} in the canonical repository\n"
        ).encode()
    body = header.encode() + b"".join(
        f.patch.encode("utf-8", "surrogateescape") for f in diff.files
    )
    if len(body) > RAW_PATCH_CAP:
        cut = body[:RAW_PATCH_CAP]
        return cut + f"\n# cut at {RAW_PATCH_CAP:,} of {len(body):,} bytes\n".encode()
    return body


def held_page(spool: Spool, canonical: Canonical, filters: views.Filters) -> views.HeldPage:
    """The Held page: one page of the held candidates (counted over all of them) and the
    expansion requests waiting."""
    requests = []
    with contextlib.suppress(IntegratorError):  # the held candidates are still worth listing
        requests = expansions(canonical, pending_only=True)
    marks = {}
    with contextlib.suppress(IntegratorError, KeyError, ValueError):
        marks = read_marks(canonical)
    finder = Finder(canonical)

    def landing(held: Held) -> views.LandingView | None:
        # held after landing: its landing was ejected (or rebuilt away)
        return landing_of(finder, held.verdict.staging_commit)

    return views.held_page(pending(spool), filters, datetime.now(UTC), requests, marks, landing)


# -- the Queue page --------------------------------------------------------------------------


def _waiting(spool: Spool, folder: str, now: datetime) -> tuple[list[views.WaitingRow], int]:
    names = spool.entries(folder)
    rows = []
    for sid in names[:WAITING_LIMIT]:
        path = spool.folder(folder) / sid
        submission: Submission | None = None
        problem = None
        if not real_folder(path):
            problem = "not a submission folder (the daemon files it under rejected/)"
        else:
            try:
                submission, _ = spool.load(path)
            except IntegratorError as err:
                problem = str(err)
        rows.append(views.waiting_row(folder, sid, submission, problem, now))
    return rows, len(names)


@dataclass(frozen=True)
class Landed:
    """A filed submission whose verdict names a staging commit (it landed)."""

    sid: str
    folder: str
    staging: str
    task: object


def _landed(spool: Spool) -> list[Landed]:
    """The newest landed submissions: ACCEPTED ones in accepted/, and ejected ones (held in
    fenced/ with the queue commit they were taken out as), newest first."""
    out: list[Landed] = []
    for folder in ("accepted", "fenced"):
        for sid in reversed(spool.entries(folder)[-ACCEPTED_SCAN:]):
            data = read_small(spool.folder(folder) / sid / VERDICT_FILE)
            if data is None:
                continue
            try:
                doc = jsontext.loads(data)
                staging, task = doc.get("stagingCommit"), doc.get("taskId")
            except (ValueError, AttributeError):
                continue
            if isinstance(staging, str):
                out.append(Landed(sid, folder, staging, task))
    return sorted(out, key=lambda entry: entry.sid, reverse=True)


def queue_page(spool: Spool, canonical: Canonical) -> views.QueueView:
    """What waits in new/ and work/, and the staging commits that landed last."""
    now = datetime.now(UTC)
    new, new_total = _waiting(spool, "new", now)
    work, work_total = _waiting(spool, "work", now)
    ref = canonical.queue_ref
    head = canonical.ref(ref)
    finder = Finder(canonical)
    submissions = _landed(spool)
    sids: dict[str, str] = {}
    for entry in submissions:
        if entry.folder == "accepted":
            sids.setdefault(entry.staging, entry.sid)
    landed: list[views.LandedRow] = []
    oid = head
    for _ in range(QUEUE_WALK_LIMIT):
        if oid is None or len(landed) >= LANDED_LIMIT:
            break
        try:
            commit = canonical.commit(oid)
        except (IntegratorError, KeyError, ValueError):
            break
        if f"{TRAILER_CANDIDATE}: " in commit.message:
            at = datetime.fromtimestamp(commit.commit_time, UTC)
            where = landing_of(finder, oid)
            landed.append(views.landed_row(oid, commit.message, at, sids.get(oid), where))
        oid = str(commit.parent_ids[0]) if commit.parent_ids else None
    accepted = []
    for entry in submissions[:LANDED_LIMIT]:
        found = landing_of(finder, entry.staging)
        if found is not None:
            held = entry.folder == "fenced" and ID_RE.match(entry.sid) is not None
            accepted.append(
                views.accepted_row(
                    entry.sid, entry.folder, entry.task, entry.staging, found, held=held
                )
            )
    return views.QueueView(
        queue_ref=ref,
        head=head or "-",
        waiting=tuple(new + work),
        waiting_total=new_total + work_total,
        landed=tuple(landed),
        accepted=tuple(accepted),
    )


def promotion_status(canonical: Canonical, now: datetime) -> queue_view.PromotionView:
    """What `integrator queue status` reads (the control, the validation policy, the queue's
    state, per scope `scope_status`), and every landing's passage for the charts; a state
    that cannot be read is shown as its problem, as the command shows it."""
    from integrator.promotion.state import QueueState, read_state
    from integrator.promotion.stats import Passage, scope_status, timeline
    from integrator.records.queue_control import read_control

    control = None
    mode: str | None = None
    state: QueueState | None = None
    problem = None
    scopes: dict[str, Any] = {}
    passages: list[Passage] = []
    try:
        control = read_control(canonical)
        validation = canonical.policy_state().policy.validation
        mode = validation.mode if validation is not None else None
        state = read_state(canonical)
        if validation is not None:
            scopes = scope_status(canonical, validation, state, now)
            passages = timeline(canonical, state)
    except (IntegratorError, KeyError, ValueError, pygit2.GitError) as err:
        log.warning("web.queue_state_unreadable", error=str(err))
        problem = str(err)  # the rest of the page is still worth it
    return queue_view.promotion_view(
        canonical.target_ref,
        control=control,
        mode=mode,
        pending=state.pending if state is not None else 0,
        scopes=scopes,
        passages=passages,
        now=now,
        problem=problem,
    )


def check_sid(sid: str) -> str:
    """`sid` when it is a spool id; UsageError otherwise (nothing else reaches the spool)."""
    if not ID_RE.match(sid):
        raise UsageError(f"{views.text(sid, 80)!r} is not a submission id")
    return sid
