"""The Queue page's promotion section: what `integrator queue status` says per scope, and
the two charts, as plain data for the template.

The per-scope figures are the document `queue status --json` prints under `scopes`
(`integrator.promotion.stats.scope_status`, read once by `sources`): landings waiting with
their position and estimated time to promotion, heads running with how long and whether
stalled, the window, failure and flake rates. Every word a record carries (task ids,
scope names, the pause's reason and actor) passes through `views.text`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from markupsafe import Markup

from integrator.documents.promotion import QueueControl
from integrator.limits import QUEUE_SCOPE_ROWS
from integrator.promotion.stats import Passage
from integrator.web import charts
from integrator.web.views import text


@dataclass(frozen=True)
class RunningRow:
    head: str
    age: str
    stalled: bool


@dataclass(frozen=True)
class WaitingLanding:
    position: int
    staging: str
    task: str
    eta: str  # "~3m 20s", or "?" while the scope has no run to estimate from


@dataclass(frozen=True)
class ScopeView:
    name: str
    waiting: tuple[WaitingLanding, ...]  # the first QUEUE_SCOPE_ROWS
    waiting_total: int
    running: tuple[RunningRow, ...]  # the first QUEUE_SCOPE_ROWS
    running_total: int
    window: int
    failure_rate: str
    flake_rate: str
    flaky: int
    runs: int
    cache_hits: int
    median_run: str

    @property
    def stalled(self) -> int:
        return sum(r.stalled for r in self.running)


@dataclass(frozen=True)
class PromotionView:
    target: str
    paused: str | None  # who paused landings, since when and why (None: not paused)
    mode: str | None  # the validation mode (None: no [validation], the target follows)
    pending: int  # landings waiting for promotion
    problem: str | None  # why the queue's state could not be read
    scopes: tuple[ScopeView, ...]
    flow: Markup
    latency: Markup


def _percent(value: object) -> str:
    return f"{value:.0%}" if isinstance(value, int | float) else "-"


def seconds(value: object) -> str:
    """A figure in seconds as the page shows it (tenths under ten seconds; "-": none)."""
    return charts.duration_of(value) if isinstance(value, int | float) else "-"


def scope_view(name: str, doc: Mapping[str, Any]) -> ScopeView:
    """One scope of the `queue status --json` document."""
    waiting = list(doc.get("waiting") or [])
    running = list(doc.get("running") or [])
    return ScopeView(
        name=text(name, 80),
        waiting=tuple(
            WaitingLanding(
                position=int(row["position"]),
                staging=text(row["staging"], 40)[:12],
                task=text(row.get("task") or "-", 80),
                eta="?" if row.get("etaSeconds") is None else f"~{seconds(row['etaSeconds'])}",
            )
            for row in waiting[:QUEUE_SCOPE_ROWS]
        ),
        waiting_total=len(waiting),
        running=tuple(
            RunningRow(text(run["head"], 40)[:12], seconds(run["ageSeconds"]), bool(run["stalled"]))
            for run in running[:QUEUE_SCOPE_ROWS]
        ),
        running_total=len(running),
        window=int(doc.get("window", 0)),
        failure_rate=_percent(doc.get("failureRate")),
        flake_rate=_percent(doc.get("flakeRate")),
        flaky=int(doc.get("flaky", 0)),
        runs=int(doc.get("runs", 0)),
        cache_hits=int(doc.get("cacheHits", 0)),
        median_run=seconds(doc.get("medianRunSeconds")),
    )


def paused_line(control: QueueControl | None) -> str | None:
    if control is None or not control.paused:
        return None
    at = control.at.isoformat(timespec="seconds")
    return text(f"by {control.actor} since {at}: {control.reason or 'no reason given'}", 400)


def promotion_view(
    target: str,
    *,
    control: QueueControl | None,
    mode: str | None,
    pending: int,
    scopes: Mapping[str, Mapping[str, Any]],
    passages: Sequence[Passage],
    now: datetime,
    problem: str | None = None,
) -> PromotionView:
    """The section, from what `sources.promotion_status` read."""
    name = text(target, 200)
    latencies = [p.promoted - p.landed for p in passages if p.promoted is not None]
    return PromotionView(
        target=name,
        paused=paused_line(control),
        mode=text(mode, 40) if mode is not None else None,
        pending=pending,
        problem=text(problem, 2000) if problem else None,
        scopes=tuple(scope_view(n, doc) for n, doc in sorted(scopes.items())),
        flow=charts.flow(passages, label=f"Landings and promotions on {name}", now=now.timestamp()),
        latency=charts.histogram(latencies, label="Time from landing to promotion"),
    )
