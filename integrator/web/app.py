"""The review pages as an ASGI application (Starlette): Held, Candidate, Queue, and actions.

Pages and their JSON twins only read. Approve and reject are POST-only and go through the
same `Review` the CLI builds (`integrator review approve|reject`), with the real
integration engine, so the web can refuse nothing less than the command line does. See
`integrator.web.security` for who may act, and docs/review.md for the pages.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from integrator.documents.verdict import Verdict
from integrator.errors import ConfigurationError, IntegratorError, UsageError
from integrator.limits import FORM_BYTES, WEB_REASON_CHARS
from integrator.review.actions import Held, Review
from integrator.tokens import bearer, token_matches
from integrator.web import sources, views
from integrator.web.candidate import verdict_lines
from integrator.web.security import (
    COOKIE,
    HEADERS,
    Session,
    Sessions,
    csrf_matches,
    safe_actor,
)

STATIC = {"review.css": "text/css; charset=utf-8"}


@dataclass(frozen=True)
class Backend:
    """What the pages need from the command line: its way of opening a `Review` (with or
    without the integration engine) and the documents `review list|show --json` print."""

    open_review: Callable[[bool], AbstractContextManager[Review]]
    summary: Callable[[Held], dict[str, Any]]
    show: Callable[[Review, Held], dict[str, Any]]


@dataclass(frozen=True)
class WebConfig:
    token: str | None
    actor: str
    allowed_hosts: tuple[str, ...] | None = None  # None: any Host header


class Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _host_of(header: str) -> str:
    if header.startswith("["):
        return header[1:].partition("]")[0]
    return header.rpartition(":")[0] if header.count(":") == 1 else header


class Guard:
    """Every response gets the security headers; a Host header naming anything but the
    bound loopback address is refused (a DNS-rebinding page cannot read the pages)."""

    def __init__(self, app: ASGIApp, allowed_hosts: tuple[str, ...] | None) -> None:
        self.app = app
        self.allowed = allowed_hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
        if self.allowed is not None and _host_of(host) not in self.allowed:
            response = Response("unknown host\n", 421, media_type="text/plain")
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


class Site:
    def __init__(self, config: WebConfig, backend: Backend) -> None:
        self.config = config
        self.backend = backend
        self.sessions = Sessions()
        self.env = jinja2.Environment(
            loader=jinja2.PackageLoader("integrator.web", "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )

    # -- plumbing --------------------------------------------------------------------------

    def session(self, request: Request) -> tuple[Session, bool]:
        found = self.sessions.get(request.cookies.get(COOKIE))
        return (found, False) if found is not None else (self.sessions.new(), True)

    def page(
        self,
        request: Request,
        session: Session,
        fresh: bool,
        template: str,
        status: int = 200,
        **context: Any,
    ) -> HTMLResponse:
        body = self.env.get_template(template).render(
            csrf=session.csrf,
            authenticated=session.authenticated,
            read_only=self.config.token is None,
            actor=views.text(self.config.actor, 64),
            path=request.url.path,
            **context,
        )
        response = HTMLResponse(body, status)
        if fresh:
            self.set_cookie(response, session)
        return response

    def set_cookie(self, response: Response, session: Session) -> None:
        response.set_cookie(COOKIE, session.sid, httponly=True, samesite="strict", path="/")

    def problem(self, request: Request, status: int, message: str) -> HTMLResponse:
        session, fresh = self.session(request)
        return self.page(
            request, session, fresh, "error.html", status, message=message, title="Refused"
        )

    async def form(self, request: Request) -> dict[str, str]:
        kind = request.headers.get("content-type", "").partition(";")[0].strip().lower()
        if kind != "application/x-www-form-urlencoded":
            raise Refused(415, "actions take a form (application/x-www-form-urlencoded)")
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > FORM_BYTES:
                raise Refused(413, f"the form is larger than {FORM_BYTES} bytes")
        try:
            pairs = parse_qsl(
                body.decode("ascii"),
                keep_blank_values=True,
                strict_parsing=False,
                encoding="utf-8",
                errors="strict",
                max_num_fields=16,
            )
        except (UnicodeDecodeError, ValueError) as err:
            raise Refused(400, f"the form cannot be read: {err}") from err
        out: dict[str, str] = {}
        for key, value in pairs:
            if key in out:
                raise Refused(400, f"the form names {views.text(key, 40)!r} twice")
            out[key] = value
        return out

    def same_origin(self, request: Request) -> bool:
        site = request.headers.get("sec-fetch-site")
        if site is not None:  # the browser's own word on where the request came from
            return site in ("same-origin", "none")
        origin = request.headers.get("origin")
        own = f"{request.url.scheme}://{request.headers.get('host', '')}"
        return origin is None or origin == own

    def authorize(self, request: Request, session: Session, form: dict[str, str]) -> None:
        """Refused unless the request carries the token (bearer) or comes from an
        authenticated session's own form (same origin, its CSRF token)."""
        token = bearer(request.headers.get("authorization"))
        if token is not None:
            if token_matches(self.config.token, token):
                return
            raise Refused(403, "the bearer token is not the review token")
        if not self.same_origin(request):
            raise Refused(403, "the form was not sent from these pages (cross-site request)")
        if not csrf_matches(session, form.get("csrf")):
            raise Refused(
                403,
                "the form's CSRF token is missing or belongs to another session; "
                "reload the page and try again",
            )
        if self.config.token is None:
            raise Refused(
                403,
                "these pages are read-only: the server was started without --token-file",
            )
        if not session.authenticated:
            raise Refused(403, "approving or rejecting needs the review token: log in first")

    def actor_of(self, form: dict[str, str]) -> str:
        given = form.get("actor", "").strip()
        if not given:
            return self.config.actor
        if not safe_actor(given):
            raise Refused(
                400,
                "the actor name may hold letters, digits and . _ @ + - (up to 64, starting "
                "with a letter or digit)",
            )
        return given

    @staticmethod
    def reason_of(form: dict[str, str], *, required: bool) -> str | None:
        reason = form.get("reason", "").replace("\r\n", "\n").strip()
        if not reason:
            if required:
                raise Refused(400, "a reason is required to reject a candidate")
            return None
        if len(reason) > WEB_REASON_CHARS:
            raise Refused(400, f"the reason is longer than {WEB_REASON_CHARS} characters")
        if any(ord(c) < 32 and c not in "\n\t" for c in reason):
            raise Refused(400, "the reason holds control characters")
        return reason

    # -- pages -----------------------------------------------------------------------------

    async def held(self, request: Request) -> Response:
        filters = views.Filters.parse(request.query_params)

        def read() -> views.HeldPage:
            with self.backend.open_review(False) as review:
                return sources.held_page(review.spool, review.canonical, filters)

        page = await self.read(read)
        session, fresh = self.session(request)
        return self.page(request, session, fresh, "held.html", page=page, title="Held")

    async def candidate(self, request: Request) -> Response:
        sid = self.sid(request)

        def read() -> object:
            with self.backend.open_review(False) as review:
                return sources.candidate_page(review, sid)

        view = await self.read(read)
        session, fresh = self.session(request)
        return self.page(request, session, fresh, "candidate.html", c=view, title=sid)

    async def patch(self, request: Request) -> Response:
        sid = self.sid(request)

        def read() -> bytes:
            with self.backend.open_review(False) as review:
                return sources.raw_patch(review, sid)

        body = await self.read(read)
        return Response(
            body,
            media_type="text/plain; charset=utf-8",
            headers={"Content-Disposition": f'attachment; filename="{sid}.patch"'},
        )

    async def queue(self, request: Request) -> Response:
        def read() -> views.QueueView:
            with self.backend.open_review(False) as review:
                return sources.queue_page(review.spool, review.canonical)

        view = await self.read(read)
        session, fresh = self.session(request)
        return self.page(request, session, fresh, "queue.html", q=view, title="Queue")

    async def read(self, work: Callable[[], Any]) -> Any:
        try:
            return await run_in_threadpool(work)
        except UsageError as err:
            raise Refused(404, str(err)) from err
        except IntegratorError as err:
            raise Refused(500 if isinstance(err, ConfigurationError) else 503, str(err)) from err

    @staticmethod
    def sid(request: Request) -> str:
        try:
            return sources.check_sid(request.path_params["sid"])
        except UsageError as err:
            raise Refused(404, str(err)) from err

    # -- actions ---------------------------------------------------------------------------

    async def approve(self, request: Request) -> Response:
        sid = self.sid(request)
        session, fresh = self.session(request)
        form = await self.form(request)
        self.authorize(request, session, form)
        actor, reason = self.actor_of(form), self.reason_of(form, required=False)

        def act() -> Verdict:
            with self.backend.open_review(True) as review:
                return review.approve(sid, actor, None, reason)

        verdict = await self.act(act)
        return self.page(
            request, session, fresh, "result.html", title=f"approve {sid}", sid=sid,
            action="approve", by=views.text(actor), decision=verdict.decision.value,
            lines=verdict_lines(verdict), staging=verdict.staging_commit,
        )  # fmt: skip

    async def reject(self, request: Request) -> Response:
        sid = self.sid(request)
        session, fresh = self.session(request)
        form = await self.form(request)
        self.authorize(request, session, form)
        actor, reason = self.actor_of(form), self.reason_of(form, required=True)
        assert reason is not None

        def act() -> None:
            with self.backend.open_review(False) as review:
                review.reject(sid, actor, reason)

        await self.act(act)
        return self.page(
            request, session, fresh, "result.html", title=f"reject {sid}", sid=sid,
            action="reject", by=views.text(actor), decision="ARCHIVED",
            lines=(("-", "reason", views.text(reason)),), staging=None,
        )  # fmt: skip

    async def act(self, work: Callable[[], Any]) -> Any:
        try:
            return await run_in_threadpool(work)
        except UsageError as err:
            raise Refused(409, str(err)) from err
        except IntegratorError as err:
            raise Refused(503 if err.exit_code == 4 else 409, str(err)) from err

    async def login(self, request: Request) -> Response:
        session, fresh = self.session(request)
        target = _local_target(request.query_params.get("next"))
        if request.method == "GET":
            return self.page(request, session, fresh, "login.html", title="Log in", next=target)
        form = await self.form(request)
        target = _local_target(form.get("next"))
        if not self.same_origin(request) or not csrf_matches(session, form.get("csrf")):
            raise Refused(403, "the login form is stale; reload the page and try again")
        if self.config.token is None:
            raise Refused(403, "these pages are read-only: there is no token to log in with")
        if not token_matches(self.config.token, form.get("token")):
            raise Refused(403, "that is not the review token")
        fresh_session = self.sessions.login(session)
        response = RedirectResponse(target, status_code=303)
        self.set_cookie(response, fresh_session)
        return response

    async def logout(self, request: Request) -> Response:
        session, _ = self.session(request)
        form = await self.form(request)
        if not self.same_origin(request) or not csrf_matches(session, form.get("csrf")):
            raise Refused(403, "the form is stale; reload the page and try again")
        self.sessions.drop(session.sid)
        response = RedirectResponse("/", status_code=303)
        self.set_cookie(response, self.sessions.new())
        return response

    # -- JSON twins and files --------------------------------------------------------------

    async def api_held(self, request: Request) -> Response:
        def read() -> list[dict[str, Any]]:
            with self.backend.open_review(False) as review:
                return [self.backend.summary(h) for h in review.pending()]

        return _json(await self.read(read))

    async def api_one(self, request: Request) -> Response:
        sid = self.sid(request)

        def read() -> dict[str, Any]:
            with self.backend.open_review(False) as review:
                return self.backend.show(review, review.get(sid))

        return _json(await self.read(read))

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC:
            raise Refused(404, "no such file")
        from importlib.resources import files

        data = (files("integrator.web") / "static" / name).read_bytes()
        return Response(data, media_type=STATIC[name], headers={"Cache-Control": "max-age=300"})


def _json(document: Any) -> Response:
    """The document as the CLI's `--json` prints it (same encoder, same options)."""
    body = json.dumps(document, indent=2, ensure_ascii=False, default=str) + "\n"
    return Response(body.encode(), media_type="application/json")


def _local_target(value: str | None) -> str:
    """Where to go after logging in: one of our own pages, never another site."""
    if value and (value in ("/", "/queue") or value.startswith("/held/")):
        try:
            sources.check_sid(value.removeprefix("/held/"))
        except UsageError:
            return value if value in ("/", "/queue") else "/"
        return value
    return "/"


def create_app(config: WebConfig, backend: Backend) -> ASGIApp:
    """The application, wrapped in the guard that sets headers and checks the Host."""
    site = Site(config, backend)

    def handled(endpoint: Callable[[Request], Any]) -> Callable[[Request], Any]:
        async def run(request: Request) -> Response:
            try:
                response: Response = await endpoint(request)
            except Refused as err:
                if request.url.path.startswith("/api/"):
                    return _error_json(err.status, err.message)
                return site.problem(request, err.status, err.message)
            return response

        return run

    routes = [
        Route("/", handled(site.held), methods=["GET"]),
        Route("/held/{sid}", handled(site.candidate), methods=["GET"]),
        Route("/held/{sid}/patch", handled(site.patch), methods=["GET"]),
        Route("/held/{sid}/approve", handled(site.approve), methods=["POST"]),
        Route("/held/{sid}/reject", handled(site.reject), methods=["POST"]),
        Route("/queue", handled(site.queue), methods=["GET"]),
        Route("/login", handled(site.login), methods=["GET", "POST"]),
        Route("/logout", handled(site.logout), methods=["POST"]),
        Route("/api/held", handled(site.api_held), methods=["GET"]),
        Route("/api/held/{sid}", handled(site.api_one), methods=["GET"]),
        Route("/static/{name}", handled(site.static), methods=["GET"]),
        Route("/favicon.ico", lambda _: Response(status_code=204), methods=["GET"]),
    ]
    return Guard(Starlette(routes=routes), config.allowed_hosts)


def _error_json(status: int, message: str) -> Response:
    return Response(json.dumps({"error": message}) + "\n", status, media_type="application/json")
