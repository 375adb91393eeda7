"""The Candidate page's view model: verdict, contract beside the recomputed diff, histories.

Pure: it receives what was read from the spool and the repository and shapes it; every
value an agent wrote passes through `views.text` (see `integrator.web.views`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from integrator.documents.bounds import CEILING_LIMITS
from integrator.documents.contract import OwnershipContract, parse_contract
from integrator.documents.verdict import Verdict, Violation
from integrator.errors import ContractError
from integrator.limits import DIFF_CHARS, DIFF_LINES, PAGE_FILES, PAGE_VIOLATIONS
from integrator.paths import Match, PathMatcher
from integrator.records.expansions import ExpansionEntry
from integrator.records.held import ReviewAction
from integrator.records.marks import FalsePositive
from integrator.review.actions import Held
from integrator.review.changes import FileDiff
from integrator.review.seen import NO_CLAIM, ClaimMark
from integrator.web.views import (
    ExpansionRow,
    LandingView,
    codes_of,
    expansion_row,
    is_legacy,
    mark_line,
    text,
)

STATUS_NAMES = {
    "A": "added",
    "D": "deleted",
    "M": "modified",
    "R": "renamed",
    "C": "copied",
    "T": "type changed",
}


@dataclass(frozen=True)
class MatchLine:
    """How the contract decides one path: the line that allowed or denied it."""

    path: str
    allowed: bool
    line: str


@dataclass(frozen=True)
class FileRow:
    path: str
    old_path: str | None
    status: str
    status_name: str
    old_mode: str
    new_mode: str
    violations: tuple[tuple[str, str], ...]
    ends: tuple[MatchLine, ...]

    @property
    def violating(self) -> bool:
        return bool(self.violations)


@dataclass(frozen=True)
class ContractView:
    parsed: bool
    problem: str | None
    task: str
    attempt: str
    generation: str
    base: str
    paths: tuple[str, ...]
    deny: tuple[str, ...]
    resources: tuple[str, ...]
    holder: str
    expires: str
    max_patch_bytes: str
    digest: str
    document: str


@dataclass(frozen=True)
class ViolationRow:
    code: str
    subject: str
    detail: str
    mode: str
    in_diff: bool


@dataclass(frozen=True)
class ResourceRow:
    resource: str
    determination: str
    paths: str


@dataclass(frozen=True)
class ClaimEvent:
    commit: str
    event: str
    generation: str
    attempt: str
    state: str
    lease: str
    summary: str


@dataclass(frozen=True)
class ReviewEvent:
    commit: str
    at: str
    action: str
    actor: str
    outcome: str
    reason: str


@dataclass(frozen=True)
class DiffLine:
    kind: str  # file, meta, hunk, add, del, ctx
    text: str


@dataclass(frozen=True)
class DiffView:
    lines: tuple[DiffLine, ...]
    weight: int
    truncated: bool
    omitted: str | None = None


@dataclass(frozen=True)
class CandidateView:
    sid: str
    folder: str
    decision: str
    codes: tuple[str, ...]
    task: str
    attempt: str
    generation: str
    agent: str
    submitted: str
    candidate: str
    base: str
    diff_base: str
    violations: tuple[ViolationRow, ...]
    resources: tuple[ResourceRow, ...]
    contract: ContractView
    files: tuple[FileRow, ...]
    live_claim: str
    claim_history: tuple[ClaimEvent, ...]
    review_history: tuple[ReviewEvent, ...]
    expansions: tuple[ExpansionRow, ...]
    diff: DiffView
    legacy: bool = False
    false_positive: str | None = None
    landing: LandingView | None = None  # held after it landed: where that landing is now
    claim: ClaimMark = NO_CLAIM  # the live claim as shown: the forms carry it
    files_left_out: str | None = None  # past PAGE_FILES: what the list leaves out
    violations_left_out: str | None = None  # past PAGE_VIOLATIONS

    @property
    def claim_generation(self) -> str:
        return "" if self.claim.generation is None else str(self.claim.generation)


def mode(value: int) -> str:
    return f"{value:06o}" if value else "-"


def match_line(path: str, found: Match) -> MatchLine:
    if found.denied_by is not None:
        line = f"deny {found.denied_by!r}"
    elif found.allowed_by is not None:
        line = f"allow {found.allowed_by!r}"
    else:
        line = "no allow line matches"
    return MatchLine(text(path), found.allowed, text(line, 300))


def contract_of(held: Held) -> tuple[OwnershipContract | None, str | None]:
    """The contract the candidate was submitted with, parsed; else why it does not parse."""
    try:
        return parse_contract(held.submission.contract_bytes(), limits=CEILING_LIMITS), None
    except ContractError as err:
        return None, text(str(err), 1000)


def contract_view(held: Held) -> ContractView:
    contract, problem = contract_of(held)
    document = json.dumps(held.submission.contract, indent=2, ensure_ascii=False, default=str)
    shown = "\n".join(text(line) for line in document.splitlines())
    if contract is None:
        sent = held.submission.contract
        return ContractView(
            False, problem, text(sent.get("taskId", "-"), 80), text(sent.get("attemptId", "-"), 80),
            text(sent.get("ownershipGeneration", "-"), 20), "-", (), (), (), "-", "-", "-", "-",
            shown,
        )  # fmt: skip
    return ContractView(
        parsed=True,
        problem=None,
        task=text(contract.task_id),
        attempt=text(contract.attempt_id),
        generation=str(contract.ownership_generation),
        base=contract.base_commit,
        paths=tuple(text(p) for p in contract.paths),
        deny=tuple(text(p) for p in contract.deny),
        resources=tuple(text(r) for r in contract.resources),
        holder=text(contract.lease.holder, 200),
        expires=contract.lease.expires_at.isoformat(),
        max_patch_bytes=f"{contract.max_patch_bytes:,}",
        digest=contract.digest,
        document=shown,
    )


def listed(files: Sequence[FileDiff], limit: int = PAGE_FILES) -> list[FileDiff]:
    """At most `limit` of `files`, in their order: those with violations first chosen,
    then the others from the top (linear in the number of files)."""
    if len(files) <= limit:
        return list(files)
    keep = [i for i, f in enumerate(files) if f.violations][:limit]
    chosen = set(keep)
    for i in range(len(files)):
        if len(keep) >= limit:
            break
        if i not in chosen:
            keep.append(i)
    return [files[i] for i in sorted(keep)]


def left_out(files: Sequence[FileDiff], shown: Sequence[FileDiff]) -> str | None:
    """What a capped file list leaves out, in words (None: nothing)."""
    missing = len(files) - len(shown)
    if missing <= 0:
        return None
    violating = sum(1 for f in files if f.violations) - sum(1 for f in shown if f.violations)
    return (
        f"{len(shown):,} of {len(files):,} changed paths are listed (a page lists at most "
        f"{PAGE_FILES:,}, those with violations first); {missing:,} are left out, "
        f"{violating:,} of them with violations: the raw patch and "
        "`integrator review show ID` have them all"
    )


def file_rows(files: Sequence[FileDiff], matcher: PathMatcher | None) -> tuple[FileRow, ...]:
    """Each changed path, its modes, the violations naming it and, for both ends of a
    rename, the contract line that decided it."""
    rows = []
    for f in files:
        ends: list[MatchLine] = []
        if matcher is not None:
            for end in (f.old_path, f.path):
                if end is not None:
                    ends.append(match_line(end, matcher.match(end)))
        rows.append(
            FileRow(
                path=text(f.path),
                old_path=text(f.old_path) if f.old_path else None,
                status=f.status,
                status_name=STATUS_NAMES.get(f.status, f.status),
                old_mode=mode(f.old_mode),
                new_mode=mode(f.new_mode),
                violations=tuple((v.code.value, text(v.detail, 400)) for v in f.violations),
                ends=tuple(ends),
            )
        )
    return tuple(rows)


def diff_view(
    files: Sequence[FileDiff], weight: int, omitted: str | None = None, limit: int = DIFF_CHARS
) -> DiffView:
    """The candidate's unified diff as classified lines, cut at `limit` characters."""
    if omitted is not None:
        return DiffView((), weight, True, omitted)
    lines: list[DiffLine] = []
    used = 0
    for f in files:
        for raw in f.patch.splitlines():
            if used + len(raw) > limit or len(lines) >= DIFF_LINES:
                return DiffView(tuple(lines), weight, True)
            used += len(raw) + 1
            lines.append(DiffLine(_kind(raw), text(raw)))
    return DiffView(tuple(lines), weight, False)


def _kind(line: str) -> str:
    if line.startswith("diff --git"):
        return "file"
    if line.startswith(("+++", "---", "index ", "new file", "deleted file", "similarity", "rename ", "old mode", "new mode", "Binary")):  # fmt: skip
        return "meta"
    if line.startswith("@@"):
        return "hunk"
    if line.startswith("+"):
        return "add"
    if line.startswith("-"):
        return "del"
    return "ctx"


def violation_rows(
    verdict: Verdict, files: Sequence[FileDiff], limit: int = PAGE_VIOLATIONS
) -> tuple[ViolationRow, ...]:
    """The verdict's first `limit` violations, each marked when its path is not in the diff."""
    in_diff = {id(v) for f in files for v in f.violations}
    return tuple(
        ViolationRow(
            v.code.value,
            text(v.subject, 400),
            text(v.detail, 1000),
            v.mode,
            id(v) in in_diff or v.path is None,
        )
        for v in verdict.violations[:limit]
    )


def violations_left_out(verdict: Verdict, limit: int = PAGE_VIOLATIONS) -> str | None:
    missing = len(verdict.violations) - limit
    if missing <= 0:
        return None
    return (
        f"{limit:,} of {len(verdict.violations):,} violations are listed; {missing:,} are "
        "left out: `integrator review show ID` lists them all"
    )


def claim_events(chain: Sequence[tuple[str, Mapping[str, object], str]]) -> tuple[ClaimEvent, ...]:
    """The claim ref's commits (newest first) as rows."""
    out = []
    for commit, state, message in chain:
        out.append(
            ClaimEvent(
                commit=commit[:12],
                event=text(state.get("event", "-"), 40),
                generation=text(state.get("generation", "-"), 20),
                attempt=text(state.get("attemptId", "-"), 80),
                state=text(state.get("state", "-"), 20),
                lease=text(state.get("leaseExpiresAt", "-"), 40),
                summary=text(state.get("reason") or message.split("\n", 1)[0], 300),
            )
        )
    return tuple(out)


def review_events(chain: Sequence[tuple[str, ReviewAction]]) -> tuple[ReviewEvent, ...]:
    """The held ref's records (oldest first) as rows."""
    return tuple(
        ReviewEvent(
            commit=commit[:12],
            at=a.at.isoformat(timespec="seconds"),
            action=a.action,
            actor=text(a.actor, 120),
            outcome=f"{a.decision.value} {' '.join(a.codes)}".strip() if a.decision else "-",
            reason=text(a.reason or "", 500),
        )
        for commit, a in chain
    )


def live_claim_line(state: Mapping[str, object] | None) -> str:
    if state is None:
        return "no claim for this task"
    return text(
        f"generation {state.get('generation')} attempt {state.get('attemptId')}: "
        f"{state.get('state')}, lease until {state.get('leaseExpiresAt')}",
        300,
    )


def candidate_view(
    held: Held,
    diff_base: str | None,
    files: Sequence[FileDiff],
    *,
    claim_chain: Sequence[tuple[str, Mapping[str, object], str]] = (),
    review_chain: Sequence[tuple[str, ReviewAction]] = (),
    expansions: Sequence[ExpansionEntry] = (),
    omitted: str | None = None,
    mark: FalsePositive | None = None,
    landing: LandingView | None = None,
    claim: ClaimMark = NO_CLAIM,
) -> CandidateView:
    """Everything the Candidate page shows, from what was read for it: work linear in its
    files and violations, and at most PAGE_FILES files and PAGE_VIOLATIONS violations
    shown (the diff itself is cut at DIFF_LINES and DIFF_CHARS)."""
    v = held.verdict
    task, attempt, generation = held.subject()
    contract, _ = contract_of(held)
    who = held.submission.submitter
    shown = listed(files)
    return CandidateView(
        sid=held.sid,
        folder=held.folder,
        decision=v.decision.value,
        codes=codes_of(v),
        task=text(task or "-", 80),
        attempt=text(attempt or "-", 80),
        generation=str(generation) if generation is not None else "-",
        agent=text(f"{who.user}@{who.host}", 200),
        submitted=held.submission.submitted_at.isoformat(timespec="seconds"),
        candidate=held.submission.candidate,
        base=v.base or "-",
        diff_base=diff_base or "(empty tree)",
        violations=violation_rows(v, files),
        resources=tuple(
            ResourceRow(text(r.resource), r.determination.value, text(", ".join(r.paths), 500))
            for r in v.resources
        ),
        contract=contract_view(held),
        files=file_rows(shown, contract.matcher() if contract else None),
        live_claim=live_claim_line(claim_chain[0][1] if claim_chain else None),
        claim_history=claim_events(claim_chain),
        review_history=review_events(review_chain),
        expansions=tuple(expansion_row(e) for e in expansions),
        diff=diff_view(files, sum(f.size for f in files), omitted),
        legacy=is_legacy(v),
        false_positive=mark_line(mark),
        landing=landing,
        claim=claim,
        files_left_out=left_out(files, shown),
        violations_left_out=violations_left_out(v),
    )


def verdict_lines(verdict: Verdict) -> tuple[tuple[str, str, str], ...]:
    """(code, subject, detail) of each violation, for the page that reports an action (at
    most PAGE_VIOLATIONS, and a last line saying how many more there are)."""
    lines = tuple(_violation(v) for v in verdict.violations[:PAGE_VIOLATIONS])
    missing = len(verdict.violations) - PAGE_VIOLATIONS
    if missing > 0:
        return (*lines, ("…", "-", f"{missing:,} more: `integrator review show ID` lists them"))
    return lines


def _violation(v: Violation) -> tuple[str, str, str]:
    return v.code.value, text(v.subject, 400), text(v.detail, 1000)
