"""The Queue page's promotion section against a real repository: a real `integrator serve`
validated, promoted and ejected landings per scope with a real script, more landed and wait,
and the page shows per scope what `integrator queue status --json` says, with the charts
drawn from the same promotion records."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from integrator.cli import main
from integrator.records.canonical import Canonical
from integrator.web import queue_view, sources
from integrator.web.app import Backend, Site, WebConfig
from tests.promotion_world import PromotionWorld, make_world, now, promotion_world
from tests.web.queue_world import build_queue

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture
def promotion(tmp_path: Path) -> Iterator[PromotionWorld]:
    yield from promotion_world(tmp_path)


def _render(**context: object) -> str:
    site = Site(WebConfig(None, "rm"), Backend(None, None, None))  # type: ignore[arg-type]
    return site.env.get_template("queue.html").render(
        csrf="c", authenticated=False, read_only=True, actor="rm", path="/queue",
        title="Queue", **context,
    )  # fmt: skip


def _charts(html: str) -> dict[str, ET.Element]:
    """The page's inline SVGs by id (each well-formed on its own)."""
    out = {}
    for piece in html.split("<svg ")[1:]:
        element = ET.fromstring("<svg " + piece.split("</svg>", 1)[0] + "</svg>")
        out[element.attrib["id"]] = element
    return out


def test_the_queue_page_shows_per_scope_what_queue_status_says(
    promotion: PromotionWorld, capsys: pytest.CaptureFixture[str]
) -> None:
    w = promotion
    stuck = build_queue(w)

    with Canonical(w.repo) as canonical:
        view = sources.promotion_status(canonical, now())
    capsys.readouterr()
    assert main(["queue", "status", "--repo", str(w.repo), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)

    assert view.mode == "command" and view.paused is None and view.problem is None
    assert view.pending == len(status["unpromoted"]) == 3
    assert [s.name for s in view.scopes] == sorted(status["scopes"]) == ["a", "b"]
    for scope in view.scopes:
        doc = status["scopes"][scope.name]
        assert [(r.position, r.task) for r in scope.waiting] == [
            (row["position"], row["task"]) for row in doc["waiting"]
        ]
        assert [r.eta for r in scope.waiting] == [
            "?" if row["etaSeconds"] is None else f"~{queue_view.seconds(row['etaSeconds'])}"
            for row in doc["waiting"]
        ]
        assert (scope.window, scope.runs, scope.flaky, scope.cache_hits) == (
            doc["window"], doc["runs"], doc["flaky"], doc["cacheHits"],
        )  # fmt: skip
        assert scope.failure_rate == f"{doc['failureRate']:.0%}"
        assert scope.flake_rate == f"{doc['flakeRate']:.0%}"
        assert [(r.head, r.stalled) for r in scope.running] == [
            (run["head"][:12], run["stalled"]) for run in doc["running"]
        ]
    a, b = view.scopes
    assert [r.task for r in a.waiting] == ["a2"] and [r.task for r in b.waiting] == ["b2", "b3"]
    assert a.failure_rate != "0%" and a.runs >= 2  # scope a's failed run, then its bisection
    assert all(r.eta.startswith("~") for r in (*a.waiting, *b.waiting))  # both scopes ran
    (running,) = b.running
    assert running.head == stuck[:12] and running.stalled and running.age.startswith("1h")

    with Canonical(w.repo) as canonical:
        html = _render(q=sources.queue_page(w.spool, canonical), p=view)
    assert '<tr data-scope="a">' in html and '<tr data-scope="b">' in html
    assert 'data-stalled="1"' in html and "STALLED" in html
    charts = _charts(html)
    assert sorted(charts) == ["flow-chart", "latency-chart"]
    lines = {p.attrib["data-series"]: int(p.attrib["data-count"])
             for p in charts["flow-chart"].iter(f"{SVG}path")}  # fmt: skip
    promoted = len(w.chain("refs/heads/main"))
    assert lines == {"landed": 6, "promoted": promoted, "ejected": 1}
    assert promoted == 2  # a0 and b0
    bars = [int(r.attrib["data-count"]) for r in charts["latency-chart"].iter(f"{SVG}rect")
            if r.get("class") == "bar"]  # fmt: skip
    assert sum(bars) == promoted


def test_without_validation_the_section_says_the_target_follows(tmp_path: Path) -> None:
    """A policy without [validation]: no scope, no chart; the page says the target follows
    the queue, as `queue status` does."""
    world = make_world(tmp_path, None)
    with Canonical(world.repo) as canonical:
        view = sources.promotion_status(canonical, now())
    assert view.mode is None and view.scopes == () and view.pending == 0
    with Canonical(world.repo) as canonical:
        html = _render(q=sources.queue_page(world.spool, canonical), p=view)
    assert "no [validation]: the target follows the queue" in html and "<svg" not in html
