"""The outermost layer of the review pages: the Host allow-list and the security headers.

A request whose `Host` is not one the server was told it is reached by is refused (421)
before any page is read: on loopback only the bound address and port (and `localhost`
on that port), off loopback only the `--allow-host` names. So a page that rebinds a DNS
name to the server's address cannot read the pages, and the origin the action checks
compare `Origin` with is always one of the server's own.
"""

from __future__ import annotations

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from integrator.web.security import HEADERS


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
        if self.allowed is not None and host not in self.allowed:
            response = Response(
                "this server is not reached by that name (Host header)\n",
                421,
                media_type="text/plain",
            )
            await self._with_headers(response, scope, receive, send)
            return
        await self._with_headers(self.app, scope, receive, send)

    async def _with_headers(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                extra = [
                    (k.lower().encode(), v.encode())
                    for k, v in HEADERS.items()
                    if k.lower().encode() not in present
                ]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await app(scope, receive, sending)
