"""The review pages in a real headless Chromium, driving the real `integrator review web` process.

One module-wide setup: a canonical repository where several agents submitted candidates
(one landed; others fenced for an out-of-contract path, a stale generation, a symlink
escape, an uncovered rename end, and a path named `<script>alert(1)</script>`), drained by
the real daemon; then one server process on 127.0.0.1 and one browser session, both
stopped at the end by their PIDs. The screenshots in docs/review/ are taken here.
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from integrator.cli import main
from integrator.daemon.loop import Daemon
from integrator.daemon.settings import Settings
from integrator.documents.contract import OwnershipContract
from integrator.documents.submission import Submission
from integrator.landing.engine import Integrator
from integrator.records.canonical import Canonical
from integrator.records.claims import Claims, IssueRequest
from integrator.records.held import archived_ref, held_ref, history
from integrator.records.prepare import prepare
from integrator.store.mirror import for_spool
from integrator.store.spool import Spool
from tests.daemon_world import key_for
from tests.gitutil import GIT_ENV, Spec, commit_files, declare_bare, make_repo
from tests.promotion_world import make_world
from tests.web.queue_world import build_queue

ROOT = Path(__file__).resolve().parents[2]
# The screenshots in docs/review/ are taken by these tests: `make screenshots` runs them
# with INTEGRATOR_SCREENSHOTS=docs/review; a plain run writes them to a scratch folder, so
# the checkout is not changed by every test run.
SHOTS_ENV = "INTEGRATOR_SCREENSHOTS"
XSS = "<script>alert(1)</script>"
TOKEN = "t0k3n-" + "x" * 32

PROJECT: dict[str, Spec] = {
    "billing/invoice.py": "def total(lines):\n    return sum(lines)\n",
    "auth/login.py": "def login(user):\n    return user\n",
    "docs/guide.md": "# Guide\n\nHow to pay.\n",
    "search/index.py": "def search(q):\n    return []\n",
    "web/app.js": "console.log('hi')\n",
    "package.json": '{"name": "shop"}\n',
    "pnpm-lock.yaml": "lockfileVersion: 9\n",
    ".github/workflows/ci.yml": "on: push\n",
}


@dataclass
class Desk:
    """The demo-like setup: repository, spool, and the submission id of each agent."""

    repo: Path
    spool: Spool
    sids: dict[str, str]

    def canonical(self) -> Canonical:
        return Canonical(self.repo)

    def folder_of(self, agent: str) -> str | None:
        found = self.spool.find(self.sids[agent])
        return found[0] if found else None


def _submit(
    spool: Spool, contract: OwnershipContract, candidate: str, user: str, repo: Path
) -> str:
    return spool.submit(
        Submission.model_validate(
            {
                "schema": "integrator.submission.v1",
                "contract": contract.wire(),
                "candidate": candidate,
                "submitter": {"user": user, "host": "fleet-1"},
                "submittedAt": datetime.now(UTC),
            }
        ),
        key=key_for(repo, contract.wire()),
    )


def build_desk(root: Path) -> Desk:
    """Eight agents' candidates, drained once by the daemon; one more waits in new/."""
    repo = declare_bare(make_repo(root / "canonical"))
    commit_files(repo, PROJECT, "initial project", ref="refs/heads/main")
    prepare(repo, target="main")
    spool = Spool(root / "spool").ensure()
    hour = timedelta(hours=1)
    with Canonical(repo) as canonical:
        claims = Claims(canonical)

        def issue(task: str, holder: str, *paths: str) -> OwnershipContract:
            return claims.issue(IssueRequest(task, paths, holder=holder, lease=hour))

        contracts = {
            "agent-a": issue("billing", "agent-a", "billing/**"),
            "agent-b": issue("auth", "agent-b", "auth/**"),
            "agent-c": issue("docs", "agent-c", "docs/**"),
            "agent-d": issue("web", "agent-d", "web/**"),
            "agent-e": issue("search", "agent-e", "search/**"),
            "agent-g": issue("assets", "agent-g", "assets/**"),
            "agent-h": issue("notes", "agent-h", "notes/*.md"),
            "agent-i": issue("lint", "agent-i", "lint/**"),
        }
        contracts["agent-f"] = claims.reclaim("search", force=True, holder="agent-f")
    candidates: dict[str, tuple[dict[str, Spec], str]] = {
        "agent-a": ({"billing/invoice.py": "def total(l):\n    return round(sum(l), 2)\n"}, "billing: round"),
        "agent-d": (
            {"web/app.js": "console.log('shop')\n", ".github/workflows/ci.yml": "on: [push]\n",
             "pnpm-lock.yaml": "lockfileVersion: 9\npackages: {}\n"},
            "web: banner (and a build step rewrote the lockfile)",
        ),
        "agent-e": ({"search/index.py": "def search(q):\n    return [q]\n"}, "search: stale attempt"),
        "agent-f": ({"search/index.py": "def search(q):\n    return sorted([q])\n"}, "search: sorted"),
        "agent-g": ({"assets/logo.txt": "logo\n", "assets/passwd": ("../../etc/passwd", "l")}, "assets: logo"),
        "agent-c": ({"docs/guide.md": None, "handbook/guide.md": "# Guide\n\nHow to pay.\n"}, "docs: move the guide"),
        "agent-h": ({"notes/a.md": "a\n", f"notes/{XSS}": "x\n"}, f"notes <img src=x onerror=alert(2)> {XSS}"),
        "agent-i": ({"lint/rules.py": "RULES = []\n", "Makefile": "lint:\n"}, "lint: rules and a target"),
    }  # fmt: skip
    sids = {}
    for agent, (files, message) in candidates.items():
        oid = commit_files(repo, files, message, parent="refs/heads/main", ref=None)
        user = f"{agent} <b>{XSS}</b>" if agent == "agent-h" else agent
        sids[agent] = _submit(spool, contracts[agent], oid, user, repo)
    with Canonical(repo) as canonical:
        Daemon(
            spool=spool,
            canonical=canonical,
            engine=Integrator(canonical),
            mirror=for_spool(spool.root),
            settings=Settings(watch=False),
        ).run(once=True)
    waiting = commit_files(repo, {"auth/login.py": "x = 1\n"}, "auth: wait", ref=None)
    sids["agent-b"] = _submit(spool, contracts["agent-b"], waiting, "agent-b", repo)
    return Desk(repo, spool, sids)


@dataclass
class Server:
    url: str
    process: subprocess.Popen[str]
    log: Path


def start_server(desk: Desk, token_file: Path | None) -> Server:
    """`integrator review web` as a process on a free loopback port; its URL from stdout."""
    args = [sys.executable, "-m", "integrator", "review", "web", "--spool", str(desk.spool.root),
            "--repo", str(desk.repo), "--http", "127.0.0.1:0", "--actor", "rm-alice"]  # fmt: skip
    if token_file is not None:
        args += ["--token-file", str(token_file)]
    env = {**os.environ, **GIT_ENV}
    log = desk.repo.parent / f"server-{len(list(desk.repo.parent.glob('server-*.log')))}.log"
    with open(log, "w") as errors:  # the server's log, for a failing test to show
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=errors, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("review pages on http://127.0.0.1:"):
        proc.kill()
        proc.communicate()
        raise AssertionError(f"server did not start: {line!r} {log.read_text()}")
    return Server(line.split()[3], proc, log)


def stop_server(server: Server) -> None:
    os.kill(server.process.pid, signal.SIGTERM)
    server.process.communicate(timeout=20)
    assert server.process.returncode == 0, server.log.read_text()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where screenshots go: $INTEGRATOR_SCREENSHOTS (make screenshots), else scratch."""
    chosen = os.environ.get(SHOTS_ENV)
    folder = (ROOT / chosen) if chosen else tmp_path_factory.mktemp("shots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def desk(tmp_path_factory: pytest.TempPathFactory) -> Desk:
    """The demo-like repository and spool, built once for the module."""
    saved = {k: os.environ.get(k) for k in GIT_ENV}
    os.environ.update(GIT_ENV)
    try:
        return build_desk(tmp_path_factory.mktemp("web"))
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def server(desk: Desk, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The real server process with a token file, stopped by its PID after the module."""
    token_file = tmp_path_factory.mktemp("token") / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    started = start_server(desk, token_file)
    try:
        yield started
    finally:
        stop_server(started)


# -- helpers -------------------------------------------------------------------------------


def _by(kind: str) -> Any:
    from selenium.webdriver.common.by import By

    return getattr(By, kind)


def visit(driver: Any, url: str) -> None:
    """Open `url` and wait until the browser shows one of the review pages (chromedriver can
    return from a navigation before the new document's title is there to read)."""
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(url)
    WebDriverWait(driver, 10).until(expected_conditions.title_contains("integrator review"))


def wait_for(driver: Any, css: str) -> Any:
    """The element `css` selects, once the current page shows it.

    Used after a click that navigates: the selector must match only on the next page, so
    finding it proves the navigation is done. (Polling an element of the old page until it
    goes stale is not reliable: while the browser navigates, chromedriver may answer a
    question about it with "unhandled inspector error" instead of a stale element.)
    """
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(
        driver, 10, ignored_exceptions=(NoSuchElementException, StaleElementReferenceException)
    )
    return wait.until(expected_conditions.presence_of_element_located((_by("CSS_SELECTOR"), css)))


def submit(driver: Any, form_id: str, shows: str, **fields: str) -> None:
    """Fill the form's fields, press its button, and wait for the next page: the one where
    the CSS selector `shows` matches (it must match nothing on the form's own page)."""
    form = driver.find_element(_by("ID"), form_id)
    for name, value in fields.items():
        box = form.find_element(_by("NAME"), name)
        box.clear()
        box.send_keys(value)
    form.find_element(_by("CSS_SELECTOR"), "button[type=submit]").click()
    wait_for(driver, shows)


# What only the page after a form shows: a refusal's message, an action's outcome, and (once
# logged in) the log-out button.
REFUSED = "#message"
OUTCOME = "p.outcome"
LOGGED_IN = "form[action='/logout']"


def anonymous(driver: Any, server: Server) -> None:
    visit(driver, server.url)
    driver.delete_all_cookies()


def log_in(driver: Any, server: Server, then: str) -> None:
    visit(driver, f"{server.url}login?next={urllib.parse.quote(then)}")
    if "acting as" in driver.find_element(_by("ID"), "mode").text:
        visit(driver, server.url + then.lstrip("/"))
        return
    from selenium.webdriver.support.ui import WebDriverWait

    form = driver.find_element(_by("ID"), "login")
    form.find_element(_by("NAME"), "token").send_keys(TOKEN)
    form.find_element(_by("CSS_SELECTOR"), "button[type=submit]").click()
    target = server.url + then.lstrip("/")
    # The page after the login keeps the tab's action key, then goes on to `then`.
    WebDriverWait(driver, 10).until(lambda d: d.current_url == target)
    wait_for(driver, LOGGED_IN)
    assert driver.find_element(_by("ID"), "mode").text == "acting as rm-alice"
    assert driver.execute_script("return sessionStorage.getItem('integrator-action')")


def no_alert(driver: Any) -> None:
    from selenium.common.exceptions import NoAlertPresentException

    with pytest.raises(NoAlertPresentException):
        _ = driver.switch_to.alert.text


def actions_of(desk: Desk, agent: str) -> list[tuple[str, str | None, list[str]]]:
    with desk.canonical() as canonical:
        chain = history(canonical, desk.sids[agent])
    return [(a.action, a.decision.value if a.decision else None, a.codes) for _, a in chain]


def fetch(
    url: str,
    *,
    data: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    opener: urllib.request.OpenerDirector | None = None,
) -> tuple[int, dict[str, str], bytes]:
    body = urllib.parse.urlencode(data).encode() if data is not None else None
    request = urllib.request.Request(url, data=body, headers=headers or {})
    try:
        with (opener or urllib.request.build_opener()).open(request, timeout=20) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


# -- the tests -----------------------------------------------------------------------------


def test_held_list_shows_the_fenced_candidates(
    desk: Desk, server: Server, browser: Any, shots: Path
) -> None:
    """The Held page lists every fenced candidate newest first with task, agent, codes and
    why, counts each code, and filters by code (screenshot: docs/review/held.png)."""
    anonymous(browser, server)
    visit(browser, server.url)
    rows = browser.find_elements(_by("CSS_SELECTOR"), "#held tbody tr[data-sid]")
    shown = [r.get_attribute("data-sid") for r in rows]
    assert shown == sorted(shown, reverse=True)
    for agent in ("agent-c", "agent-d", "agent-e", "agent-g", "agent-h"):
        assert desk.sids[agent] in shown
    for agent in ("agent-a", "agent-f", "agent-b"):  # landed, landed, still waiting
        assert desk.sids[agent] not in shown
    by_sid = {r.get_attribute("data-sid"): r.text for r in rows}
    assert "STALE_GENERATION" in by_sid[desk.sids["agent-e"]]
    assert "older than the live generation 2" in by_sid[desk.sids["agent-e"]]
    assert "SYMLINK_ESCAPE" in by_sid[desk.sids["agent-g"]]
    assert "agent-d@fleet-1" in by_sid[desk.sids["agent-d"]]
    counts = browser.find_element(_by("ID"), "code-counts").text
    assert "PATH_NOT_OWNED" in counts and "STALE_GENERATION 1" in counts
    browser.save_screenshot(str(shots / "held.png"))
    visit(browser, f"{server.url}?code=SYMLINK_ESCAPE")
    rows = browser.find_elements(_by("CSS_SELECTOR"), "#held tbody tr[data-sid]")
    assert [r.get_attribute("data-sid") for r in rows] == [desk.sids["agent-g"]]
    no_alert(browser)


def test_candidate_marks_the_violating_path_and_the_deciding_line(
    desk: Desk, server: Server, browser: Any, shots: Path
) -> None:
    """Clicking a candidate shows its verdict, contract and recomputed diff, with the
    out-of-contract path marked by its code and the contract line that decided each path
    (screenshot: docs/review/candidate.png)."""
    anonymous(browser, server)
    visit(browser, server.url)
    browser.find_element(_by("LINK_TEXT"), desk.sids["agent-d"]).click()
    wait_for(browser, "#sid")  # only a candidate's page names its submission
    assert browser.current_url.endswith(f"/held/{desk.sids['agent-d']}")
    rows = {
        r.find_element(_by("CSS_SELECTOR"), ".new").text: r
        for r in browser.find_elements(_by("CSS_SELECTOR"), "#files tbody tr")
    }
    ci = rows[".github/workflows/ci.yml"]
    assert "violating" in (ci.get_attribute("class") or "")
    assert "PATH_NOT_OWNED" in ci.text and "no allow line matches" in ci.text
    assert "100644 → 100644" in ci.text
    app = rows["web/app.js"]
    assert "violating" not in (app.get_attribute("class") or "")
    assert "allow 'web/**'" in app.text
    resources = browser.find_element(_by("ID"), "resources").text
    assert "lockfile:pnpm-lock.yaml NOT_OWNED" in resources
    assert "web/**" in browser.find_element(_by("ID"), "contract").text
    assert "issue" in browser.find_element(_by("ID"), "claim-history").text
    assert "hold" in browser.find_element(_by("ID"), "review-history").text
    assert "+console.log('shop')" in browser.find_element(_by("ID"), "diff").text
    browser.save_screenshot(str(shots / "candidate.png"))
    visit(browser, f"{server.url}held/{desk.sids['agent-c']}")
    (rename,) = browser.find_elements(_by("CSS_SELECTOR"), "#files tbody tr")
    ends = [e.text for e in rename.find_elements(_by("CSS_SELECTOR"), ".end")]
    assert ends == [
        "docs/guide.md: allow 'docs/**'",
        "handbook/guide.md: no allow line matches",
    ]
    assert "RENAME_NOT_OWNED" in rename.text


def test_a_script_named_path_renders_as_text(desk: Desk, server: Server, browser: Any) -> None:
    """A path, commit message and submitter named with markup are shown as their characters:
    no alert opens, no script element exists, and the text is visible."""
    anonymous(browser, server)
    visit(browser, f"{server.url}held/{desk.sids['agent-h']}")
    no_alert(browser)
    scripts = browser.find_elements(_by("TAG_NAME"), "script")
    assert [s.get_attribute("src") for s in scripts] == [f"{server.url}static/review.js"]
    assert [s.get_attribute("innerHTML") for s in scripts] == [""]  # our one file, no inline
    assert browser.find_elements(_by("CSS_SELECTOR"), "main img, main b") == []
    files = browser.find_element(_by("ID"), "files").text
    assert f"notes/{XSS}" in files
    assert f"<b>{XSS}</b>" in browser.find_element(_by("ID"), "agent").text
    assert f"+++ b/notes/{XSS}" in browser.find_element(_by("ID"), "diff").text
    visit(browser, server.url)
    no_alert(browser)
    assert f"notes/{XSS}" in browser.find_element(_by("ID"), "held").text


def test_approve_without_the_token_is_refused(desk: Desk, server: Server, browser: Any) -> None:
    """Without logging in, pressing approve is refused and records nothing."""
    anonymous(browser, server)
    visit(browser, f"{server.url}held/{desk.sids['agent-e']}")
    submit(browser, "approve", REFUSED, reason="looks fine")
    assert "log in first" in browser.find_element(_by("ID"), "message").text
    assert desk.folder_of("agent-e") == "fenced"
    assert actions_of(desk, "agent-e") == [("hold", "FENCED", ["STALE_GENERATION"])]


def test_reject_needs_a_reason(desk: Desk, server: Server, browser: Any) -> None:
    """Logged in, a reject whose reason is only blanks is refused; the candidate stays held."""
    log_in(browser, server, f"/held/{desk.sids['agent-i']}")
    submit(browser, "reject", REFUSED, reason="   ")
    assert "a reason is required" in browser.find_element(_by("ID"), "message").text
    assert desk.folder_of("agent-i") == "fenced"
    assert [a for a, _, _ in actions_of(desk, "agent-i")] == ["hold"]


def test_reject_with_a_reason_archives_the_record(desk: Desk, server: Server, browser: Any) -> None:
    """A reject with a reason moves the candidate to archived/ and its record chain to
    refs/integrator/archived/, naming the token's actor and the reason."""
    sid = desk.sids["agent-i"]
    log_in(browser, server, f"/held/{sid}")
    submit(browser, "reject", OUTCOME, reason="the Makefile is not lint's <to touch>")
    assert browser.find_element(_by("ID"), "decision").text == "ARCHIVED"
    assert (
        "the Makefile is not lint's <to touch>"
        in browser.find_element(_by("TAG_NAME"), "main").text
    )
    assert desk.folder_of("agent-i") == "archived"
    with desk.canonical() as canonical:
        assert canonical.ref(held_ref(sid)) is None
        assert canonical.ref(archived_ref(sid)) is not None
        _, last = history(canonical, sid)[-1]
    assert (last.action, last.actor, last.reason) == (
        "reject", "rm-alice", "the Makefile is not lint's <to touch>",
    )  # fmt: skip
    visit(browser, server.url)
    assert sid not in browser.find_element(_by("ID"), "held").text


def test_approve_after_the_claim_was_revoked_is_refused_by_the_gate(
    desk: Desk, server: Server, browser: Any
) -> None:
    """Approving goes through the gate again: once the coordinator revoked the task's claim
    the approval is FENCED with CLAIM_REVOKED and the gate's reason, and nothing lands."""
    with desk.canonical() as canonical:
        queue = canonical.ref(canonical.queue_ref)
        Claims(canonical).revoke("web", reason="web work moved to another team")
    log_in(browser, server, f"/held/{desk.sids['agent-d']}")
    submit(browser, "approve", OUTCOME, reason="the workflow change is fine", actor="rm-bob")
    assert browser.find_element(_by("ID"), "decision").text == "FENCED"
    lines = browser.find_element(_by("ID"), "result-lines").text
    assert "CLAIM_REVOKED" in lines and "web work moved to another team" in lines
    assert desk.folder_of("agent-d") == "fenced"
    assert actions_of(desk, "agent-d")[-1] == ("approve", "FENCED", ["CLAIM_REVOKED"])
    with desk.canonical() as canonical:
        assert canonical.ref(canonical.queue_ref) == queue
        _, last = history(canonical, desk.sids["agent-d"])[-1]
    assert (last.actor, last.reason) == ("rm-bob", "the workflow change is fine")


def test_queue_shows_waiting_and_landed_submissions(
    desk: Desk, server: Server, browser: Any
) -> None:
    """The Queue page lists what waits in new/ and the staging commits that landed, with
    task, attempt and time in queue; without [validation] it says the target follows."""
    visit(browser, f"{server.url}queue")
    waiting = browser.find_element(_by("ID"), "waiting").text
    assert desk.sids["agent-b"] in waiting and "auth" in waiting
    landed = browser.find_elements(_by("CSS_SELECTOR"), "#landed tbody tr")
    texts = [r.text for r in landed]
    assert len(texts) == 2
    assert texts[0].startswith(tuple("0123456789abcdef")) and "search" in texts[0]
    assert "billing" in texts[1] and "billing-" in texts[1]
    for row in landed:
        in_queue = row.find_elements(_by("TAG_NAME"), "td")[-1].text
        assert in_queue.endswith("s") and in_queue != "-"
    note = browser.find_element(_by("ID"), "no-validation").text
    assert note == "no [validation]: the target follows the queue"
    assert browser.find_elements(_by("CSS_SELECTOR"), "svg.chart") == []


@pytest.fixture(scope="module")
def queue_world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Desk, str]]:
    """A queue with history (tests/web/queue_world.py): two scopes validated by a real
    `integrator serve`, landings promoted, one ejected, three waiting, one head stalled."""
    world = make_world(tmp_path_factory.mktemp("queue"), None)
    try:
        stuck = build_queue(world)
        yield Desk(world.repo, world.spool, world.sids), stuck
    finally:
        for proc in world.procs:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()


def test_queue_charts_render_per_scope_status(
    queue_world: tuple[Desk, str], browser: Any, shots: Path
) -> None:
    """With [validation], the Queue page shows per scope what waits (position, estimated
    time), what runs (how long, stalled) and the rates, and two server-drawn SVG charts the
    browser lays out with real size: every series line and every non-empty bar is drawn
    (screenshot: docs/review/queue.png)."""
    desk, stuck = queue_world
    server = start_server(desk, None)
    try:
        visit(browser, f"{server.url}queue")
        no_alert(browser)
        rows = browser.find_elements(_by("CSS_SELECTOR"), "#scopes tbody tr[data-scope]")
        assert [r.get_attribute("data-scope") for r in rows] == ["a", "b"]
        pending = browser.find_element(_by("ID"), "pending").text
        assert pending.startswith("3 landings wait for promotion")
        scope_b = browser.find_element(_by("CSS_SELECTOR"), "div.scope[data-scope='b']")
        waiting = scope_b.find_elements(_by("CSS_SELECTOR"), "table.waiting-landings tbody tr")
        assert [w.get_attribute("data-position") for w in waiting] == ["1", "2"]
        assert "b2" in waiting[0].text and "~" in waiting[0].text
        (running,) = scope_b.find_elements(_by("CSS_SELECTOR"), "table.running tbody tr")
        assert running.get_attribute("data-stalled") == "1"
        assert stuck[:12] in running.text and "STALLED" in running.text
        charts = browser.find_elements(_by("CSS_SELECTOR"), "svg.chart")
        assert [c.get_attribute("id") for c in charts] == ["flow-chart", "latency-chart"]
        for chart in charts:
            assert chart.is_displayed()
            assert chart.size["width"] > 300 and chart.size["height"] > 100
        box = "const b = arguments[0].getBBox(); return [b.width, b.height];"
        lines = browser.find_elements(_by("CSS_SELECTOR"), "#flow-chart path.series")
        counts = {p.get_attribute("data-series"): p.get_attribute("data-count") for p in lines}
        assert counts == {"landed": "6", "promoted": "2", "ejected": "1"}
        for line in lines:
            width, height = browser.execute_script(box, line)
            assert width > 0 and height > 0
        bars = browser.find_elements(_by("CSS_SELECTOR"), "#latency-chart rect.bar")
        filled = [b for b in bars if b.get_attribute("data-count") != "0"]
        assert filled and sum(int(b.get_attribute("data-count")) for b in bars) == 2
        for bar in filled:
            width, height = browser.execute_script(box, bar)
            assert width > 0 and height > 0
        scripts = browser.find_elements(_by("TAG_NAME"), "script")
        assert [s.get_attribute("src") for s in scripts] == [f"{server.url}static/review.js"]
        browser.save_screenshot(str(shots / "queue.png"))
    finally:
        stop_server(server)


def test_http_safety_and_json_twins(
    desk: Desk, server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    """Over plain HTTP: strict headers, no action from a GET, CSRF and bearer checks, a
    foreign Host refused, the raw patch as an attachment, and /api twins equal to the CLI's."""
    sid = desk.sids["agent-g"]
    status, headers, _ = fetch(server.url)
    assert status == 200
    policy = headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src 'self';" in policy
    assert "unsafe" not in policy  # no inline script, no eval: only /static/review.js runs
    assert headers["x-content-type-options"] == "nosniff"
    assert "set-cookie" not in {k.lower() for k in headers}  # a visitor gets no session
    assert fetch(f"{server.url}held/{sid}/approve")[0] == 405
    assert fetch(f"{server.url}held/{sid}/reject")[0] == 405
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    assert fetch(f"{server.url}held/{sid}", opener=opener)[0] == 200
    status, _, body = fetch(
        f"{server.url}held/{sid}/reject", data={"reason": "x", "csrf": "forged"}, opener=opener
    )
    assert status == 403 and b"log in first" in body
    status, _, _ = fetch(
        f"{server.url}held/{sid}/reject", data={"reason": "x"},
        headers={"Authorization": "Bearer not-the-token-at-all"},
    )  # fmt: skip
    assert status == 403
    status, _, _ = fetch(server.url, headers={"Host": "evil.example:80"})
    assert status == 421
    assert desk.folder_of("agent-g") == "fenced"
    status, headers, patch = fetch(f"{server.url}held/{sid}/patch")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["content-disposition"].startswith("attachment;")
    assert b"+../../etc/passwd" in patch
    capsys.readouterr()
    assert main(["review", "list", "--json", "--spool", str(desk.spool.root)]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert json.loads(fetch(f"{server.url}api/held")[2]) == listed
    assert main(["review", "show", sid, "--json", "--spool", str(desk.spool.root)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert json.loads(fetch(f"{server.url}api/held/{sid}")[2]) == shown
    assert fetch(f"{server.url}api/held/20200101T000000000000Z-00000000")[0] == 404


def test_bearer_token_acts_without_a_session(desk: Desk, server: Server) -> None:
    """A script with `Authorization: Bearer TOKEN` can reject (no cookie, so no CSRF token)."""
    sid = desk.sids["agent-g"]
    status, _, body = fetch(
        f"{server.url}held/{sid}/reject", data={"reason": "links out of the repository"},
        headers={"Authorization": f"Bearer {TOKEN}"},
    )  # fmt: skip
    assert status == 200, body
    assert desk.folder_of("agent-g") == "archived"


def test_without_a_token_the_pages_only_read(desk: Desk, tmp_path: Path) -> None:
    """Started without --token-file the server says it is read-only and refuses every
    action; a non-loopback address is refused outright."""
    refused = subprocess.run(
        [sys.executable, "-m", "integrator", "review", "web", "--spool", str(desk.spool.root),
         "--http", "0.0.0.0:0"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert refused.returncode == 2 and "not a loopback address" in refused.stderr
    readonly = start_server(desk, None)
    try:
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        sid = desk.sids["agent-e"]
        _, _, page = fetch(f"{readonly.url}held/{sid}", opener=opener)
        assert b"read-only" in page
        csrf = page.split(b'name="csrf" value="', 1)[1].split(b'"', 1)[0].decode()
        status, _, body = fetch(
            f"{readonly.url}held/{sid}/reject", data={"reason": "no", "csrf": csrf},
            opener=opener,
        )  # fmt: skip
        assert status == 403 and b"read-only" in body
        assert desk.folder_of("agent-e") == "fenced"
    finally:
        stop_server(readonly)
