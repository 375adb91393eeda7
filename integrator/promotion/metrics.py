"""Promotion's Prometheus metrics, registered beside the daemon's own (`/metrics`).

Time in queue is measured in two stages: submission → landing (observed by the daemon when
it files an accepted submission) and landing → promotion (observed by the promoter, from
the staging commit's time); their sum is submission → promotion.
"""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

QUEUE_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 1024)
DEPTH_BUCKETS = (0, 1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32)


class PromotionMetrics:
    """Counters, histograms and gauges of validation and promotion."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        self.time_in_queue = Histogram(
            "integrator_time_in_queue_seconds",
            "Time in queue by stage: submit (submission to landing), promote (landing to "
            "promotion).",
            ["stage"],
            buckets=QUEUE_BUCKETS,
            registry=r,
        )
        self.runs = Counter(
            "integrator_validation_runs", "Validation command runs (every attempt).", registry=r
        )
        self.results = Counter(
            "integrator_validation_attempts",
            "Validation attempts by result (pass, fail); a failed attempt with retries left "
            "is retried.",
            ["result"],
            registry=r,
        )
        self.retried = Counter(
            "integrator_validation_retries", "Failed attempts that were run again.", registry=r
        )
        self.ci_seconds = Counter(
            "integrator_validation_ci_seconds",
            "Seconds of validation command runs, by scope (empty: the whole tree).",
            ["scope"],
            registry=r,
        )
        self.flaky = Counter(
            "integrator_validation_flaky",
            "Final passes after failed runs of the same tree (flaky_reruns), by scope.",
            ["scope"],
            registry=r,
        )
        self.cache_hits = Counter(
            "integrator_validation_cache_hits",
            "Heads decided by a cached result of the same key (no run), by scope.",
            ["scope"],
            registry=r,
        )
        self.promotions = Counter(
            "integrator_promotions", "Moves of the target to a validated head.", registry=r
        )
        self.batch = Histogram(
            "integrator_promotion_batch_size",
            "Landings one promotion moved the target over.",
            buckets=BATCH_BUCKETS,
            registry=r,
        )
        self.depth = Histogram(
            "integrator_bisection_depth",
            "Validations from a batch's first failure to its culprit's ejection.",
            buckets=DEPTH_BUCKETS,
            registry=r,
        )
        self.ejections = Counter(
            "integrator_ejections",
            "Landings taken out of the queue, by dequeue reason code.",
            ["code"],
            registry=r,
        )
        self.innocent = Counter(
            "integrator_innocent_ejections",
            "Landings promoted whose candidate an earlier VALIDATION_FAILED ejection took out "
            "(requeued, it passed: the ejection was of an innocent).",
            registry=r,
        )
        self.unpromoted = Gauge(
            "integrator_unpromoted_landings",
            "Landings on the queue the target does not hold yet.",
            registry=r,
        )
        self.promoted_head_age = Gauge(
            "integrator_promoted_head_age_seconds",
            "Age of the commit the target points at (its staging commit's time).",
            registry=r,
        )
        self._promoted_time: float | None = None
        self.promoted_head_age.set_function(self._age)

    def promoted_at(self, commit_time: float) -> None:
        self._promoted_time = commit_time

    def _age(self) -> float:
        return 0.0 if self._promoted_time is None else max(0.0, time.time() - self._promoted_time)

    def time_to_promote(self, seconds: float) -> None:
        self.time_in_queue.labels("promote").observe(max(0.0, seconds))

    def time_to_land(self, seconds: float) -> None:
        self.time_in_queue.labels("submit").observe(max(0.0, seconds))
