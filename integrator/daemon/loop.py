"""The integration daemon: drain the spool in id order, integrate, file each submission.

Submissions are handled in *batches* (one listing of the spool, bounded in size and time).
Each is claimed (renamed into `work/`) and read; the batch goes through the engine's
`integrate_many`, which gates every candidate and lands all that pass in one ref
transaction. Then the batch is committed: one ref transaction holds every FENCED/REVIEW
candidate and drops quarantine refs, one fsynced backlog file records every decision for
the mirror, and only then are the folders renamed into `accepted/`, `fenced/`, `review/`
or `rejected/`. A crash before that last step leaves submissions in `work/`; at start they
go through the engine again, which is idempotent (a candidate that already landed reports
its earlier ACCEPTED, recovered), so nothing is lost and nothing lands twice, at the cost
of a few fsyncs per batch rather than per candidate.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from types import FrameType

import structlog

from integrator.daemon.answer import OverviewServer
from integrator.daemon.clock_check import ClockCheck
from integrator.daemon.health import Metrics
from integrator.daemon.holding import hold
from integrator.daemon.identity import submission_problem
from integrator.daemon.intake import Intake, Pending
from integrator.daemon.memory import Trimmer
from integrator.daemon.notify import Notifier
from integrator.daemon.probe import Backoff, HostProbe, operators
from integrator.daemon.promotion import Promotion
from integrator.daemon.settings import Settings
from integrator.daemon.wakeup import Wakeup
from integrator.documents.verdict import Decision, Verdict
from integrator.errors import InfrastructureError, IntegratorError, UsageError
from integrator.landing.outcomes import Engine, Outcome, Ready
from integrator.limits import MAX_CRASHES
from integrator.paths import escape_undecodable
from integrator.plumbing import git, transaction
from integrator.plumbing.bundles import import_bundle, quarantine_prefix
from integrator.plumbing.packs import ObjectBuffer, Repacker
from integrator.records.canonical import Canonical
from integrator.store.entries import codes_of, decision_record
from integrator.store.mirror import Mirror, MirrorWorker
from integrator.store.spool import (
    REJECTION_FILE,
    VERDICT_FILE,
    Spool,
    WorkFolder,
    rejection_document,
)
from integrator.store.submitted import copy_submitted

BUNDLE_COPY = "bundle.copy"  # the daemon's copy of a submission's bundle, in its folder


class Daemon:
    """One daemon on one spool and one canonical repository."""

    def __init__(
        self,
        *,
        spool: Spool,
        canonical: Canonical,
        engine: Engine,
        mirror: Mirror,
        settings: Settings | None = None,
        metrics: Metrics | None = None,
        notifier: Notifier | None = None,
        reload: Callable[[], Settings] | None = None,
        intake: Intake | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        promote: bool = True,
        shadow: Callable[[list[Ready], list[Verdict]], None] | None = None,
        repacker: Repacker | None = None,
    ) -> None:
        self.spool = spool
        self.canonical = canonical
        self.engine = engine
        self.mirror = mirror
        self.settings = settings or Settings()
        self.metrics = metrics or Metrics()
        self.notifier = notifier or Notifier({})
        self.reload = reload
        self.intake = intake
        self.clock = clock
        self.shadow = shadow  # decides each batch again and logs mismatches (rollout)
        self.repacker = repacker or Repacker(background=True)  # never inside a landing
        self.trimmer = Trimmer()  # freed memory back to the system (daemon/memory.py)
        self.log = structlog.get_logger("integrator.daemon")
        self.decided = 0
        self.last_error: str | None = None
        self._wake = threading.Event()
        self._stopping = False
        self._reload_requested = False
        self._backoff = Backoff()
        self._wakeup = Wakeup(spool.folder("new"), self._wake)
        self._worker: MirrorWorker | None = None
        self.answer: OverviewServer | None = None  # serves `status` beside the loop (answer.py)
        self._watchdog = self.notifier.watchdog_interval() is not None
        self.clock_check = ClockCheck(canonical, self.settings.max_clock_skew)
        self.probe = HostProbe.of(canonical, intake.url if intake is not None else None)
        self.promotion = Promotion(
            canonical, spool, mirror, self.metrics.registry, enabled=promote,
            poll=self.settings.poll, clock=clock,
            on_held=intake.republish if intake is not None else None,
        )  # fmt: skip

    # -- signals --------------------------------------------------------------------------

    def install_signal_handlers(self) -> None:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGHUP, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        # Only flags here: the handler may run in the middle of an integration.
        if signum == signal.SIGHUP:
            self.request_reload()
        else:
            self.request_stop()

    def request_stop(self) -> None:
        """Stop claiming; the batch in hand is finished and filed, then `run` returns."""
        self._stopping = True
        self._wake.set()

    def request_reload(self) -> None:
        self._reload_requested = True
        self._wake.set()

    @property
    def stopping(self) -> bool:
        return self._stopping

    # -- the loop -------------------------------------------------------------------------

    def run(self, *, once: bool = False) -> int:
        """Serve until SIGTERM (or, with `once`, until the spool is drained); returns 0."""
        self.spool.ensure()
        with self.spool.lock():
            self.spool.write_meta(self.canonical.path)
            self.spool.sweep_tmp()
            recovered = self.drain(only_work=True)
            self.log.info(
                "daemon.ready", spool=str(self.spool.root), repo=str(self.canonical.path.resolve()),
                recovered=recovered, once=once, waiting=self.spool.depth(),
                **self.canonical.traffic(),
            )  # fmt: skip
            self.notifier.ready()
            if once:
                return self._run_once()
            self._worker = MirrorWorker(self.mirror, self.settings.poll)
            self._worker.start()
            self.promotion.start()
            answering = self.answer is not None and self.answer.start()
            try:
                self._serve()
            finally:
                if answering and self.answer is not None:
                    self.answer.stop()
                self.notifier.stopping()
                self._wakeup.close()
                self.promotion.stop()
                self._worker.stop()
                self.repacker.close(self.canonical.repo)
                self.log.info("daemon.stopped", decided=self.decided)
        return 0

    def _run_once(self) -> int:
        self.drain()
        self.repacker.close(self.canonical.repo)
        self.promotion.once()
        if self.last_error is not None and not self._stopping:
            self.log.error("daemon.incomplete", error=self.last_error, left=self.spool.depth())
            raise InfrastructureError(f"the spool was not drained: {self.last_error}")
        if self.intake is not None:
            self.intake.check_published()  # a verdict decided but not out is exit 4
        try:
            self.mirror.flush()
        except IntegratorError as err:
            self.log.warning(
                "mirror.left_backlog", records=self.mirror.backlog.depth(), error=str(err)
            )
        self.log.info("daemon.drained", decided=self.decided, **self.canonical.traffic())
        return 0

    def _serve(self) -> None:
        watchdog = self.notifier.watchdog_interval()
        while not self._stopping:
            self.drain()  # pings the watchdog after every batch
            self.repacker.poke(self.canonical.repo)  # between drains: merge packs meanwhile
            self.trimmer.maybe()  # and give what the drain freed back to the system
            self.promotion.reflect()
            if watchdog is not None:
                self.notifier.watchdog()
            if self._stopping:
                break
            if self._reload_requested:
                self._apply_reload()
                continue
            timeout = self._backoff.seconds or self.settings.poll
            watch = self.settings.watch and not self._backoff.seconds  # new/ wakes us, or a signal
            self._wakeup.wait(min(timeout, watchdog) if watchdog else timeout, watch=watch)

    def drain(self, *, only_work: bool = False) -> int:
        """Decide everything in `work/` (then `new/`), in id order; returns how many.

        With an intake, its new submissions are taken into `new/` first, and the verdicts
        of those decided are published after every batch.
        """
        total = 0
        pending: list[Pending] = []
        if self.intake is not None and not only_work:
            failures = self.intake.failures
            pending = self.intake.poll()  # backs off on its own: the spool goes on meanwhile
            if self.intake.failures > failures:
                self.metrics.infrastructure_errors.labels("intake").inc()
        while not self._stopping:
            names = [("work", n) for n in self.spool.entries("work")]
            if not only_work:
                names += [("new", n) for n in self.spool.urgent_first(self.spool.entries("new"))]
            if not names or self.promotion.paused() is not None:
                break  # paused: everything waits where it is
            done, error = self._batch(names)
            total += done
            if pending and self.intake is not None:
                self.intake.publish_logged(pending)
            if self._watchdog:
                self.notifier.watchdog()  # a long drain is progress, not a hang
            self.trimmer.maybe()  # a drain under a flood lasts: trim inside it as well
            if error is not None:
                self.last_error = str(error)
                self._back_off(error)
                break
            self.last_error = None
        if self.intake is not None and not only_work:
            self.intake.publish_logged(pending)  # decided by an earlier run; republications
        if self.last_error is None:
            self._backoff.reset()
        return total

    def _back_off(self, error: IntegratorError) -> None:
        """Count the failure by kind; wait longer before the next try, said when it grows."""
        kind = error.kind if isinstance(error, InfrastructureError) else "other"
        self.metrics.infrastructure_errors.labels(kind).inc()
        if self._backoff.grow(self.settings.max_backoff):
            self.log.error(
                "daemon.retry_later", kind=kind, error=str(error),
                retry_in_s=round(self._backoff.seconds, 3),
            )  # fmt: skip

    def _batch(self, names: list[tuple[str, str]]) -> tuple[int, IntegratorError | None]:
        """Claim up to a batch, integrate it in one `integrate_many`, commit the outcomes."""
        outcomes: list[Outcome] = []
        ready: list[Ready] = []
        error: IntegratorError | None = None
        try:
            # Authority as it is now, after `names` were listed: a claim issued before a
            # submission was handed in is seen when its signature is checked. The engine
            # lands the batch on this same view: one fetch per batch (`keep`).
            self.canonical.refresh(keep=True)
            self.clock_check.check()  # leases are judged by this host's clock: is it right?
        except IntegratorError as err:  # nothing claimed yet: the host's, asked of the host
            return 0, err if operators(err) else (self.probe.error(err) or err)
        deadline = time.monotonic() + self.settings.batch_seconds  # not eaten by the fetch
        try:
            for where, name in names:
                if self._stopping:
                    break  # stop claiming; what is in hand is integrated and filed below
                item = self._prepare(where, name)
                if isinstance(item, Ready):
                    ready.append(item)
                elif item is not None:
                    outcomes.append(item)
                taken = len(ready) + len(outcomes)
                if taken >= self.settings.batch_size or time.monotonic() >= deadline:
                    break
        except IntegratorError as err:
            error = err  # that submission stays in work/ and is retried first
        except OSError as err:  # the spool's file system, while claiming or reading
            error = _infra(err)
        ready.sort(key=lambda r: not r.urgent)  # the priority lane lands first
        decided, failure = self._integrate(ready)
        outcomes.extend(decided)
        error = error or failure  # what was not decided stays in work/, retried first
        outcomes.sort(key=lambda o: o.sid)
        try:
            self._commit(outcomes)
        except (IntegratorError, OSError) as err:
            return 0, err if isinstance(err, IntegratorError) else _infra(err)
        return len(outcomes), error

    def _prepare(self, where: str, name: str) -> Ready | Outcome | None:
        """Claim one entry and read it: ready to integrate, rejected, or gone (None)."""
        started = time.perf_counter()
        claimed = self.spool.claim(name) if where == "new" else self.spool.working(name)
        if claimed is None:
            return None  # someone else took it between the listing and the rename
        sid = claimed.sid
        if claimed.problem is not None:
            return Outcome(
                sid=sid, verdict=None, reason=claimed.problem, raw=b"",
                latency=time.perf_counter() - started, bundle=False,
            )  # fmt: skip
        bundle = False
        try:
            submission, raw = self.spool.load(claimed.path)
            unsigned = submission_problem(self.canonical, sid, submission)
            if unsigned is not None:  # before the bundle is imported or anything computed
                return Outcome(
                    sid=sid, verdict=None, reason=unsigned, raw=raw,
                    latency=time.perf_counter() - started, bundle=False,
                )  # fmt: skip
            if submission.bundle is not None:
                bundle = True
                self._import(claimed, submission.bundle, submission.candidate)
        except UsageError as err:
            return Outcome(
                sid=sid, verdict=None, reason=str(err), raw=b"",
                latency=time.perf_counter() - started, bundle=bundle,
            )  # fmt: skip
        reason = self.engine.candidate_problem(submission.candidate)
        if reason is not None:  # nothing to judge: the submitter's to fix, not a fence
            return Outcome(
                sid=sid, verdict=None, reason=reason, raw=raw,
                latency=time.perf_counter() - started, bundle=bundle,
            )  # fmt: skip
        return Ready(
            sid=sid, contract=submission.contract_bytes(), candidate=submission.candidate,
            raw=raw, started=started, bundle=bundle, urgent=bool(submission.urgent),
        )  # fmt: skip

    def _import(self, claimed: WorkFolder, name: str, candidate: str) -> None:
        """Import the submission's bundle from a copy in the daemon's own folder: git never
        opens a path inside the submitter's folder."""
        copy = claimed.path / BUNDLE_COPY
        try:
            copy_submitted(claimed.submitted, name, copy, self.settings.bundle_max_bytes)
            import_bundle(
                self.canonical.repo, claimed.sid, copy, candidate, self.settings.bundle_max_bytes
            )
        finally:
            copy.unlink(missing_ok=True)

    def _integrate(self, ready: list[Ready]) -> tuple[list[Outcome], IntegratorError | None]:
        """All of `ready` through the engine at once: one ref transaction lands the batch."""
        if not ready:
            return [], None
        try:
            verdicts = self.engine.integrate_many([(p.contract, p.candidate) for p in ready])
        except Exception as err:
            if operators(err):
                return [], err  # the operator's or the host's: nothing is anyone's fault
            trouble = self.probe.error(err)  # a server's refusal too: whose is it?
            if trouble is not None:  # the host's trouble (asked of the host, not the error)
                return [], trouble
            self.log.warning(  # find the submission that triggers it
                "integrate.batch_failed", submissions=[p.sid for p in ready], error=repr(err)
            )
            return self._one_by_one(ready)
        done = time.perf_counter()
        if self.shadow is not None:
            self.shadow(ready, verdicts)
        outcomes = [
            Outcome(
                sid=p.sid, verdict=v, reason=None, raw=p.raw, latency=done - p.started,
                bundle=p.bundle,
            )
            for p, v in zip(ready, verdicts, strict=True)
        ]  # fmt: skip
        return outcomes, None

    def _one_by_one(self, ready: list[Ready]) -> tuple[list[Outcome], IntegratorError | None]:
        """Integrate singly, so a failure is pinned on the submission that causes it.

        One that fails while the host is healthy is counted (in its folder, so the count
        survives restarts and `serve --once` runs) and rejected at MAX_CRASHES; the others
        are decided meanwhile, so one poison submission never holds up those behind it.
        """
        outcomes: list[Outcome] = []
        first: IntegratorError | None = None
        for p in ready:
            try:
                verdict = self.engine.integrate(p.contract, p.candidate)
            except Exception as err:
                if operators(err):
                    return outcomes, first or err  # the rest is retried as it is
                trouble = self.probe.error(err)
                if trouble is not None:  # never counted against the submission in hand
                    return outcomes, first or trouble
                count = self.spool.record_attempt(p.sid, repr(err))
                self.log.exception("integrate.crashed", submission=p.sid, attempt=count)
                if count < MAX_CRASHES:
                    first = first or InfrastructureError(f"{type(err).__name__}: {err}")
                    continue  # stays in work/; retried, after the others are decided
                reason = (
                    f"integrate raised {type(err).__name__} {count} times (the log has the "
                    f"error and its traceback): {escape_undecodable(str(err))[:500]}. "
                    "Resubmitting is safe: integrate never lands a candidate twice"
                )
                outcomes.append(Outcome(
                    sid=p.sid, verdict=None, reason=reason, raw=p.raw,
                    latency=time.perf_counter() - p.started, bundle=p.bundle,
                ))  # fmt: skip
                continue
            latency = time.perf_counter() - p.started
            outcomes.append(Outcome(
                sid=p.sid, verdict=verdict, reason=None, raw=p.raw, latency=latency,
                bundle=p.bundle,
            ))  # fmt: skip
        return outcomes, first

    def _commit(self, outcomes: list[Outcome]) -> None:
        """Hold, record, then file: the order that makes a crash at any point harmless."""
        if not outcomes:
            return
        now = self.clock()
        held = [
            (o.sid, o.verdict, o.raw)
            for o in outcomes
            if o.verdict is not None and o.verdict.decision is not Decision.ACCEPTED
        ]
        records = ObjectBuffer(self.canonical.repo)  # every hold record of the batch, one pack
        hold(self.canonical, held, now, objects=records)  # says what other daemons held
        if held:
            self.repacker.poke(self.canonical.repo)  # starts a child at most; never waits
        deletions = [  # quarantine refs: this repository's own, never the server's
            transaction.delete(ref, oid)
            for o in outcomes
            if o.bundle
            for ref, oid in sorted(
                git.refs_under(self.canonical.repo, quarantine_prefix(o.sid)).items()
            )
        ]
        if deletions:
            self.canonical.local_updater.apply(deletions)
        self.mirror.record(
            [decision_record(o.sid, o.verdict, now, o.latency, o.reason) for o in outcomes]
        )
        self.promotion.landed(outcomes, now)
        for o in outcomes:
            if o.verdict is not None:
                text = o.verdict.model_dump_json(by_alias=True, exclude_none=True, indent=2)
                self.spool.file(o.sid, o.folder, VERDICT_FILE, text.encode() + b"\n")
            else:
                doc = rejection_document(o.sid, o.reason or "malformed", now)
                self.spool.file(o.sid, o.folder, REJECTION_FILE, doc)
            self.decided += 1
            self._summary(o)
        if self._worker is not None:
            self._worker.wake()

    def _summary(self, o: Outcome) -> None:
        """The one event per decision: everything a person or a shipper needs to find it."""
        self.metrics.observe(o.verdict, o.latency)
        v = o.verdict
        if v is None:
            self.log.warning(
                "decision", submission=o.sid, decision="REJECTED", reason=o.reason,
                folder=o.folder, latency_ms=round(o.latency * 1000, 3),
            )  # fmt: skip
            return
        self.log.info(
            "decision", submission=o.sid, task=v.task_id, attempt=v.attempt_id,
            generation=v.generation, candidate=v.candidate, decision=v.decision.value,
            codes=codes_of(v), folder=o.folder,
            staging=v.staging_commit, recovered=bool(v.recovered),
            latency_ms=round(o.latency * 1000, 3),
        )  # fmt: skip

    # -- reloading ------------------------------------------------------------------------

    def _apply_reload(self) -> None:
        self._reload_requested = False
        self._wake.clear()
        self.notifier.reloading()
        try:
            if self.reload is not None:
                self.settings = self.reload()
            self.engine.reload_policy()
        except IntegratorError as err:
            self.log.error("daemon.reload_failed", error=str(err), kept="previous settings")
        else:
            self.log.info("daemon.reloaded", **asdict(self.settings))
        self._wakeup.close()  # its timeout is the poll interval, which may have changed
        if self._worker is not None:
            self._worker.interval = self.settings.poll
        self.notifier.ready()


def _infra(err: BaseException) -> IntegratorError:
    """An OSError of the spool's file system, as the host's trouble."""
    return InfrastructureError(f"{type(err).__name__}: {err}", kind="disk")
