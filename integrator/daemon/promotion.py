"""What `integrator serve` does for promotion, apart from its drain loop: the promoter
thread, reflecting promotion records into the spool and the mirror, the queue's pause,
and the time-in-queue metrics of what it landed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

import structlog
from prometheus_client import CollectorRegistry

from integrator import jsontext
from integrator.documents.promotion import QueueControl
from integrator.documents.verdict import Decision
from integrator.errors import IntegratorError
from integrator.landing.outcomes import Outcome
from integrator.promotion.metrics import PromotionMetrics
from integrator.promotion.reflect import reflect
from integrator.promotion.service import PromoterThread, promote_once
from integrator.records import validations
from integrator.records.canonical import Canonical
from integrator.records.queue_control import paused
from integrator.store.mirror import Mirror
from integrator.store.spool import Spool

log = structlog.get_logger("integrator.promote")


class Promotion:
    """The daemon's side of promotion, on the daemon's own thread and repository."""

    def __init__(
        self,
        canonical: Canonical,
        spool: Spool,
        mirror: Mirror,
        registry: CollectorRegistry,
        *,
        enabled: bool,
        poll: float,
        clock: Callable[[], datetime],
        on_held: Callable[[str], None] | None = None,
    ) -> None:
        self.canonical = canonical
        self.spool = spool
        self.mirror = mirror
        self.metrics = PromotionMetrics(registry)
        self.enabled = enabled
        self.poll = poll
        self.clock = clock
        self.on_held = on_held  # told each submission an ejection held (its verdict changed)
        self._thread: PromoterThread | None = None
        self._reflected: str | None = None
        self._pause_logged: str | None = None

    def start(self) -> None:
        if self.enabled and self._thread is None:
            self._thread = PromoterThread(self.canonical.path, self.metrics, self.poll)
            self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._thread.stop()
            self._thread = None

    def once(self) -> None:
        """After a `--once` drain: every promotion round there is to do, then reflect."""
        if self.enabled:
            try:
                promote_once(self.canonical.path, self.metrics)
            except IntegratorError as err:
                log.error("promote.incomplete", error=str(err))
        self.reflect()

    def reflect(self) -> None:
        """Hold what promoters ejected and mirror what they recorded (when anything new)."""
        tip = self.canonical.ref(validations.promotion_ref(self.canonical.target))
        if tip is None or tip == self._reflected:
            return
        try:
            reflect(self.canonical, self.spool, self.mirror, self.clock(), on_held=self.on_held)
        except IntegratorError as err:
            log.warning("promote.reflect_failed", error=str(err))
            return
        self._reflected = tip

    def paused(self) -> QueueControl | None:
        """The queue's control when landings are paused (logged once per pause). A mirror
        that holds a pause asks the server again before believing it (a resume pushed from
        another host); one that holds none lands, and the engine reads it after fetching."""
        control = paused(self.canonical)
        if control is not None and self.canonical.remote is not None:
            try:
                self.canonical.refresh()
            except IntegratorError as err:
                log.warning("queue.control_unreadable", error=str(err))
            control = paused(self.canonical)
        if control is None:
            if self._pause_logged is not None:
                log.info("queue.resumed", target=self.canonical.target)
            self._pause_logged = None
            return None
        key = control.at.isoformat()
        if key != self._pause_logged:
            log.info(
                "queue.paused", target=self.canonical.target, reason=control.reason,
                actor=control.actor, waiting=self.spool.depth(),
            )  # fmt: skip
            self._pause_logged = key
        return control

    def landed(self, outcomes: Sequence[Outcome], now: datetime) -> None:
        """Time in queue from submission to landing, for each accepted submission."""
        for o in outcomes:
            if o.verdict is None or o.verdict.decision is not Decision.ACCEPTED:
                continue
            try:
                at = datetime.fromisoformat(jsontext.loads(o.raw)["submittedAt"])
            except (ValueError, KeyError, TypeError):
                continue
            self.metrics.time_to_land((now - at).total_seconds())
