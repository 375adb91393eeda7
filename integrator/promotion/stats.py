"""What the queue's records say about it: throughput, validations and CI-seconds per
landing, time from landing to promotion, flaky runs and cache hits per scope, and per
scope what waits and what runs now (`integrator queue stats`, `queue status`).

Everything is read from git (the promotion records, the result chains they rest on and
those of the unpromoted heads), so any host sees the same figures; nothing here writes.

- a **run** is one attempt of a command (a `pass` or `fail` record); a **cache hit** is a
  promotion resting on a result recorded for another head (same key: tree or scope
  projection, command, toolchain);
- a **flaky** run is a final pass after failed runs of the same tree;
- an **innocent ejection** is a landing ejected for VALIDATION_FAILED whose candidate was
  promoted later (requeued, it passed on its own).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from integrator.documents.policy import Validation
from integrator.documents.promotion import PromotionRecord, ValidationResult
from integrator.promotion.rounds import RECENT
from integrator.promotion.scopes import next_window
from integrator.promotion.state import QueueState
from integrator.records import validations
from integrator.records.canonical import Canonical

HISTORY_RECORDS = 2000  # promotion records read back for the figures
STALLED_FACTOR = 3.0  # a run is flagged stalled past this multiple of its scope's median


def _scope_name(scope: str | None) -> str:
    return scope or "*"


@dataclass
class ScopeFigures:
    """One scope's runs as the records tell them (oldest first)."""

    runs: int = 0
    failed_runs: int = 0
    flaky: int = 0
    cache_hits: int = 0
    ci_seconds: float = 0.0
    finals: list[tuple[datetime, bool]] = field(default_factory=list)
    durations: list[float] = field(default_factory=list)

    def window(self, config: Validation) -> int:
        """The adaptive window the recorded results give (max_batch when not adaptive)."""
        if not config.adaptive:
            return config.max_batch
        window = max(1, config.max_batch // 2)
        for _, passed in sorted(self.finals):
            window = next_window(window, passed, config.max_batch)
        return window

    def document(self, config: Validation) -> dict[str, Any]:
        recent = [ok for _, ok in sorted(self.finals)[-RECENT:]]
        return {
            "runs": self.runs,
            "failedRuns": self.failed_runs,
            "flaky": self.flaky,
            "cacheHits": self.cache_hits,
            "ciSeconds": round(self.ci_seconds, 3),
            "failureRate": round(1 - sum(recent) / len(recent), 3) if recent else 0.0,
            "flakeRate": round(self.flaky / len(self.finals), 3) if self.finals else 0.0,
            "medianRunSeconds": round(statistics.median(self.durations), 3)
            if self.durations
            else None,
            "window": self.window(config),
        }


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def _chains(canonical: Canonical, tips: Iterable[str]) -> dict[str, tuple[str, ValidationResult]]:
    """Every record on the chains ending at `tips`, by commit (each once)."""
    out: dict[str, tuple[str, ValidationResult]] = {}
    for tip in dict.fromkeys(tips):
        if tip in out:
            continue
        for oid, result in validations.chain(canonical, tip):
            out[oid] = (oid, result)
    return out


def figures(canonical: Canonical, config: Validation, state: QueueState | None) -> dict[str, Any]:
    """`integrator queue stats --json`: the document."""
    target = canonical.target
    records = list(reversed(validations.promotions(canonical, target, limit=HISTORY_RECORDS)))
    tips = [v for _, r in records for v in r.validations]
    if state is not None:
        heads = {c.staging for c in state.landings}
        tips += [canonical.ref(validations.validation_ref(target, h)) or "" for h in heads]
        tips += list(validations.scoped_refs(canonical, target, heads).values())
    seen = _chains(canonical, [t for t in tips if t])
    scopes: dict[str, ScopeFigures] = {}
    for _, result in seen.values():
        fig = scopes.setdefault(_scope_name(result.scope), ScopeFigures())
        if result.status not in ("pass", "fail"):
            continue
        fig.runs += 1
        fig.failed_runs += result.status == "fail"
        fig.ci_seconds += result.duration_s or 0.0
        if result.duration_s is not None:
            fig.durations.append(result.duration_s)
        if result.final and not result.probe:
            fig.finals.append((result.at, result.status == "pass"))
            fig.flaky += result.flaky
    queued = {c.staging for c in state.landings} if state is not None else set()
    promoted, latencies, ejections, innocent = _promotions(canonical, records, seen, scopes, queued)
    runs = sum(f.runs for f in scopes.values())
    ci = sum(f.ci_seconds for f in scopes.values())
    span = (records[-1][1].at - records[0][1].at).total_seconds() if len(records) > 1 else 0.0
    return {
        "schema": "integrator.queue-stats.v1",
        "target": canonical.target_ref,
        "promoted": promoted,
        "ejections": ejections,
        "innocentEjections": innocent,
        "runs": runs,
        "ciSeconds": round(ci, 3),
        "runsPerLanding": round(runs / promoted, 3) if promoted else None,
        "ciSecondsPerLanding": round(ci / promoted, 3) if promoted else None,
        "landingToPromotionSeconds": {
            "p50": _percentile(latencies, 0.5),
            "p95": _percentile(latencies, 0.95),
        },
        "landingsPerHour": round(promoted * 3600 / span, 1) if span > 0 else None,
        "scopes": {name: fig.document(config) for name, fig in sorted(scopes.items())},
    }


def landed_at(canonical: Canonical, landing: str) -> float | None:
    """When `landing` (a staging commit as its claim names it) landed: its commit time
    (None when the commit cannot be read)."""
    try:
        return float(canonical.commit(landing).commit_time)
    except (KeyError, ValueError):
        return None


@dataclass(frozen=True)
class Passage:
    """One landing's way through the queue, as the records tell it (times in seconds since
    the epoch): when it landed, and when it was promoted or ejected (neither: it waits)."""

    landing: str
    landed: float
    promoted: float | None = None
    ejected: float | None = None


def timeline(canonical: Canonical, state: QueueState | None) -> list[Passage]:
    """Every landing the last HISTORY_RECORDS promotion records promoted or ejected, and
    those waiting in `state`, oldest landing first (each landing once: its first fate)."""
    seen: dict[str, Passage] = {}
    records = reversed(validations.promotions(canonical, canonical.target, limit=HISTORY_RECORDS))
    for _, record in records:
        at = record.at.timestamp()
        if record.action == "promote":
            fates = [(c.landing, Passage(c.landing, 0.0, promoted=at)) for c in record.landings]
        elif record.action == "eject":
            fates = [(e.landing, Passage(e.landing, 0.0, ejected=at)) for e in record.ejected]
        else:
            continue
        for landing, fate in fates:
            if landing not in seen:
                seen[landing] = fate
    for c in state.landings if state is not None else ():
        seen.setdefault(c.landing, Passage(c.landing, 0.0))
    out = []
    for landing, fate in seen.items():
        landed = landed_at(canonical, landing)
        if landed is not None:
            out.append(Passage(landing, landed, fate.promoted, fate.ejected))
    return sorted(out, key=lambda p: (p.landed, p.landing))


def _promotions(
    canonical: Canonical,
    records: list[tuple[str, PromotionRecord]],
    seen: dict[str, tuple[str, ValidationResult]],
    scopes: dict[str, ScopeFigures],
    queued: set[str],
) -> tuple[int, list[float], int, int]:
    """Landings promoted, their times to promotion, VALIDATION_FAILED ejections and the
    innocent ones; counts cache hits into `scopes`: a promotion resting on a result of a
    head it did not promote and that is not promoted later either (a head validated before,
    or one a rebuild replaced)."""
    promoted_in = {
        c.staging: n
        for n, (_, record) in enumerate(records)
        if record.action == "promote"
        for c in record.landings
    }
    promoted = 0
    latencies: list[float] = []
    ejected: list[tuple[int, str | None]] = []
    promoted_candidates: dict[str, int] = {}
    for n, (_, record) in enumerate(records):
        if record.action == "promote":
            promoted += len(record.landings)
            for c in record.landings:
                if c.candidate:
                    promoted_candidates.setdefault(c.candidate, n)
                landed = landed_at(canonical, c.landing)
                if landed is not None:
                    latencies.append(max(0.0, record.at.timestamp() - landed))
            for oid in record.validations:
                found = seen.get(oid)
                if found is None:
                    continue
                head = found[1].head
                if head not in queued and promoted_in.get(head, -1) < n:
                    scopes.setdefault(_scope_name(found[1].scope), ScopeFigures()).cache_hits += 1
        elif record.action == "eject":
            ejected += [
                (n, e.candidate) for e in record.ejected if e.code.value == "VALIDATION_FAILED"
            ]
    innocent = sum(
        1 for n, cand in ejected if cand is not None and promoted_candidates.get(cand, -1) > n
    )
    return promoted, latencies, len(ejected), innocent


def scope_status(
    canonical: Canonical, config: Validation, state: QueueState, now: datetime
) -> dict[str, Any]:
    """`queue status`, per scope: what waits (position, estimated time), what runs (how
    long, stalled or not), the window, failure and flake rates."""
    from integrator.promotion import linger
    from integrator.promotion.scoped import Memo, read_view
    from integrator.promotion.scopes import ScopeMap, positions

    stats = figures(canonical, config, state)["scopes"]
    waiting: dict[str, list[int]]
    holds: dict[str | None, float]
    if config.scope:
        scopes = ScopeMap(config.scope)
        view = read_view(canonical, state, config, scopes, Memo())
        waiting = {s: positions(view.members, s) for s in scopes.names}
        windows = {s: (stats.get(s) or ScopeFigures().document(config))["window"] for s in waiting}
        holds = linger.scope_holds(
            canonical, state.landings, view.members, view.results, windows, config.linger
        )
    else:
        waiting = {"*": list(range(1, state.pending + 1))}
        window = (stats.get("*") or ScopeFigures().document(config))["window"]
        known = state.final(provisional=config.flaky_reruns > 0)
        until = linger.queue_hold(canonical, state.landings, known, window, config.linger)
        holds = {"*": until} if until is not None else {}
    heads = {c.staging for c in state.landings}
    running: dict[str, list[ValidationResult]] = {}
    tips = list(validations.scoped_refs(canonical, state.target, heads).values())
    tips += [canonical.ref(validations.validation_ref(state.target, h)) or "" for h in heads]
    for tip in filter(None, tips):
        found = validations.read_result(canonical, tip)
        if found is not None and found.status == "running":
            running.setdefault(_scope_name(found.scope), []).append(found)
    out: dict[str, Any] = {}
    for name, mine in waiting.items():
        fig = stats.get(name) or ScopeFigures().document(config)
        median = fig["medianRunSeconds"]
        window = fig["window"]
        rows = []
        # A lingering batch starts when its hold ends: every estimate waits that long too.
        held = holds.get(name)
        wait = 0.0 if held is None else max(0.0, held - now.timestamp())
        for rank, index in enumerate(mine):
            landing = state.landings[index - 1]
            eta = (
                None if median is None
                else round(wait + (rank // max(1, window) + 1) * median, 1)
            )  # fmt: skip
            rows.append({"position": rank + 1, "staging": landing.staging,
                         "task": landing.task_id, "etaSeconds": eta})  # fmt: skip
        runs = []
        for result in running.get(name, []):
            age = (now - result.at).total_seconds()
            stalled = median is not None and age > STALLED_FACTOR * max(median, 1.0)
            runs.append({"head": result.head, "ageSeconds": round(age, 1), "stalled": stalled})
        shown = (
            None if held is None
            else datetime.fromtimestamp(held, UTC).isoformat(timespec="seconds")
        )  # fmt: skip
        out[name] = {"waiting": rows, "running": runs, **fig, "lingerUntil": shown}
    return out
