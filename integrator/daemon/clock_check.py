"""A deciding host's clock, checked against times it does not control (docs/daemon.md,
"Clock skew").

Leases are only as good as the clock of the host that judges them: a daemon whose clock is
two hours behind would land a candidate whose lease expired two hours ago. In remote mode,
before each batch, the daemon compares its clock with

- the `Date` header of the git server, when the remote is http(s) (the server's clock), and
- the committer times of the newest authority records other hosts wrote and the server
  holds: the claims index (moved by every claim a coordinator issues), the queue head, the
  policy, and every host's write probe (`refs/integrator/probe/<host>`).

A record is written at its writer's "now", so none can lie in the true future unless its
writer's clock is fast; one that lies in *this* host's future by more than
`max-clock-skew` seconds means this host's clock is behind (or a writer's is ahead): either
way leases cannot be judged here, and the batch is refused as the host's trouble (kind
`clock`, exit 4 in `--once`, retried with backoff in `serve`) with the measured skew and
its source. A clock that is ahead only makes leases expire early here — the safe side —
and is not refused.
"""

from __future__ import annotations

import email.utils
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import UTC, datetime

import pygit2

from integrator import refnames
from integrator.errors import InfrastructureError
from integrator.plumbing import git
from integrator.records.canonical import Canonical

DEFAULT_MAX_SKEW = 300.0  # seconds; `serve --config` [serve] max-clock-skew
HTTP_EVERY = 60.0  # seconds between asks of the server's Date header
HTTP_TIMEOUT = 5.0


@dataclass(frozen=True)
class Reading:
    """One time this host does not control, and where it was read."""

    source: str
    at: datetime


def record_times(canonical: Canonical) -> list[Reading]:
    """The committer times of the newest authority records the mirror holds."""
    repo = canonical.repo
    names = [refnames.CLAIMS_INDEX, refnames.POLICY, canonical.queue_ref]
    names += sorted(git.refs_under(repo, refnames.PROBE))
    out: list[Reading] = []
    for name in names:
        oid = canonical.ref(name)
        if oid is None:
            continue
        try:
            commit = repo[oid]
        except (KeyError, ValueError):
            continue
        if isinstance(commit, pygit2.Commit):
            out.append(Reading(name, datetime.fromtimestamp(commit.commit_time, UTC)))
    return out


def server_date(url: str) -> Reading | None:
    """The `Date` an http(s) git server answers with (any status: a 401 has one too);
    None for other transports or when it cannot be read."""
    if not url.startswith(("http://", "https://")):
        return None
    probe = url.rstrip("/") + "/info/refs?service=git-upload-pack"
    request = urllib.request.Request(probe, method="GET")
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT) as answer:
            header = answer.headers.get("Date")
    except urllib.error.HTTPError as err:
        header = err.headers.get("Date") if err.headers else None
    except (OSError, ValueError):
        return None
    if not header:
        return None
    try:
        return Reading(
            f"the server's Date header ({url})", email.utils.parsedate_to_datetime(header)
        )
    except (TypeError, ValueError):
        return None


def skew_problem(readings: list[Reading], now: datetime, max_skew: float) -> str | None:
    """Why this host's clock cannot judge leases (a reading more than `max_skew` seconds
    in its future), None when none is; a pure decision."""
    if not readings:
        return None
    newest = max(readings, key=lambda r: r.at)
    seconds = (newest.at - now).total_seconds()
    if seconds <= max_skew:
        return None
    return (
        f"this host's clock ({now.isoformat(timespec='seconds')}) is {seconds:.0f} s behind "
        f"{newest.source} ({newest.at.isoformat(timespec='seconds')}), more than "
        f"max-clock-skew {max_skew:g} s: leases cannot be judged on this host (fix its "
        "clock, e.g. with NTP)"
    )


class ClockCheck:
    """The check the daemon makes before each batch in remote mode."""

    def __init__(self, canonical: Canonical, max_skew: float = DEFAULT_MAX_SKEW) -> None:
        self.canonical = canonical
        self.max_skew = max_skew
        self.last_skew: float | None = None  # seconds the newest reading was ahead
        self._http: Reading | None = None
        self._http_read_at = float("-inf")
        self._http_local: datetime | None = None

    def _server(self, url: str) -> list[Reading]:
        moment = time.monotonic()
        if moment - self._http_read_at >= HTTP_EVERY:
            self._http_read_at = moment
            self._http = server_date(url)
            self._http_local = self.canonical.clock()
        if self._http is None or self._http_local is None:
            return []
        # The server's clock then, carried forward by the time that passed here since.
        passed = self.canonical.clock() - self._http_local
        return [Reading(self._http.source, self._http.at + passed)]

    def check(self) -> None:
        """InfrastructureError (kind `clock`) when this host's clock is too far behind."""
        remote = self.canonical.remote_url
        if remote is None:
            return  # one host: its clock is the only one
        readings = record_times(self.canonical) + self._server(remote)
        now = self.canonical.clock()
        if readings:
            self.last_skew = max((r.at - now).total_seconds() for r in readings)
        problem = skew_problem(readings, now, self.max_skew)
        if problem is not None:
            raise InfrastructureError(problem, kind="clock")
