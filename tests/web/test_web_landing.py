"""Where a landing is, on the review pages: the view of a `landing` document and the
templates that show it, every word an agent could have chosen shown as text."""

from __future__ import annotations

from typing import Any

from integrator.web import views
from integrator.web.app import Backend, Site, WebConfig

XSS = "<script>alert(1)</script>"
EJECTED: dict[str, Any] = {
    "landing": "a" * 40,
    "state": "ejected",
    "ejection": {
        "landing": "a" * 40,
        "staging": "b" * 40,
        "code": "MERGE_CONFLICT",
        "detail": f"src/{XSS}\x1b[2J.py: conflicts with the rebuilt queue\nsecond line",
    },
}


def _render(template: str, **context: Any) -> str:
    site = Site(WebConfig(None, "rm"), Backend(None, None, None))  # type: ignore[arg-type]
    return site.env.get_template(template).render(
        csrf="c", authenticated=False, read_only=True, actor="rm", path="/", title="t",
        **context,
    )  # fmt: skip


def test_a_landing_is_viewed_in_words_for_each_state() -> None:
    """Each state in a few words and in a sentence; an ejection's code and why kept apart,
    its control characters spelled out; a revert names its queue commit."""
    view = views.landing_view(EJECTED)
    assert (view.state, view.summary, view.code) == ("ejected", "ejected (MERGE_CONFLICT)",
                                                     "MERGE_CONFLICT")  # fmt: skip
    assert view.why is not None and "\x1b" not in view.why and "\\x1b[2J" in view.why
    assert view.line.startswith("landing: ejected from the queue (MERGE_CONFLICT: src/")
    reverted = views.landing_view(
        {"landing": "a" * 40, "state": "reverted", "stagingCommit": "c" * 40,
         "revertedBy": "d" * 40}
    )  # fmt: skip
    assert reverted.summary == f"reverted by {'d' * 12}" and reverted.reverted_by == "d" * 40
    promoted = views.landing_view({"landing": "a" * 40, "state": "promoted",
                                   "stagingCommit": "e" * 40})  # fmt: skip
    assert (promoted.summary, promoted.commit) == ("promoted", "e" * 40)
    assert "rebuilt; the claim names aaaaaaaaaaaa" in promoted.line
    gone = views.landing_view({"landing": "a" * 40, "state": "gone"})
    assert gone.summary == "no longer on the queue" and gone.commit == "-"


def test_the_pages_show_a_landing_as_text() -> None:
    """The Queue page's Landed submissions and the Candidate page's Landing section carry
    the state as data and the ejection's why escaped: a path named like markup stays text."""
    view = views.landing_view(EJECTED)
    row = views.accepted_row(
        "20260601T120000000000Z-00000001", "fenced", f"task{XSS}", "b" * 40, view, held=True
    )
    queue = views.QueueView("refs/integrator/queue/main", "f" * 40, (), 0, (), (row,))
    html = _render("queue.html", q=queue)
    assert '<tr data-sid="20260601T120000000000Z-00000001" data-state="ejected">' in html
    assert '<a href="/held/20260601T120000000000Z-00000001" class="sid">' in html
    assert XSS not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "\x1b" not in html and "ejected (MERGE_CONFLICT)" in html
    loose = views.accepted_row("odd", "accepted", None, "b" * 40, view, held=False)
    html = _render("queue.html", q=views.QueueView("q", "-", (), 0, (), (loose,)))
    assert 'href="/held/odd"' not in html  # only a held id gets a link
