"""The MCP server over Streamable HTTP: a bearer token on every request, and the Host and
Origin checks against DNS rebinding for whichever address it is bound to.

Every request passes three checks before the SDK sees it, in this order:

1. `Host` must name the address the connection reached, with its port (`127.0.0.1:8765`,
   `[::1]:8765`, `127.0.0.5:8765`; `localhost:PORT` too when that address is 127.0.0.1 or
   ::1; an IP literal in any spelling, never another name), and be the request's only Host:
   otherwise 421. A page on evil.example that rebinds its name to 127.0.0.1 sends
   `Host: evil.example:PORT`; another loopback address or port is refused the same way.
2. `Origin`, when present, must be `http://` and one of those hosts: otherwise 403.
3. `Authorization: Bearer <token>` must carry this server's token (constant-time compare):
   otherwise 401 with `WWW-Authenticate: Bearer error="invalid_token"` and the JSON body
   `{"error": "invalid_token", "error_description": …}` (RFC 6750, as the SDK's own bearer
   middleware answers).

The token is the operator's (`--token-file`, refused unless only its owner can read it) or
a fresh one integrator writes 0600; the log names the file, never the token.
"""

from __future__ import annotations

import ipaddress
import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from integrator.errors import UsageError
from integrator.tokens import bearer, is_loopback, new_token_file, read_token, token_matches

LOCALHOST_ADDRESSES = frozenset({"127.0.0.1", "::1"})  # what `localhost` resolves to
Scope = dict[str, Any]
Receive = Callable[[], Any]
Send = Callable[[dict[str, Any]], Any]


def parse_http(text: str, *, allow_remote: bool) -> tuple[str, int]:
    """`HOST:PORT` (port 0 picks one); a host off the loopback needs `allow_remote`."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"--http {text!r} is not HOST:PORT")
    host = host.strip("[]") or "127.0.0.1"
    if not is_loopback(host) and not allow_remote:
        raise UsageError(
            f"--http {text!r} is not a loopback address; the MCP server listens on the "
            "loopback unless --allow-remote says otherwise (every request needs its token "
            "either way)"
        )
    return host, int(port)


def server_token(token_file: Path | None, generated: Path) -> tuple[str, Path]:
    """The token requests must carry, and the file it is in: `token_file` (refused unless
    `mode & 0o077 == 0`), else a fresh token written 0600 to `generated`."""
    if token_file is not None:
        return read_token(token_file), token_file
    return new_token_file(generated), generated


def names_address(host: str, address: str, port: int) -> bool:
    """Whether a `Host` value (`HOST:PORT`, `[V6]:PORT`) names `address:port`: an IP literal
    equal to it (in any spelling; an IPv4-mapped address is its IPv4 too), or `localhost`
    where the address is 127.0.0.1 or ::1. A name is never the address: it may resolve to
    anything."""
    parts = _split(host.lower())
    if parts is None or not parts[1].isdigit() or int(parts[1]) != port:
        return False
    name, _, bracketed = parts
    ours = _forms(address)
    if name == "localhost" and not bracketed:
        return bool({str(a) for a in ours} & LOCALHOST_ADDRESSES)
    try:
        theirs = ipaddress.ip_address(name)
    except ValueError:
        return False
    # Brackets are for IPv6 only, and IPv6 needs them.
    return bracketed == (theirs.version == 6) and bool(_forms(str(theirs)) & ours)


def _split(host: str) -> tuple[str, str, bool] | None:
    """(name, port, bracketed) of `HOST:PORT` or `[V6]:PORT`; None when it is neither."""
    if host.startswith("["):
        name, bracket, rest = host[1:].partition("]")
        return (name, rest[1:], True) if bracket and rest.startswith(":") else None
    name, colon, port = host.rpartition(":")
    return (name, port, False) if colon and ":" not in name else None


def _forms(address: str) -> set[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return set()
    mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
    return {ip} if mapped is None else {ip, mapped}


class HttpGate:
    """ASGI middleware in front of the SDK's app: Host, Origin, then the bearer token."""

    def __init__(self, app: Callable[..., Any], token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan
            await self.app(scope, receive, send)
            return
        pairs = [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope["headers"]]
        headers = dict(pairs)
        local = scope.get("server")  # the connection's own address (a wildcard bind's too)
        address, port = (str(local[0]), int(local[1] or 0)) if local else ("", 0)

        def ours(host: str) -> bool:
            return names_address(host, address, port)

        hosts = [v for k, v in pairs if k == "host"]
        if len(hosts) != 1 or not ours(hosts[0]):
            await _plain(send, 421, "the Host header does not name this server's address")
            return
        origins = [v for k, v in pairs if k == "origin"]
        if origins and (
            len(origins) != 1 or not origins[0].startswith("http://") or not ours(origins[0][7:])
        ):
            await _plain(send, 403, "the Origin header is not this server's")
            return
        given = bearer(headers.get("authorization"))
        if not token_matches(self.token, given):
            why = "the bearer token is not this server's" if given else "a bearer token is required"
            await _unauthorized(send, why)
            return
        await self.app(scope, receive, send)


async def _plain(send: Send, status: int, text: str) -> None:
    body = (text + "\n").encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _unauthorized(send: Send, description: str) -> None:
    body = json.dumps({"error": "invalid_token", "error_description": description}).encode()
    challenge = f'Bearer error="invalid_token", error_description="{description}"'
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", challenge.encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on `host:port` (bound here, so port 0 can be announced)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as err:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {err.strerror}") from err
    sock.listen(64)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/mcp"


def serve(app: Callable[..., Any], sock: socket.socket, token: str) -> None:
    """Serve `app` (the SDK's Streamable HTTP app) behind the gate until stopped."""
    import anyio
    import uvicorn

    config = uvicorn.Config(
        HttpGate(app, token), log_level="warning", lifespan="on", server_header=False
    )
    anyio.run(lambda: uvicorn.Server(config).serve(sockets=[sock]))
