"""The review pages as an ASGI application (Starlette): Held, Candidate, Queue, and actions.

Pages and their JSON twins only read, and keep no state for whoever reads them. Approve
and reject are POST-only and go through the same `Review` the CLI builds (`integrator
review approve|reject`), with the real integration engine, so the web can refuse nothing
less than the command line does; each carries the task's claim as the page showed it, and
a claim that moved since is refused (409) before anything is done. See
`integrator.web.security` for who may act, and docs/review.md for the pages.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import jinja2
import structlog
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from integrator.documents.verdict import Verdict
from integrator.errors import ConfigurationError, IntegratorError, UsageError
from integrator.review.actions import Held, Review
from integrator.review.seen import ClaimMark, ClaimMoved
from integrator.tokens import bearer, token_matches
from integrator.web import sources, views
from integrator.web.candidate import verdict_lines
from integrator.web.forms import (
    Refused,
    actor_of,
    claim_of,
    local_target,
    read_form,
    reason_of,
)
from integrator.web.guard import Guard, shown_path
from integrator.web.queue_view import PromotionView
from integrator.web.security import (
    ACTION_HEADER,
    COOKIE,
    LoginForms,
    Session,
    Sessions,
    csrf_matches,
    origin_is,
)

log = structlog.get_logger("integrator.web")

STATIC = {
    "review.css": "text/css; charset=utf-8",
    "review.js": "text/javascript; charset=utf-8",
}


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
    allowed_hosts: frozenset[str] | None = None  # None: any Host header (no server)


class Moved(Refused):
    """409: the claim the page showed is not the live one."""

    def __init__(self, err: ClaimMoved) -> None:
        super().__init__(409, views.text(str(err), 2000))
        self.seen = _shown(err.seen)
        self.live = _shown(err.live)


def _shown(mark: ClaimMark) -> ClaimMark:
    """A claim mark with its words safe to show (they come from claim records)."""
    attempt = views.text(mark.attempt, 200) if mark.attempt is not None else None
    digest = views.text(mark.digest, 200) if mark.digest is not None else None
    return ClaimMark(mark.generation, digest, attempt)


class Site:
    def __init__(self, config: WebConfig, backend: Backend) -> None:
        self.config = config
        self.backend = backend
        self.sessions = Sessions()
        self.login_forms = LoginForms()
        self.env = jinja2.Environment(
            loader=jinja2.PackageLoader("integrator.web", "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )

    # -- plumbing --------------------------------------------------------------------------

    def session(self, request: Request) -> Session | None:
        """The live login the request's cookie names; nothing is made for one without."""
        return self.sessions.get(request.cookies.get(COOKIE))

    def page(
        self,
        request: Request,
        session: Session | None,
        template: str,
        status: int = 200,
        **context: Any,
    ) -> HTMLResponse:
        body = self.env.get_template(template).render(
            csrf=session.csrf if session is not None else "",
            authenticated=session is not None,
            read_only=self.config.token is None,
            actor=views.text(self.config.actor, 64),
            path=request.url.path,
            **context,
        )
        return HTMLResponse(body, status)

    def problem(self, request: Request, err: Refused) -> HTMLResponse:
        moved = (err.seen, err.live) if isinstance(err, Moved) else None
        return self.page(
            request, self.session(request), "error.html", err.status,
            message=err.message, title="Refused", moved=moved,
        )  # fmt: skip

    @staticmethod
    def from_these_pages(request: Request, what: str) -> str | None:
        """The request's own origin (its `Origin`, or None when it sends none); refused when
        the browser says it came from anywhere but these pages: another site, or another
        port of this host (`same-site` in the browser's words)."""
        site = request.headers.get("sec-fetch-site")
        if site is not None and site != "same-origin":
            raise Refused(403, f"{what} was not sent from these pages ({site} request)")
        origin = request.headers.get("origin")
        if origin is not None and not origin_is(origin, request.headers.get("host")):
            raise Refused(
                403,
                f"{what} was sent from another origin ({views.text(origin, 200)}), not from "
                "these pages: a page on another port of this host is another origin",
            )
        return origin

    def authorize(self, request: Request, session: Session | None, form: dict[str, str]) -> bool:
        """Refused unless the request carries the token (bearer: True), or comes from a
        logged-in tab of these pages (False): its session's cookie and CSRF token, `Origin`
        this origin, and the tab's action key in `X-Integrator-Action`."""
        if self.config.token is None:
            raise Refused(
                403, "these pages are read-only: the server was started without --token-file"
            )
        token = bearer(request.headers.get("authorization"))
        if token is not None:
            if token_matches(self.config.token, token):
                return True
            raise Refused(403, "the bearer token is not the review token")
        origin = self.from_these_pages(request, "the form")
        if session is None:
            raise Refused(403, "approving or rejecting needs the review token: log in first")
        if not csrf_matches(session, form.get("csrf")):
            raise Refused(
                403,
                "the form's CSRF token is missing or belongs to another session; "
                "reload the page and try again",
            )
        if origin is None or origin != session.origin:
            raise Refused(
                403,
                "an action from a session must name its origin (Origin header), the one it "
                "logged in from: the pages' own script sends it",
            )
        key = request.headers.get(ACTION_HEADER)
        if not key:
            raise Refused(
                403,
                "this tab holds no action key: a session cookie alone cannot act (every "
                "service on this host receives it). Log in in this tab, with JavaScript "
                "on: the pages' script keeps the key in the tab and sends it with each action",
            )
        if not session.has_key(key):
            raise Refused(403, "this tab's action key is not its session's: log in again here")
        return False

    # -- pages -----------------------------------------------------------------------------

    async def held(self, request: Request) -> Response:
        filters = views.Filters.parse(request.query_params)

        def read() -> views.HeldPage:
            with self.backend.open_review(False) as review:
                return sources.held_page(review.spool, review.canonical, filters)

        page = await self.read(read)
        return self.page(request, self.session(request), "held.html", page=page, title="Held")

    async def candidate(self, request: Request) -> Response:
        sid = self.sid(request)

        def read() -> object:
            with self.backend.open_review(False) as review:
                return sources.candidate_page(review, sid)

        view = await self.read(read)
        return self.page(request, self.session(request), "candidate.html", c=view, title=sid)

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
        def read() -> tuple[views.QueueView, PromotionView]:
            with self.backend.open_review(False) as review:
                view = sources.queue_page(review.spool, review.canonical)
                return view, sources.promotion_status(review.canonical, datetime.now(UTC))

        view, promotion = await self.read(read)
        return self.page(
            request, self.session(request), "queue.html", q=view, p=promotion, title="Queue"
        )

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
        session = self.session(request)
        form = await read_form(request)
        scripted = self.authorize(request, session, form)
        seen = claim_of(form, required=not scripted)
        actor = actor_of(form, self.config.actor)
        reason = reason_of(form, required=False)

        def act() -> Verdict:
            with self.backend.open_review(True) as review:
                return review.approve(sid, actor, None, reason, seen=seen)

        verdict = await self.act(act, "approve", sid, actor)
        return self.page(
            request, session, "result.html", title=f"approve {sid}", sid=sid,
            action="approve", by=views.text(actor), decision=verdict.decision.value,
            lines=verdict_lines(verdict), staging=verdict.staging_commit,
        )  # fmt: skip

    async def reject(self, request: Request) -> Response:
        sid = self.sid(request)
        session = self.session(request)
        form = await read_form(request)
        scripted = self.authorize(request, session, form)
        seen = claim_of(form, required=not scripted)
        actor = actor_of(form, self.config.actor)
        reason = reason_of(form, required=True)
        assert reason is not None

        def act() -> None:
            with self.backend.open_review(False) as review:
                review.reject(sid, actor, reason, seen=seen)

        await self.act(act, "reject", sid, actor)
        return self.page(
            request, session, "result.html", title=f"reject {sid}", sid=sid,
            action="reject", by=views.text(actor), decision="ARCHIVED",
            lines=(("-", "reason", views.text(reason)),), staging=None,
        )  # fmt: skip

    async def act(self, work: Callable[[], Any], action: str, sid: str, actor: str) -> Any:
        """Run an action in a worker thread; its outcome is logged (`web.action`), a
        refusal by `handled` (`web.refused`)."""
        try:
            done = await run_in_threadpool(work)
        except ClaimMoved as err:
            raise Moved(err) from err
        except UsageError as err:
            raise Refused(409, str(err)) from err
        except IntegratorError as err:
            raise Refused(503 if err.exit_code == 4 else 409, str(err)) from err
        decision = done.decision.value if isinstance(done, Verdict) else "ARCHIVED"
        log.info("web.action", action=action, submission=sid, actor=actor, decision=decision)
        return done

    async def login(self, request: Request) -> Response:
        session = self.session(request)
        if request.method == "GET":
            target = local_target(request.query_params.get("next"))
            return self.page(
                request, session, "login.html", title="Log in", next=target,
                login_csrf=self.login_forms.issue(),
            )  # fmt: skip
        form = await read_form(request)
        target = local_target(form.get("next"))
        origin = self.from_these_pages(request, "the login form")
        if not self.login_forms.valid(form.get("csrf")):
            raise Refused(403, "the login form is stale; reload the page and try again")
        if self.config.token is None:
            raise Refused(403, "these pages are read-only: there is no token to log in with")
        if not token_matches(self.config.token, form.get("token")):
            raise Refused(403, "that is not the review token")
        own = origin or f"{request.url.scheme}://{request.headers.get('host', '')}"
        fresh, key = self.sessions.login(session, own)
        response = self.page(
            request, fresh, "logged-in.html", title="Logged in", next=target, key=key
        )
        response.set_cookie(COOKIE, fresh.sid, httponly=True, samesite="strict", path="/")
        log.info("web.login", actor=self.config.actor)  # neither the token nor the session
        return response

    async def logout(self, request: Request) -> Response:
        session = self.session(request)
        form = await read_form(request)
        self.from_these_pages(request, "the form")
        if session is None or not csrf_matches(session, form.get("csrf")):
            raise Refused(403, "the form is stale; reload the page and try again")
        self.sessions.drop(session.sid)
        log.info("web.logout", actor=self.config.actor)
        response = RedirectResponse("/", status_code=303)
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
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


def application(site: Site) -> ASGIApp:
    """The site's routes, wrapped in the guard that sets headers and checks the Host."""

    def handled(endpoint: Callable[[Request], Any]) -> Callable[[Request], Any]:
        async def run(request: Request) -> Response:
            try:
                response: Response = await endpoint(request)
            except Refused as err:
                log.warning(
                    "web.refused", method=request.method, path=shown_path(request.url.path),
                    status=err.status, reason=err.message,
                )  # fmt: skip
                if request.url.path.startswith("/api/"):
                    return _error_json(err.status, err.message)
                return site.problem(request, err)
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
    return Guard(Starlette(routes=routes), site.config.allowed_hosts)


def create_app(config: WebConfig, backend: Backend) -> ASGIApp:
    return application(Site(config, backend))


def _error_json(status: int, message: str) -> Response:
    return Response(json.dumps({"error": message}) + "\n", status, media_type="application/json")
