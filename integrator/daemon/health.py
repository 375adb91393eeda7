"""Health and metrics over HTTP: `/livez`, `/readyz`, `/metrics` (Prometheus text format).

A stdlib `ThreadingHTTPServer` in a daemon thread; handlers only read state (file system
probes, the mirror's last flush, gauges computed at scrape time), so a scrape never
touches the repository objects the integration thread is using.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)

from integrator.documents.verdict import Verdict
from integrator.errors import UsageError

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class Metrics:
    """The daemon's Prometheus metrics, in their own registry (tests build several)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        # process_resident_memory_bytes and the rest: a daemon's memory over hours, watched.
        ProcessCollector(registry=self.registry)
        self.decisions = Counter(
            "integrator_decisions",
            "Decisions on submissions, by decision and first violation code.",
            ["decision", "code"],
            registry=self.registry,
        )
        self.violations = Counter(
            "integrator_violations",
            "Violations found in submissions, by code.",
            ["code"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "integrator_decision_latency_seconds",
            "Time from claiming a submission to its verdict (bundle import and integrate).",
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.infrastructure_errors = Counter(
            "integrator_infrastructure_errors",
            "Retryable failures of the host, by kind (disk, git-server, intake, other): "
            "the submissions in hand keep their place for a later attempt.",
            ["kind"],
            registry=self.registry,
        )
        self.queue_depth = Gauge(
            "integrator_queue_depth", "Submissions waiting in new/.", registry=self.registry
        )
        self.mirror_backlog = Gauge(
            "integrator_mirror_backlog_records",
            "Records waiting to be mirrored into the registry.",
            registry=self.registry,
        )
        self.mirror_lag = Gauge(
            "integrator_mirror_lag_seconds",
            "Age of the oldest record not yet mirrored (0 when caught up).",
            registry=self.registry,
        )
        self.mirror_up = Gauge(
            "integrator_mirror_up",
            "1 when the last write to the registry succeeded.",
            registry=self.registry,
        )

    def observe(self, verdict: Verdict | None, latency: float) -> None:
        """Count one decision; `verdict` None is a rejected (malformed) submission."""
        if verdict is None:
            self.decisions.labels("REJECTED", "MALFORMED").inc()
        else:
            first = next((v.code.value for v in verdict.violations if v.enforced), "")
            self.decisions.labels(verdict.decision.value, first).inc()
            for violation in verdict.violations:
                self.violations.labels(violation.code.value).inc()
        self.latency.observe(latency)

    def bind(
        self,
        *,
        queue_depth: Callable[[], float],
        mirror_backlog: Callable[[], float],
        mirror_lag: Callable[[], float],
        mirror_up: Callable[[], float],
    ) -> None:
        """Compute the gauges at scrape time, so the hot path pays nothing for them."""
        self.queue_depth.set_function(queue_depth)
        self.mirror_backlog.set_function(mirror_backlog)
        self.mirror_lag.set_function(mirror_lag)
        self.mirror_up.set_function(mirror_up)

    def render(self) -> bytes:
        return bytes(generate_latest(self.registry))


@dataclass(frozen=True)
class Check:
    ok: bool
    detail: str


def repository_check(git_dir: Path) -> Check:
    """The repository's object store and refs are where they were and readable."""
    for name in ("objects", "refs"):
        path = git_dir / name
        if not os.access(path, os.R_OK | os.X_OK):
            return Check(False, f"{path} is not readable")
    return Check(True, str(git_dir))


Checks = Callable[[], Mapping[str, Check]]


def parse_bind(text: str) -> tuple[str, int]:
    """`HOST:PORT` (port 0 picks a free one); `[::1]:9000` for IPv6."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"--http {text!r} is not HOST:PORT")
    return host.strip("[]") or "127.0.0.1", int(port)


class HealthServer:
    """Serves the three endpoints until `stop()`."""

    def __init__(self, bind: str, checks: Checks, metrics: Metrics) -> None:
        host, port = parse_bind(bind)
        handler = _handler(checks, metrics)
        try:
            self._server = ThreadingHTTPServer((host, port), handler)
        except OSError as err:
            raise UsageError(f"cannot listen on {bind}: {err.strerror}") from err
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="http", kwargs={"poll_interval": 0.2}
        )
        self._thread.daemon = True

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def _handler(checks: Checks, metrics: Metrics) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "integrator"

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/livez":
                self._send(HTTPStatus.OK, b"ok\n", "text/plain; charset=utf-8")
            elif path == "/readyz":
                results = checks()
                ready = all(c.ok for c in results.values())
                body = {
                    "ready": ready,
                    "checks": {k: {"ok": c.ok, "detail": c.detail} for k, c in results.items()},
                }
                status = HTTPStatus.OK if ready else HTTPStatus.SERVICE_UNAVAILABLE
                self._send(status, json.dumps(body).encode() + b"\n", "application/json")
            elif path == "/metrics":
                self._send(HTTPStatus.OK, metrics.render(), CONTENT_TYPE_LATEST)
            else:
                self._send(HTTPStatus.NOT_FOUND, b"not found\n", "text/plain; charset=utf-8")

        def _send(self, status: HTTPStatus, body: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            """Scrapes every few seconds would drown the decision log; stay quiet."""

    return Handler
