"""Who may act on the review pages: the token, sessions, action keys, and response headers.

Reading needs nothing. An action (approve, reject) needs the review token: sent as
`Authorization: Bearer <token>`, or typed once into the login form. A login starts a
session: a random id in an HttpOnly, SameSite=Strict cookie, and an **action key** the
login's response hands to the page's own script, which keeps it in the tab's
`sessionStorage` and sends it as the `X-Integrator-Action` header with every action.

Why both: a cookie ignores ports, so every service on 127.0.0.1 (an agent's dev server)
receives the review page's cookie and can replay it, reading any page and its CSRF token.
Storage is per origin (scheme, host *and port*): that service never served this origin, so
it never sees the key, and no page after the login shows it. A session action also needs
`Origin` to be this origin, its session's CSRF token, and `Sec-Fetch-Site` (when sent) to
be `same-origin`. Anonymous requests keep no state here at all: the login form's CSRF
token is a signed time, not a stored one. Tokens and keys are compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from integrator.errors import UsageError
from integrator.limits import MAX_SESSIONS
from integrator.tokens import is_loopback

COOKIE = "integrator_review"
ACTION_HEADER = "x-integrator-action"
SESSION_TTL = 12 * 3600.0
LOGIN_FORM_TTL = 3600.0  # a login form older than this is stale (its signed time)
TAB_KEYS = 16  # action keys one session keeps (one per tab that logged in); the oldest goes
ACTOR_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}$")
HOST_RE = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(:[0-9]{1,5})?$")

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; "
    "img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",  # no-referrer would make browsers send `Origin: null`
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


def _same(expected: str, given: str | None) -> bool:
    if given is None:
        return False
    return hmac.compare_digest(expected.encode(), given.encode("utf-8", "surrogateescape"))


def safe_actor(value: str) -> bool:
    return bool(ACTOR_RE.match(value))


# -- Host and Origin -------------------------------------------------------------------------


def _authority(host: str, port: int | None) -> str:
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"{shown}:{port}" if port is not None else shown


def allowed_hosts(host: str, port: int, extra: Iterable[str] = ()) -> frozenset[str]:
    """The `Host` values served when listening on `host:port`: on loopback the bound
    address and `localhost`, with the bound port; plus each `--allow-host NAME[:PORT]` (a
    name without a port is taken bare and with the bound port). Off loopback only the
    `--allow-host` names: a UsageError when there are none."""
    out: set[str] = set()
    if is_loopback(host):
        names = {host, "localhost"} | ({"127.0.0.1"} if host == "localhost" else set())
        out |= {_authority(name, port) for name in names}
    for entry in extra:
        match = HOST_RE.match(entry)
        if match is None or len(entry) > 255 or int((match.group(2) or ":0")[1:]) > 65535:
            raise UsageError(f"--allow-host {entry!r} is not HOST or HOST:PORT")
        name = match.group(1).lower()
        out |= {name + match.group(2)} if match.group(2) else {name, _authority(name, port)}
    if not out:
        raise UsageError(
            f"--http {host} is not a loopback address: name the host names browsers use to "
            "reach it with --allow-host NAME[:PORT] (any other Host header is refused, so "
            "a page that rebinds its DNS name to this address cannot read the pages)"
        )
    return frozenset(out)


def origin_is(origin: str | None, host: str | None) -> bool:
    """`Origin` names the origin the request was sent to: http(s) on the `Host` it
    carries (which the guard admitted), port included. A page on another port of the same
    host is another origin, and `Origin: null` (a sandbox, a file) is none of ours."""
    if not origin or not host:
        return False
    parts = urlsplit(origin)
    return (
        parts.scheme in ("http", "https")
        and parts.netloc.lower() == host.lower()
        and not parts.path
        and origin == f"{parts.scheme}://{parts.netloc}"
    )


# -- sessions --------------------------------------------------------------------------------


@dataclass
class Session:
    """A login: its cookie id, its CSRF token, the action key of each tab that logged in
    (newest last), the origin it logged in from, and when."""

    sid: str
    csrf: str
    origin: str
    created: float
    keys: list[str] = field(default_factory=list)

    def has_key(self, given: str | None) -> bool:
        """`given` is one of this session's action keys (each compared in constant time)."""
        found = False
        for key in self.keys:
            found |= _same(key, given)
        return found


class Sessions:
    """Logged-in sessions in memory (a restart logs everyone out), at most MAX_SESSIONS.

    Only a login (the review token, from these pages) makes one; a request without a live
    session's cookie is served without any state being kept for it.
    """

    def __init__(
        self,
        limit: int = MAX_SESSIONS,
        ttl: float = SESSION_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._items: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()
        self.limit = limit
        self.ttl = ttl
        self.clock = clock

    def get(self, sid: str | None) -> Session | None:
        if not sid:
            return None
        with self._lock:
            found = self._items.get(sid)
            if found is not None and self.clock() - found.created > self.ttl:
                del self._items[sid]
                return None
            return found

    def login(self, old: Session | None, origin: str) -> tuple[Session, str]:
        """A fresh session id (a planted or stolen cookie gains nothing) and a new action
        key for the tab that logged in; the other tabs of `old` (same origin) keep theirs."""
        key = secrets.token_urlsafe(32)
        kept = old.keys if old is not None and old.origin == origin else []
        session = Session(
            secrets.token_urlsafe(32),
            secrets.token_urlsafe(32),
            origin,
            self.clock(),
            [*kept, key][-TAB_KEYS:],
        )
        with self._lock:
            if old is not None:
                self._items.pop(old.sid, None)
            self._items[session.sid] = session
            while len(self._items) > self.limit:
                self._items.popitem(last=False)
        return session, key

    def drop(self, sid: str) -> None:
        with self._lock:
            self._items.pop(sid, None)

    def __len__(self) -> int:
        return len(self._items)


def csrf_matches(session: Session | None, given: str | None) -> bool:
    return session is not None and bool(given) and _same(session.csrf, given)


class LoginForms:
    """The login form's CSRF token without server state: the time it was served, signed
    with a key this process made at start (a restart makes old forms stale)."""

    def __init__(self, ttl: float = LOGIN_FORM_TTL, clock: Callable[[], float] = time.time):
        self._secret = secrets.token_bytes(32)
        self.ttl = ttl
        self.clock = clock

    def _sign(self, moment: str) -> str:
        return hmac.new(self._secret, b"login:" + moment.encode(), hashlib.sha256).hexdigest()

    def issue(self) -> str:
        moment = str(int(self.clock()))
        return f"{moment}.{self._sign(moment)}"

    def valid(self, given: str | None) -> bool:
        moment, _, signature = (given or "").partition(".")
        if not moment.isdigit() or len(moment) > 12:
            return False
        fresh = 0 <= self.clock() - int(moment) <= self.ttl
        return _same(self._sign(moment), signature) and fresh
