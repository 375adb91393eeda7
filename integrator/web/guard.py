"""The outermost layer of the review pages: the Host allow-list and the security headers.

A request whose `Host` is not one the server was told it is reached by is refused (421)
before any page is read: on loopback only the bound address and port (and `localhost`
on that port), off loopback only the `--allow-host` names. So a page that rebinds a DNS
name to the server's address cannot read the pages, and the origin the action checks
compare `Origin` with is always one of the server's own.

Every request is logged once it is answered (`web.request`: method, path, status,
milliseconds, client address); never a header, a cookie or the query, which may carry a
token or a session.
"""

from __future__ import annotations

import time

import structlog
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from integrator.web.security import HEADERS

log = structlog.get_logger("integrator.web")
PATH_SHOWN = 256  # characters of a request's path a log line keeps (the client chose it)


def shown_path(path: str) -> str:
    """A request's path as a log line keeps it: the first PATH_SHOWN characters."""
    return path if len(path) <= PATH_SHOWN else path[:PATH_SHOWN] + "…"


def host_header(scope: Scope) -> str:
    """The request's one `Host` header (empty when it has none, or more than one)."""
    found = [v for k, v in scope.get("headers", []) if k == b"host"]
    return found[0].decode("latin-1") if len(found) == 1 else ""


class Guard:
    """Every response gets the security headers; a Host header not allowed is refused."""

    def __init__(self, app: ASGIApp, allowed_hosts: frozenset[str] | None) -> None:
        self.app = app
        self.allowed = allowed_hosts  # None: any (an application built without a server)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = host_header(scope).lower()
        app = self.app
        if self.allowed is not None and host not in self.allowed:
            app = Response(
                "this server is not reached by that name (Host header)\n",
                421,
                media_type="text/plain",
            )
        answered: list[int] = []
        started = time.monotonic()
        try:
            await self._with_headers(app, scope, receive, send, answered)
        finally:
            client = scope.get("client")
            log.info(
                "web.request", method=str(scope.get("method", "")),
                path=shown_path(str(scope.get("path", ""))),
                status=answered[0] if answered else None,
                ms=round((time.monotonic() - started) * 1000, 1),
                client=str(client[0]) if client else None,
            )  # fmt: skip

    async def _with_headers(
        self, app: ASGIApp, scope: Scope, receive: Receive, send: Send, answered: list[int]
    ) -> None:
        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                answered.append(int(message["status"]))
                present = {k.lower() for k, _ in message.get("headers", [])}
                extra = [
                    (k.lower().encode(), v.encode())
                    for k, v in HEADERS.items()
                    if k.lower().encode() not in present
                ]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await app(scope, receive, sending)
