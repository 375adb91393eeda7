"""Lingering: a batch that is not full waits a little for more landings (pure).

`[validation] linger = S`: when a scope (or the whole queue, without scopes) has fewer
landings waiting than its window and no failure to bisect, its next validation starts only
once its oldest waiting landing has waited S seconds — or as soon as the window is full.
One run then covers more landings: at a landing every 30 s per scope and a two-minute
suite, a queue that starts a run whenever one is free validates about four landings a run;
lingering one suite's length doubles that, for at most S more seconds from landing to
promotion. A bisection, an ejection, a promotion and a full window never wait.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from integrator.documents.promotion import Covered
from integrator.promotion.bisect import newest_pass
from integrator.promotion.scopes import bisecting, positions
from integrator.records.canonical import Canonical


def hold_until(
    waiting: int, window: int, oldest: float | None, now: float, linger: float
) -> float | None:
    """When a batch of `waiting` landings, the oldest landed at `oldest` (seconds since
    the epoch), starts if it lingers: a time after `now`, or None when it starts now."""
    if linger <= 0 or waiting <= 0 or waiting >= window or oldest is None:
        return None
    start = oldest + linger
    return start if start > now else None


def landed_at(canonical: Canonical, landing: Covered) -> float:
    """When a landing landed: its first staging commit's committer time (a rebuild keeps
    the name of the staging commit its claim consumed)."""
    return float(canonical.commit(landing.landing).commit_time)


def _hold(
    canonical: Canonical,
    landings: Sequence[Covered],
    mine: Sequence[int],
    results: Mapping[int, bool],
    window: int,
    linger: float,
    now: float,
) -> float | None:
    """Until when the next batch of the landings at queue positions `mine` (1-based, one
    scope's or the whole queue's) waits, given their `results` by count; None: it starts."""
    if bisecting(results):
        return None
    newest = newest_pass(results)
    waiting = len(mine) - newest
    if waiting <= 0 or waiting >= window:
        return None
    oldest = landed_at(canonical, landings[mine[newest] - 1])
    return hold_until(waiting, window, oldest, now, linger)


def queue_hold(
    canonical: Canonical,
    landings: Sequence[Covered],
    results: Mapping[int, bool],
    window: int,
    linger: float,
) -> float | None:
    """The unscoped queue's hold: until when its next batch waits (None: it starts now)."""
    if linger <= 0:
        return None
    mine = range(1, len(landings) + 1)
    now = canonical.clock().timestamp()
    return _hold(canonical, landings, mine, results, window, linger, now)


def scope_holds(
    canonical: Canonical,
    landings: Sequence[Covered],
    members: Sequence[frozenset[str]],
    results: Mapping[str, Mapping[int, bool]],
    windows: Mapping[str, int],
    linger: float,
) -> dict[str | None, float]:
    """Each scope whose next batch waits, and until when (scopes with nothing waiting, a
    full window or a failure to bisect are not in it)."""
    if linger <= 0:
        return {}
    now = canonical.clock().timestamp()
    out: dict[str | None, float] = {}
    for scope, window in windows.items():
        mine = positions(members, scope)
        until = _hold(canonical, landings, mine, results.get(scope, {}), window, linger, now)
        if until is not None:
            out[scope] = until
    return out
