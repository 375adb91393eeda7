"""The promoter inside `integrator serve`: a thread of its own, with its own repository.

Landings never wait for it: it opens the canonical repository separately (libgit2 objects
are not shared between threads), validates in its own rounds and moves refs only by
compare-and-swap, so a landing and a rebuild that race are settled by git like any two
integrators. Between drains the daemon reflects what it recorded (`reflect`).
"""

from __future__ import annotations

import threading
from pathlib import Path

import structlog

from integrator.errors import IntegratorError
from integrator.promotion import runner
from integrator.promotion.metrics import PromotionMetrics
from integrator.promotion.promoter import Promoter
from integrator.records.canonical import Canonical

log = structlog.get_logger("integrator.promote")


class PromoterThread:
    """`Promoter.run` on a thread until `stop`."""

    def __init__(self, repo: Path, metrics: PromotionMetrics, poll: float) -> None:
        self.repo = repo
        self.metrics = metrics
        self.poll = poll
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="promoter", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        """Nothing to do: the promoter polls; kept for symmetry with the mirror worker."""

    def _run(self) -> None:
        try:
            with Canonical(self.repo) as canonical:
                Promoter(canonical, metrics=self.metrics).run(
                    once=False, poll=self.poll, stop=self._stop
                )
        except IntegratorError as err:  # opening the repository; rounds log their own
            log.error("promote.stopped", error=str(err))
        except runner.Interrupted:
            pass

    def stop(self, timeout: float = 10.0) -> None:
        """Stop after the round in hand; running commands are killed, their results not
        recorded (the head is validated again by whoever runs next)."""
        self._stop.set()
        runner.interrupt()
        self._thread.join(timeout=timeout)


def promote_once(repo: Path, metrics: PromotionMetrics) -> int:
    """Every round there is to do now (what `serve --once` runs after its drain)."""
    with Canonical(repo) as canonical:
        return Promoter(canonical, metrics=metrics).run(once=True)
