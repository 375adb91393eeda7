"""Validating queue heads and recording each result by compare-and-swap.

For one head the record chain reads: `running` (command mode: who runs it, until when
another promoter may take over) or `requested` (external mode: what CI should test), then
one record per attempt; the last is `final`. A final record is the truth for that head:
a writer that finds one adopts it, and every write is a compare-and-swap on the chain's
tip, so two promoters never both record conflicting results as the truth.

Commands run in threads (`concurrency` heads at once); every git read and write stays on
the promoter's own thread, which records the attempts once the runs are done.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pygit2
import structlog

from integrator import faults
from integrator.documents.policy import Validation
from integrator.documents.promotion import Status, ValidationResult
from integrator.errors import RefMovedError, UsageError
from integrator.limits import RECORD_TEXT_CHARS
from integrator.plumbing import git, transaction
from integrator.promotion import runner
from integrator.promotion.state import QueueState
from integrator.records import validation_cache, validations
from integrator.records.canonical import Canonical

log = structlog.get_logger("integrator.promote")
TAKEOVER_GRACE = timedelta(seconds=60)  # past a run's own timeouts, before others take over
RECORD_TRIES = 8


def _with(result: ValidationResult, **changes: Any) -> ValidationResult:
    """A copy of `result` with `changes`, validated like any record read back."""
    return ValidationResult.model_validate({**result.model_dump(), **changes})


def actor() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class Attempt:
    """One finished run of the command, to be recorded."""

    number: int
    outcome: runner.RunOutcome


@dataclass
class Recorded:
    """What recording a head's result came to: the final result, if there is one now."""

    head: str
    final: ValidationResult | None
    commit: str | None
    adopted: bool = False  # another promoter's result was there first
    written: bool = False  # this record was written (not refused by the tip)


@dataclass(frozen=True)
class Job:
    """One head to validate: for one scope (None: the whole tree), under a cache key."""

    index: int
    scope: str | None = None
    key: str | None = None
    probe: bool = False  # a bisection point (not a batch head): the window ignores it
    confirm: int = 0  # runs a provisional failure took: this job reruns it (flaky_reruns)
    provisional: bool = False  # a batch head: a failure is rerun in the next round (flaky_reruns)


def provisional(result: ValidationResult, config: Validation) -> bool:
    """A probe's failure not rerun yet: the bisection goes on from it, and it is confirmed
    (rerun `flaky_reruns` times) only when it would eject a landing."""
    return result.status == "fail" and not result.final and config.flaky_reruns > 0


def _span(job: Job, config: Validation) -> tuple[int, int, bool]:
    """A job's attempt numbers (first, last) and whether a failure of the last is final.

    A batch head is rerun at once (`reruns`): its failure would send a whole bisection
    the wrong way. A bisection probe runs once (with `flaky_reruns`): its failure only
    narrows the search, and is confirmed by a `confirm` job if it is about to eject."""
    if job.confirm:
        return job.confirm + 1, job.confirm + config.flaky_reruns, True
    if (job.probe or job.provisional) and config.flaky_reruns > 0:
        return 1, 1 + config.retries, False
    return 1, 1 + reruns(config), True


def _base_result(
    state: QueueState, index: int, tree: str, status: Status, now: datetime, job: Job | None = None
) -> ValidationResult:
    return ValidationResult(
        target=state.target,
        head=state.head(index),
        tree=tree,
        base=state.promoted,
        landings=state.covering(index),
        status=status,
        at=now,
        runner=actor(),
        scope=job.scope if job else None,
        key=job.key if job else None,
        probe=job.probe if job else False,
    )


def reruns(config: Validation) -> int:
    """Runs after a failure on the same tree: `retries` and `flaky_reruns` alike."""
    return max(config.retries, config.flaky_reruns)


class Recorder:
    """Writes a head's records on the tip of its chain, refusing to write past a final."""

    def __init__(self, canonical: Canonical) -> None:
        self.canonical = canonical

    def unpromoted(self, head: str) -> bool:
        """Whether `head` is on the queue and not on the target (yet)."""
        repo = self.canonical.repo
        queue = self.canonical.ref(self.canonical.queue_ref)
        target = self.canonical.ref(self.canonical.target_ref)

        def holds(tip: str | None) -> bool:
            if tip is None:
                return False
            if tip == head:
                return True
            try:
                return bool(repo.descendant_of(pygit2.Oid(hex=tip), pygit2.Oid(hex=head)))
            except (KeyError, ValueError, pygit2.GitError):
                return False

        return holds(queue) and not holds(target)

    def append(
        self,
        result: ValidationResult,
        *,
        log_bytes: bytes | None = None,
        details: bytes | None = None,
        unless: Callable[[ValidationResult], bool] | None = None,
    ) -> Recorded:
        """Append `result` to its head's chain; when the tip is final (or `unless` says the
        tip makes this record pointless) nothing is written and the tip is returned."""
        canonical = self.canonical
        ref = validations.validation_ref(result.target, result.head, result.scope)
        for _ in range(RECORD_TRIES):
            if not self.unpromoted(result.head):
                # Promoted or dropped by a rebuild meanwhile (its ref went with it): a
                # result now would be a record nobody reads, and a ref nobody deletes.
                return Recorded(result.head, None, None)
            tip = validations.latest(canonical, result.target, result.head, result.scope)
            if tip is not None and (tip[1].final or (unless is not None and unless(tip[1]))):
                final = tip[1] if tip[1].final else None
                return Recorded(result.head, final, tip[0], adopted=tip[1].final)
            # A tip that is not a record (damaged, or no trusted key signed it) is built on.
            old = tip[0] if tip is not None else canonical.ref(ref)
            commit = validations.write_result(
                canonical, result, old, log=log_bytes, details=details
            )
            if git.durable(canonical.repo):
                git.sync_objects(canonical.repo)
            try:
                canonical.updater.apply([transaction.update(ref, commit, old)])
            except RefMovedError:
                canonical.refresh()
                continue
            return Recorded(result.head, result if result.final else None, commit, written=True)
        raise RefMovedError(ref, None, "a stable tip")


def _live_elsewhere(tip: ValidationResult, now: datetime) -> bool:
    """A run another promoter holds and has not let lapse (one of this host whose process
    is gone has lapsed: it was killed mid-run)."""
    if tip.status != "running" or tip.runner == actor():
        return False
    host, _, pid = tip.runner.rpartition(":")
    if host == socket.gethostname() and pid.isdigit() and not _alive(int(pid)):
        return False
    return tip.expires_at is not None and tip.expires_at > now


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def run_heads(
    canonical: Canonical,
    state: QueueState,
    indices: Sequence[int | Job],
    config: Validation,
    *,
    scratch: Path | None = None,
    on_run: Callable[[Job, runner.RunOutcome, bool], None] | None = None,
    bisecting: bool = False,
    workers: int | None = None,
) -> list[Recorded]:
    """Validate heads `indices` (each for its scope) with the command, at once; record every
    attempt, and each final result under its cache key."""
    jobs = [j if isinstance(j, Job) else Job(j) for j in indices]
    recorder = Recorder(canonical)
    now = canonical.clock()
    lease = timedelta(seconds=config.timeout * (reruns(config) + 1)) + TAKEOVER_GRACE
    mine: list[Job] = []
    done: list[Recorded] = []
    fails_after = validation_cache.last_ejection(canonical, state.target)
    for job in jobs:
        head = state.head(job.index)
        if job.key is not None:
            hit = validation_cache.lookup(canonical, state.target, job.key, fails_after=fails_after)
            if hit is not None:
                done.append(Recorded(head, hit[1], hit[0], adopted=True))
                continue
        tree = str(canonical.commit(head).tree_id)
        claim = _with(
            _base_result(state, job.index, tree, "running", now, job), expires_at=now + lease
        )
        recorded = recorder.append(claim, unless=lambda tip: _live_elsewhere(tip, now))
        if recorded.final is not None:
            done.append(recorded)  # decided already, by us or by another promoter
        elif recorded.written:
            mine.append(job)
        # else another promoter runs it now: its result will be read in a later round
    if not mine:
        return done

    def attempts(job: Job) -> list[Attempt]:
        head = state.head(job.index)
        command = config.command_of(job.scope)
        assert command is not None
        request = runner.RunRequest(
            target=state.target, head=head, tree=str(canonical_trees[job.index]),
            base=state.promoted, landings=tuple(state.covering(job.index)), attempt=1,
            scope=job.scope,
        )  # fmt: skip
        out: list[Attempt] = []
        first, last, _ = _span(job, config)
        for number in range(first, last + 1):
            request = replace(request, attempt=number)
            outcome = runner.run(
                repo_path, command, config.timeout, request, scratch=scratch,
                heartbeat=config.heartbeat,
            )  # fmt: skip
            out.append(Attempt(number, outcome))
            if outcome.passed:
                break
        return out

    repo_path = canonical.repo.path  # the threads read nothing through libgit2
    canonical_trees = {j.index: canonical.commit(state.head(j.index)).tree_id for j in mine}
    width = min(len(mine), workers or config.concurrency)
    with ThreadPoolExecutor(max_workers=width) as pool:
        results = list(pool.map(attempts, mine))
    for job, runs in zip(mine, results, strict=True):
        faults.point("after-validation")
        if bisecting:
            faults.point("mid-bisection")
        done.append(_record_runs(canonical, recorder, state, job, runs, config, on_run))
    return done


def _record_runs(
    canonical: Canonical,
    recorder: Recorder,
    state: QueueState,
    job: Job,
    runs: list[Attempt],
    config: Validation,
    on_run: Callable[[Job, runner.RunOutcome, bool], None] | None = None,
) -> Recorded:
    head = state.head(job.index)
    tree = str(canonical.commit(head).tree_id)
    last: Recorded | None = None
    _, final_number, final_fail = _span(job, config)
    for attempt in runs:
        final = attempt.outcome.passed or (attempt.number == final_number and final_fail)
        if on_run is not None:
            on_run(job, attempt.outcome, final)
        status: Status = "pass" if attempt.outcome.passed else "fail"
        outcome = attempt.outcome
        flaky = outcome.passed and attempt.number > 1 and config.flaky_reruns > 0
        result = _with(
            _base_result(state, job.index, tree, status, canonical.clock(), job),
            final=final, attempt=attempt.number, started_at=outcome.started_at,
            duration_s=round(outcome.duration_s, 3), exit_code=outcome.exit_code,
            timed_out=outcome.timed_out, flaky=flaky,
            detail=(outcome.error or None) and outcome.error[:RECORD_TEXT_CHARS],
        )  # fmt: skip
        log.info(
            "validation.run", head=head, scope=job.scope, attempt=attempt.number,
            status=status, final=final, flaky=flaky, exit_code=outcome.exit_code,
            timed_out=outcome.timed_out, duration_s=round(outcome.duration_s, 3),
        )  # fmt: skip
        last = recorder.append(result, log_bytes=outcome.log)
        if last.adopted:
            break
    assert last is not None
    if last.written and last.final is not None and last.commit and job.key is not None:
        validation_cache.store(canonical, state.target, job.key, last.commit)
    return last


# -- external CI ----------------------------------------------------------------------------


def request_heads(
    canonical: Canonical, state: QueueState, indices: Sequence[int], config: Validation
) -> tuple[list[ValidationResult], bool]:
    """Make sure each head has a request (or a result) on record: (the requests CI should
    answer now, whether anything was written).

    A request that lapsed without a report fails its head (`timeout`), which counts as a
    failed attempt like any other."""
    recorder = Recorder(canonical)
    now = canonical.clock()
    wanted: list[ValidationResult] = []
    changed = False
    for index in indices:
        head = state.head(index)
        tip = validations.latest(canonical, state.target, head)
        if tip is not None and tip[1].final:
            continue
        if tip is not None and tip[1].status == "requested":
            expires = tip[1].expires_at
            if expires is None or expires > now:
                wanted.append(tip[1])
                continue
            lapsed = _with(
                tip[1], status="fail", at=now, runner=actor(),
                detail=f"no report within the timeout of {config.timeout:g} s",
            )  # fmt: skip
            renewed = _report_attempt(recorder, canonical, lapsed, config)
            changed = True
            if renewed is not None:
                wanted.append(renewed)
            continue
        tree = str(canonical.commit(head).tree_id)
        attempt = _attempts(canonical, state.target, head) + 1
        request = _with(
            _base_result(state, index, tree, "requested", now),
            attempt=attempt, expires_at=now + timedelta(seconds=config.timeout),
        )  # fmt: skip
        recorded = recorder.append(request)
        changed = changed or recorded.written
        if recorded.final is None:
            wanted.append(request)
    return wanted, changed


def _attempts(canonical: Canonical, target: str, head: str) -> int:
    tip = validations.latest(canonical, target, head)
    if tip is None:
        return 0
    return sum(1 for _, r in validations.chain(canonical, tip[0]) if r.status in ("pass", "fail"))


def _report_attempt(
    recorder: Recorder,
    canonical: Canonical,
    result: ValidationResult,
    config: Validation,
    *,
    details: bytes | None = None,
) -> ValidationResult | None:
    """Record one reported attempt; a failure with retries left asks again. Returns the
    renewed request when there is one."""
    attempt = _attempts(canonical, result.target, result.head) + 1
    final = result.status == "pass" or attempt > reruns(config)
    recorded = recorder.append(
        _with(result, attempt=attempt, final=final, expires_at=None), details=details
    )
    if final or recorded.adopted:
        return None
    again = _with(
        result, status="requested", at=canonical.clock(), attempt=attempt + 1, final=False,
        expires_at=canonical.clock() + timedelta(seconds=config.timeout), detail=None,
        log_url=None, exit_code=None,
    )  # fmt: skip
    recorder.append(again)
    return again


def report(
    canonical: Canonical,
    state: QueueState,
    head: str,
    status: Status,
    config: Validation,
    *,
    log_url: str | None = None,
    details: bytes | None = None,
    reporter: str = "external",
) -> tuple[ValidationResult, bool]:
    """Record an external result for `head` (an unpromoted queue head). Returns the head's
    final result (or the attempt recorded) and whether it was already decided before."""
    if status not in ("pass", "fail"):
        raise UsageError("--status is pass or fail")
    heads = {landing.staging: i for i, landing in enumerate(state.landings, 1)}
    index = heads.get(head)
    if index is None:
        raise UsageError(
            f"{head} is not an unpromoted head of {canonical.queue_ref} (promoted already, "
            "or dropped by a rebuild): nothing to report"
        )
    tip = validations.latest(canonical, state.target, head)
    if tip is not None and tip[1].final:
        return tip[1], True
    now = canonical.clock()
    tree = str(canonical.commit(head).tree_id)
    base = tip[1] if tip is not None else _base_result(state, index, tree, status, now)
    result = _with(
        base, status=status, at=now, runner=reporter[:RECORD_TEXT_CHARS], log_url=log_url,
        detail=None if tip is None else tip[1].detail,
    )  # fmt: skip
    _report_attempt(Recorder(canonical), canonical, result, config, details=details)
    after = validations.latest(canonical, state.target, head)
    assert after is not None
    return after[1], False
