"""Who may act on the review pages: the token, sessions, CSRF tokens and response headers.

Reading needs nothing. An action (approve, reject) needs the review token: sent as
`Authorization: Bearer <token>`, or typed once into the login form, which starts an
authenticated session (a random id in an HttpOnly, SameSite=Strict cookie; the token
itself is never stored in the browser). Every form carries its session's CSRF token,
checked on POST; a request with a bearer token carries no ambient credential and so needs
none. Tokens are compared in constant time.
"""

from __future__ import annotations

import hmac
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from integrator.limits import MAX_SESSIONS

COOKIE = "integrator_review"
SESSION_TTL = 12 * 3600.0
ACTOR_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}$")

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
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


def safe_actor(value: str) -> bool:
    return bool(ACTOR_RE.match(value))


@dataclass
class Session:
    sid: str
    csrf: str
    authenticated: bool
    created: float


class Sessions:
    """Server-side sessions in memory (a restart logs everyone out), bounded in number.

    Anonymous sessions (a visitor before login: only a CSRF token for the login form) and
    authenticated ones are kept apart, each bounded on its own: a flood of cookieless
    requests evicts only other anonymous sessions, never the release manager's login.
    """

    def __init__(
        self,
        limit: int = MAX_SESSIONS,
        ttl: float = SESSION_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._items: OrderedDict[str, Session] = OrderedDict()  # authenticated
        self._anonymous: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()
        self.limit = limit
        self.ttl = ttl
        self.clock = clock

    def get(self, sid: str | None) -> Session | None:
        if not sid:
            return None
        with self._lock:
            for store in (self._items, self._anonymous):
                found = store.get(sid)
                if found is None:
                    continue
                if self.clock() - found.created > self.ttl:
                    del store[sid]
                    return None
                return found
            return None

    def new(self, *, authenticated: bool = False) -> Session:
        session = Session(
            secrets.token_urlsafe(32), secrets.token_urlsafe(32), authenticated, self.clock()
        )
        store = self._items if authenticated else self._anonymous
        with self._lock:
            store[session.sid] = session
            while len(store) > self.limit:
                store.popitem(last=False)
        return session

    def login(self, old: Session | None) -> Session:
        """A fresh authenticated session (a new id, so a planted cookie gains nothing)."""
        if old is not None:
            self.drop(old.sid)
        return self.new(authenticated=True)

    def drop(self, sid: str) -> None:
        with self._lock:
            self._items.pop(sid, None)
            self._anonymous.pop(sid, None)

    def __len__(self) -> int:
        return len(self._items) + len(self._anonymous)


def csrf_matches(session: Session | None, given: str | None) -> bool:
    if session is None or not given:
        return False
    return hmac.compare_digest(session.csrf.encode(), given.encode("utf-8", "surrogateescape"))
