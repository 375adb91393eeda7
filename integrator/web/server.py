"""Serving the review pages: bind (loopback unless a token guards the actions and
`--allow-host` names the host names it is reached by), then uvicorn."""

from __future__ import annotations

import signal
import socket
from collections.abc import Sequence
from dataclasses import replace
from types import FrameType
from typing import TextIO

import structlog
import uvicorn

from integrator.daemon.health import parse_bind
from integrator.errors import UsageError
from integrator.tokens import is_loopback
from integrator.web.app import Backend, Site, WebConfig, application
from integrator.web.security import allowed_hosts

log = structlog.get_logger("integrator.web")


def listen(bind: str, *, token: bool) -> socket.socket:
    """A listening socket on `bind`; a non-loopback address is refused without a token."""
    host, port = parse_bind(bind)
    if not is_loopback(host) and not token:
        raise UsageError(
            f"refusing to listen on {host}, which is not a loopback address, without "
            "--token-file: anyone who reaches it could act as the release manager"
        )
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as err:
        sock.close()
        raise UsageError(f"cannot listen on {bind}: {err.strerror}") from err
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def serve(
    bind: str, config: WebConfig, backend: Backend, out: TextIO, allow: Sequence[str] = ()
) -> int:
    """Serve until SIGINT or SIGTERM (uvicorn stops gracefully on either); exit 0."""
    host, _ = parse_bind(bind)
    if not is_loopback(host) and config.token is not None:
        allowed_hosts(host, 0, allow)  # no --allow-host: refused before anything listens
    sock = listen(bind, token=config.token is not None)
    try:
        host, port = sock.getsockname()[:2]
        config = replace(config, allowed_hosts=allowed_hosts(host, port, allow))
    except BaseException:
        sock.close()
        raise
    loopback = is_loopback(host)
    where = "loopback only" if loopback else "NOT loopback: reachable from the network"
    access = "actions need the token" if config.token else "read-only (no --token-file)"
    print(f"review pages on {url_of(sock)} ({where}; {access})", file=out, flush=True)
    site = Site(config, backend)
    server = uvicorn.Server(
        uvicorn.Config(
            application(site),
            log_level="warning",
            access_log=False,
            lifespan="off",
            server_header=False,
            proxy_headers=False,  # the scheme and client are the socket's, whoever says else
            timeout_graceful_shutdown=5,
        )
    )
    # uvicorn stops gracefully on SIGINT/SIGTERM, then re-raises the signal to the handler
    # that was in place before it: a quiet one, so a requested stop exits 0.
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, _stopped)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        log.info("web.stopped", sessions=len(site.sessions))
    return 0


def _stopped(number: int, frame: FrameType | None) -> None:
    """The signal was already handled (uvicorn shut down); nothing is left to do."""
