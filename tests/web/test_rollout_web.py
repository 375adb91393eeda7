"""The review pages show legacy runners and false-positive marks: the real `integrator review
web` process in a real headless Chromium (the browser fixture of tests/web/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from integrator.cli import main
from integrator.web import sources, views
from tests.rollout_world import Rollout, legacy_contract, make_rollout
from tests.web.test_web_browser import (
    XSS,
    Desk,
    Server,
    _by,
    start_server,
    stop_server,
    visit,
)


@pytest.fixture(scope="module")
def rollout_desk(tmp_path_factory: pytest.TempPathFactory) -> Rollout:
    """A legacy runner's submission (review) and a ci change fenced under enforce that a
    release manager marked a false positive (with markup in the reason)."""
    world = make_rollout(tmp_path_factory.mktemp("rollout-web"), ci="enforce")
    world.canon.clock.now = datetime.now(UTC)
    contract = world.issue("legacy", ["src/legacy/**"])
    old = world.commit(contract.base_commit, {"src/legacy/x.py": "x = 1\n"})
    world.hand_in("legacy", legacy_contract(contract), old)
    world.submit(
        "ci", "pipeline", ["tools/**"], {"tools/a.sh": "a\n", ".github/ci.yml": "on: [push]\n"}
    )
    world.drain()
    assert main(["review", "mark-false-positive", world.sids["ci"], "--repo", str(world.repo),
                 "--actor", "rm-bob", "--reason", f"ci.yml is shared {XSS}"]) == 0  # fmt: skip
    return world


@pytest.fixture(scope="module")
def rollout_server(rollout_desk: Rollout) -> Iterator[Server]:
    desk = Desk(rollout_desk.repo, rollout_desk.spool, dict(rollout_desk.sids))
    started = start_server(desk, None)
    try:
        yield started
    finally:
        stop_server(started)


def test_the_held_page_marks_legacy_runners_and_false_positives(
    rollout_desk: Rollout,
    rollout_server: Server,
    browser: Any,
) -> None:
    """The Held page says how many legacy submissions wait (review only) and badges each;
    the marked candidate carries a false-positive badge whose title is the mark, as text."""
    visit(browser, rollout_server.url)
    note = browser.find_element(_by("ID"), "legacy-note").text
    assert "1 submission(s) carry no ownership generation: they are review-only" in note
    legacy = browser.find_element(
        _by("CSS_SELECTOR"), f"tr[data-sid='{rollout_desk.sids['legacy']}']"
    )
    assert "legacy runner" in legacy.text and "REVIEW" in legacy.text
    fenced = browser.find_element(_by("CSS_SELECTOR"), f"tr[data-sid='{rollout_desk.sids['ci']}']")
    badge = fenced.find_element(_by("CSS_SELECTOR"), ".badge.fp")
    assert badge.text == "false positive"
    assert badge.get_attribute("title").startswith("rm-bob at ")
    assert badge.get_attribute("title").endswith(f"(all codes): ci.yml is shared {XSS}")
    assert "legacy runner" not in fenced.text


def test_the_candidate_pages_explain_both(
    rollout_desk: Rollout,
    rollout_server: Server,
    browser: Any,
) -> None:
    """A legacy submission's page says it may only be reviewed; a marked one names who
    marked it and why, the markup shown as characters, nothing run."""
    visit(browser, f"{rollout_server.url}held/{rollout_desk.sids['legacy']}")
    assert (
        "may only be reviewed, never landed automatically"
        in browser.find_element(_by("ID"), "legacy").text
    )
    visit(browser, f"{rollout_server.url}held/{rollout_desk.sids['ci']}")
    mark = browser.find_element(_by("ID"), "false-positive").text
    assert "marked by rm-bob" in mark and f"ci.yml is shared {XSS}" in mark
    assert browser.find_elements(_by("CSS_SELECTOR"), "#false-positive script") == []
    assert browser.find_elements(_by("ID"), "legacy") == []


def test_a_withdrawn_mark_shows_no_badge(tmp_path: Path) -> None:
    """The Held page's rows (read as the server reads them): a withdrawn mark is no false
    positive any more, and only the submission without a generation is a legacy one."""
    world = make_rollout(tmp_path, ci="enforce")
    world.submit("ci", "pipeline", ["tools/**"], {"tools/a.sh": "a\n", ".github/ci.yml": "x\n"})
    world.drain()
    sid = world.sids["ci"]
    for extra in ([], ["--withdraw"]):
        assert main(["review", "mark-false-positive", sid, "--repo", str(world.repo),
                     "--reason", "r", *extra]) == 0  # fmt: skip
        with world.open() as canonical:
            page = sources.held_page(world.spool, canonical, views.Filters())
        (row,) = page.rows
        assert row.legacy is False and page.legacy == 0
        assert (row.false_positive is None) == bool(extra)
