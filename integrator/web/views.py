"""View models of the Held and Queue pages: plain data shaped for templates, by pure functions.

Everything an agent wrote (paths, task names, submitter fields, commit messages, contract
text, reasons) passes through `text` here, which spells out control and format characters
(`integrator.escape.visible`); the templates escape HTML on top (autoescape), so
a path named `<script>alert(1)</script>` is shown as those characters and nothing else.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

from integrator.documents.submission import Submission
from integrator.documents.trailers import TRAILER_CANDIDATE, trailers
from integrator.documents.verdict import Code, Verdict
from integrator.escape import visible
from integrator.limits import HELD_PAGE_ROWS
from integrator.records.expansions import ExpansionEntry
from integrator.records.landings import describe, ejection_of, summary
from integrator.records.marks import FalsePositive
from integrator.review.actions import Held

HELD_DECISIONS = ("FENCED", "REVIEW")
REASON_LIMIT = 160  # characters of the one-line reason on the list
_CODES = frozenset(c.value for c in Code)


def text(value: object, limit: int | None = None) -> str:
    """`value` as one safe line of text (control characters spelled out, tabs kept)."""
    shown = "\t".join(visible(part) for part in str(value).split("\t"))
    if limit is not None and len(shown) > limit:
        return shown[: limit - 1] + "…"
    return shown


def _page_number(value: str) -> bool:
    """`value` is a page number: ASCII digits, at least 1, at most nine of them."""
    return value.isascii() and value.isdigit() and len(value) <= 9 and int(value) > 0


def submitted_at(sid: str) -> datetime | None:
    """The time a spool id names (the spool generates ids: UTC time to the microsecond)."""
    try:
        return datetime.strptime(sid[:22], "%Y%m%dT%H%M%S%fZ").replace(tzinfo=UTC)
    except ValueError:
        return None


def duration(span: timedelta) -> str:
    """`span` in the largest two units people read at a glance: 45s, 3m 12s, 2h 5m, 4d 1h."""
    seconds = max(0, int(span.total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {secs}s"
    return f"{secs}s"


def age(sid: str, now: datetime) -> str:
    moment = submitted_at(sid)
    return duration(now - moment) if moment else "-"


def codes_of(verdict: Verdict) -> tuple[str, ...]:
    return tuple(dict.fromkeys(v.code.value for v in verdict.violations))


def reason_line(verdict: Verdict) -> str:
    """The verdict in one line: the first enforced violation (else the first), shortened."""
    first = next((v for v in verdict.violations if v.enforced), None) or next(
        iter(verdict.violations), None
    )
    if first is None:
        return "-"
    line = first.detail if first.subject == "-" else f"{first.subject}: {first.detail}"
    return text(line, REASON_LIMIT)


# -- where a landing is ----------------------------------------------------------------------


@dataclass(frozen=True)
class LandingView:
    """Where a landed submission's change is now, as `status` tells it
    (`records.landings.locate`): every value shown passes through `text`."""

    state: str  # queued, promoted, ejected, reverted, gone
    summary: str  # a few words for a list
    line: str  # one sentence for the Candidate page
    commit: str  # the queue commit holding it now, or "-"
    code: str | None = None  # ejected: the ejection's code
    why: str | None = None  # ejected: its detail
    reverted_by: str | None = None


def landing_view(where: Mapping[str, object]) -> LandingView:
    """The page's view of a `Whereabouts.wire()` document."""
    found = dict(where)
    state = text(found.get("state", "-"), 20)
    code, why = ejection_of(found) if state == "ejected" else (None, None)
    reverted = found.get("revertedBy")
    return LandingView(
        state=state,
        summary=text(summary(found), 120),
        line=text(describe(found), 400),
        commit=text(found.get("stagingCommit") or "-", 40),
        code=text(code, 40) if code is not None else None,
        why=text(why, 1000) if why is not None else None,
        reverted_by=text(reverted, 40) if isinstance(reverted, str) else None,
    )


# -- the Held page ---------------------------------------------------------------------------


@dataclass(frozen=True)
class HeldRow:
    sid: str
    folder: str
    decision: str
    task: str
    agent: str
    generation: str
    codes: tuple[str, ...]
    age: str
    reason: str
    candidate: str
    raw_task: str | None = field(default=None, repr=False)
    legacy: bool = False  # a runner without ownership generations: review only
    false_positive: str | None = None  # the reason a release manager marked it one
    landing: LandingView | None = None  # held after it landed: its landing was ejected


@dataclass(frozen=True)
class HeldFacts:
    """What the Held page filters and counts by, for every held candidate (the rows shown
    are made only for the page: their text is spelled out, which costs)."""

    sid: str
    decision: str
    codes: tuple[str, ...]
    raw_task: str | None
    legacy: bool

    @classmethod
    def of(cls, held: Held) -> HeldFacts:
        task, _, _ = held.subject()
        verdict = held.verdict
        return cls(held.sid, verdict.decision.value, codes_of(verdict), task, is_legacy(verdict))


@dataclass(frozen=True)
class Filters:
    """The Held page's query: each filter is dropped when its value is not a known one;
    `page` is the page of the filtered list shown (from 1; past the last: the last)."""

    code: str | None = None
    task: str | None = None
    decision: str | None = None
    page: int = 1

    @classmethod
    def parse(cls, query: Mapping[str, str]) -> Filters:
        code = query.get("code") or None
        decision = (query.get("decision") or "").upper() or None
        task = query.get("task") or None
        number = query.get("page") or ""
        return cls(
            code if code in _CODES else None,
            task[:200] if task else None,
            decision if decision in HELD_DECISIONS else None,
            int(number) if _page_number(number) else 1,
        )

    def keep(self, facts: HeldFacts | HeldRow) -> bool:
        return (
            (self.code is None or self.code in facts.codes)
            and (self.task is None or self.task == facts.raw_task)
            and (self.decision is None or self.decision == facts.decision)
        )

    def link(self, page: int | None = None, **changes: str | None) -> str:
        """The query string of these filters with `changes` applied (None drops one), on
        page `page` (none given: the first, since the filtered list changed)."""
        values: dict[str, object] = {
            "code": self.code, "task": self.task, "decision": self.decision, **changes,
        }  # fmt: skip
        if page is not None and page > 1:
            values["page"] = page
        return "?" + urlencode({k: v for k, v in values.items() if v})

    @property
    def active(self) -> bool:
        return any((self.code, self.task, self.decision))


@dataclass(frozen=True)
class ExpansionRow:
    request_id: str
    task: str
    state: str
    at: str
    reason: str
    adds: str


@dataclass(frozen=True)
class HeldPage:
    rows: tuple[HeldRow, ...]  # the rows of this page
    total: int  # every held candidate
    counts: tuple[tuple[str, int], ...]
    decisions: tuple[tuple[str, int], ...]
    tasks: tuple[str, ...]
    filters: Filters
    expansions: tuple[ExpansionRow, ...] = ()
    matching: int = 0  # held candidates the filters keep, on every page
    page: int = 1
    pages: int = 1
    first: int = 0  # the place of this page's first row among the matching ones (from 1)
    legacy: int = 0  # matching candidates from a legacy runner, on every page

    @property
    def last(self) -> int:
        return self.first + len(self.rows) - 1 if self.rows else self.first

    @property
    def previous_link(self) -> str | None:
        return self.filters.link(self.page - 1) if self.page > 1 else None

    @property
    def next_link(self) -> str | None:
        return self.filters.link(self.page + 1) if self.page < self.pages else None


def is_legacy(verdict: Verdict) -> bool:
    return any(v.code is Code.LEGACY_SUBMISSION for v in verdict.violations)


def mark_line(mark: FalsePositive | None) -> str | None:
    """A false-positive mark in one line (None: not marked, or the mark was withdrawn)."""
    if mark is None or mark.withdrawn:
        return None
    codes = ", ".join(mark.codes) or "all codes"
    return text(
        f"{mark.actor} at {mark.at.isoformat(timespec='seconds')} ({codes}): {mark.reason}", 300
    )


def held_row(
    held: Held,
    now: datetime,
    mark: FalsePositive | None = None,
    landing: LandingView | None = None,
) -> HeldRow:
    task, _, generation = held.subject()
    who = held.submission.submitter
    return HeldRow(
        sid=held.sid,
        folder=held.folder,
        decision=held.verdict.decision.value,
        task=text(task or "-", 80),
        agent=text(f"{who.user}@{who.host}", 80),
        generation=str(generation) if generation is not None else "-",
        codes=codes_of(held.verdict),
        age=age(held.sid, now),
        reason=reason_line(held.verdict),
        candidate=held.submission.candidate[:12],
        raw_task=task,
        legacy=is_legacy(held.verdict),
        false_positive=mark_line(mark),
        landing=landing,
    )


def expansion_row(entry: ExpansionEntry) -> ExpansionRow:
    added = [*entry.request.add_paths, *entry.request.add_resources]
    return ExpansionRow(
        request_id=text(entry.record.request_id),
        task=text(entry.record.task_id, 80),
        state=entry.record.state,
        at=entry.record.at.isoformat(timespec="seconds"),
        reason=text(entry.record.reason, 300),
        adds=text(", ".join(added) or "nothing", 300),
    )


def held_page(
    items: Sequence[Held],
    filters: Filters,
    now: datetime,
    expansions: Sequence[ExpansionEntry] = (),
    marks: Mapping[str, FalsePositive] | None = None,
    landing: Callable[[Held], LandingView | None] | None = None,
    per_page: int = HELD_PAGE_ROWS,
) -> HeldPage:
    """One page of the held candidates, newest first, the filtered ones shown, counts over
    all; `landing` (where an ejected landing is now: a read of the repository) is asked only
    for the rows of the page."""
    marked = marks or {}
    by_sid = {h.sid: h for h in items}
    facts = sorted((HeldFacts.of(h) for h in items), key=lambda f: f.sid, reverse=True)
    counts = Counter(code for f in facts for code in f.codes)
    decisions = Counter(f.decision for f in facts)
    tasks = sorted({f.raw_task for f in facts if f.raw_task})
    kept = [f for f in facts if filters.keep(f)]
    pages = max(1, -(-len(kept) // per_page))
    page = min(filters.page, pages)
    start = (page - 1) * per_page
    shown = []
    for f in kept[start : start + per_page]:
        held = by_sid[f.sid]
        where = landing(held) if landing is not None else None
        shown.append(held_row(held, now, marked.get(f.sid), where))
    return HeldPage(
        rows=tuple(shown),
        total=len(facts),
        counts=tuple(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
        decisions=tuple((d, decisions[d]) for d in HELD_DECISIONS if decisions[d]),
        tasks=tuple(text(t, 80) for t in tasks),
        filters=replace(filters, page=page),
        expansions=tuple(expansion_row(e) for e in expansions),
        matching=len(kept),
        page=page,
        pages=pages,
        first=start + 1 if shown else 0,
        legacy=sum(r.legacy for r in kept),
    )


# -- the Queue page --------------------------------------------------------------------------


@dataclass(frozen=True)
class WaitingRow:
    folder: str
    sid: str
    task: str
    agent: str
    candidate: str
    age: str
    problem: str | None


@dataclass(frozen=True)
class LandedRow:
    commit: str
    summary: str
    task: str
    attempt: str
    generation: str
    candidate: str
    landed_at: str
    in_queue: str
    sid: str
    landing: LandingView | None = None


@dataclass(frozen=True)
class AcceptedRow:
    """A submission that landed: where its landing is now."""

    sid: str
    folder: str
    task: str
    staging: str
    landing: LandingView
    held: bool = False  # held for review (ejected): its Candidate page exists


@dataclass(frozen=True)
class QueueView:
    queue_ref: str
    head: str
    waiting: tuple[WaitingRow, ...]
    waiting_total: int
    landed: tuple[LandedRow, ...]
    accepted: tuple[AcceptedRow, ...] = ()


def waiting_row(
    folder: str, sid: str, submission: Submission | None, problem: str | None, now: datetime
) -> WaitingRow:
    """A submission in new/ or work/ (or why it cannot be read as one)."""
    if submission is None:
        return WaitingRow(folder, text(sid, 80), "-", "-", "-", age(sid, now), text(problem or "?"))
    task = submission.contract.get("taskId")
    who = submission.submitter
    return WaitingRow(
        folder=folder,
        sid=sid,
        task=text(task if isinstance(task, str) else "-", 80),
        agent=text(f"{who.user}@{who.host}", 80),
        candidate=submission.candidate[:12],
        age=age(sid, now),
        problem=None,
    )


def landed_row(
    commit: str,
    message: str,
    landed_at: datetime,
    sid: str | None,
    landing: LandingView | None = None,
) -> LandedRow:
    """A staging commit on the queue: its trailers, and how long its submission waited
    (from the spool id's time to the staging commit's)."""
    found = trailers(message)
    queued = submitted_at(sid) if sid else None
    return LandedRow(
        commit=commit[:12],
        summary=text(message.split("\n", 1)[0], 120),
        task=text(found.get("Integrator-Task", "-"), 80),
        attempt=text(found.get("Integrator-Attempt", "-"), 80),
        generation=text(found.get("Integrator-Generation", "-"), 20),
        candidate=text(found.get(TRAILER_CANDIDATE, "-"))[:12],
        landed_at=landed_at.isoformat(timespec="seconds"),
        in_queue=duration(landed_at - queued) if queued else "-",
        sid=sid or "-",
        landing=landing,
    )


def accepted_row(
    sid: str, folder: str, task: object, staging: str, landing: LandingView, *, held: bool
) -> AcceptedRow:
    """A landed submission of the spool (`held`: its id is one the Candidate page takes)."""
    return AcceptedRow(
        sid=text(sid, 80),
        folder=folder,
        task=text(task if isinstance(task, str) else "-", 80),
        staging=text(staging, 40)[:12],
        landing=landing,
        held=held,
    )
