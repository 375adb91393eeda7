"""Reading what a review form posts: bounded, one value per name, each field held to what it
may be (an actor name, a reason, the claim the page showed, where to go after a login)."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl

from starlette.requests import Request

from integrator.errors import UsageError
from integrator.limits import FORM_BYTES, WEB_REASON_CHARS
from integrator.review.seen import ClaimMark
from integrator.web import sources, views
from integrator.web.security import safe_actor

CLAIM_GENERATION = "claim-generation"
CLAIM_DIGEST = "claim-digest"
DIGEST_RE = re.compile(r"^[A-Za-z0-9:+/=_-]{1,200}$")


class Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


async def read_form(request: Request) -> dict[str, str]:
    """The posted form: `application/x-www-form-urlencoded`, at most FORM_BYTES, ASCII on
    the wire (UTF-8 once decoded), at most 16 fields, none twice."""
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


def actor_of(form: dict[str, str], default: str) -> str:
    given = form.get("actor", "").strip()
    if not given:
        return default
    if not safe_actor(given):
        raise Refused(
            400,
            "the actor name may hold letters, digits and . _ @ + - (up to 64, starting "
            "with a letter or digit)",
        )
    return given


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


def claim_of(form: dict[str, str], *, required: bool) -> ClaimMark | None:
    """The task's claim as the page showed it (its generation and contract digest; both
    empty: the page showed no claim). None when the form names neither and need not."""
    if CLAIM_GENERATION not in form and CLAIM_DIGEST not in form:
        if required:
            raise Refused(
                400,
                "the form does not say which claim of the task it showed "
                f"({CLAIM_GENERATION}, {CLAIM_DIGEST}); reload the page and try again",
            )
        return None
    generation, digest = form.get(CLAIM_GENERATION, ""), form.get(CLAIM_DIGEST, "")
    if not generation and not digest:
        return ClaimMark(None, None)
    if not (generation.isascii() and generation.isdigit() and len(generation) <= 12):
        raise Refused(400, f"the form's {CLAIM_GENERATION} is not a generation")
    if not DIGEST_RE.match(digest):
        raise Refused(400, f"the form's {CLAIM_DIGEST} is not a contract digest")
    return ClaimMark(int(generation), digest)


def local_target(value: str | None) -> str:
    """Where to go after logging in: one of our own pages, never another site."""
    if value and (value in ("/", "/queue") or value.startswith("/held/")):
        try:
            sources.check_sid(value.removeprefix("/held/"))
        except UsageError:
            return value if value in ("/", "/queue") else "/"
        return value
    return "/"
