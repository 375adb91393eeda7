"""The review page's session against another service on the same host (issue #21, hole 6).

A cookie ignores ports: the release manager's browser sends the review page's session
cookie to every service on 127.0.0.1, an agent's dev server among them. Here that service
is a small HTTP server on another port that keeps every header it receives; Chromium logs
in on the review pages, visits it, and the test replays what it kept from a plain HTTP
client. The pages' own server is the real `integrator review web` process on 127.0.0.1,
stopped by its PID; the desk is test_web_browser's, plus a candidate fenced because its
lease ran out (approving it after a renewal lands it).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from integrator.daemon.loop import Daemon
from integrator.daemon.settings import Settings
from integrator.landing.engine import Integrator
from integrator.records.canonical import Canonical
from integrator.records.claims import Claims, IssueRequest
from integrator.store.mirror import for_spool
from integrator.store.spool import Spool
from integrator.web.security import COOKIE
from tests.gitutil import GIT_ENV, commit_files
from tests.web.test_web_browser import (
    LOGGED_IN,
    OUTCOME,
    REFUSED,
    TOKEN,
    Desk,
    Server,
    _by,
    _submit,
    actions_of,
    build_desk,
    fetch,
    log_in,
    start_server,
    stop_server,
    submit,
    visit,
    wait_for,
)

ACTION_HEADER = "X-Integrator-Action"  # spelled out: what the pages' script sends

# -- the desk, the pages' server and the other service ---------------------------------------


def drain(desk: Desk) -> None:
    with Canonical(desk.repo) as canonical:
        Daemon(
            spool=desk.spool,
            canonical=canonical,
            engine=Integrator(canonical),
            mirror=for_spool(desk.spool.root),
            settings=Settings(watch=False),
        ).run(once=True)


def add_lapsed(desk: Desk) -> None:
    """agent-p's candidate, submitted after its one-second lease ran out: FENCED
    LEASE_EXPIRED, and landable once the coordinator renews the lease."""
    with Canonical(desk.repo) as canonical:
        contract = Claims(canonical).issue(
            IssueRequest("pay", ("pay/**",), holder="agent-p", lease=timedelta(seconds=1))
        )
    oid = commit_files(desk.repo, {"pay/rate.py": "RATE = 3\n"}, "pay: rate",
                       parent="refs/heads/main", ref=None)  # fmt: skip
    time.sleep(1.5)
    desk.sids["agent-p"] = _submit(desk.spool, contract, oid, "agent-p", desk.repo)
    drain(desk)


@pytest.fixture(scope="module")
def desk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Desk]:
    with pytest.MonkeyPatch.context() as env:
        for key, value in GIT_ENV.items():
            env.setenv(key, value)
        built = build_desk(tmp_path_factory.mktemp("session"))
        add_lapsed(built)
        yield built


@pytest.fixture(scope="module")
def token_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("token") / "token"
    path.write_text(TOKEN + "\n")
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def server(desk: Desk, token_file: Path) -> Iterator[Server]:
    started = start_server(desk, token_file)
    try:
        yield started
    finally:
        stop_server(started)


@dataclass
class Neighbour:
    """Another service on 127.0.0.1 (an agent's dev server): it serves the pages it is
    given and keeps the headers of every request it gets."""

    server: ThreadingHTTPServer
    pages: dict[str, str] = field(default_factory=dict)
    seen: list[tuple[str, dict[str, str]]] = field(default_factory=list)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def cookie(self) -> str | None:
        """The review session's cookie, as the last request that carried one sent it."""
        for _, headers in reversed(self.seen):
            found = re.search(rf"{COOKIE}=([^;\s]+)", headers.get("cookie", ""))
            if found:
                return found.group(1)
        return None


@pytest.fixture(scope="module")
def neighbour() -> Iterator[Neighbour]:
    box: list[Neighbour] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            me = box[0]
            me.seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
            body = me.pages.get(self.path, "<title>dev server</title><p>hello</p>").encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    box.append(Neighbour(http))
    thread = threading.Thread(target=http.serve_forever, kwargs={"poll_interval": 0.1})
    thread.start()
    try:
        yield box[0]
    finally:
        http.shutdown()
        http.server_close()
        thread.join(10)


# -- helpers ---------------------------------------------------------------------------------


def origin_of(server: Server) -> str:
    return server.url.rstrip("/")


def header(headers: dict[str, str], name: str) -> str | None:
    return next((v for k, v in headers.items() if k.lower() == name), None)


def form_of(page: bytes) -> dict[str, str]:
    """The hidden fields of a candidate page's approve form: what anyone reading it gets."""
    text = page.decode()
    fields = {
        name: re.search(rf'name="{name}" value="([^"]*)"', text)
        for name in ("csrf", "claim-generation", "claim-digest")
    }
    return {name: found.group(1) for name, found in fields.items() if found}


def http_login(server: Server) -> tuple[str, str]:
    """Log in over plain HTTP as the pages' login form does: (session cookie, action key)."""
    _, _, page = fetch(f"{server.url}login")
    csrf = re.search(rb'name="csrf" value="([^"]+)"', page)
    assert csrf is not None
    status, headers, body = fetch(
        f"{server.url}login", data={"csrf": csrf.group(1).decode(), "token": TOKEN, "next": "/"},
        headers={"Origin": origin_of(server)},
    )  # fmt: skip
    assert status == 200, body
    cookie = re.search(rf"{COOKIE}=([^;]+)", header(headers, "set-cookie") or "")
    key = re.search(rb'data-key="([^"]+)"', body)
    assert cookie is not None and key is not None
    return cookie.group(1), key.group(1).decode()


def stopped_sessions(log: Path) -> int:
    """The sessions the server held when it stopped (its last `web.stopped` event)."""
    events = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    (stopped,) = [e for e in events if e.get("event") == "web.stopped"]
    return int(stopped["sessions"])


# -- the tests -------------------------------------------------------------------------------


def test_a_service_on_another_port_gets_the_cookie_but_cannot_act(
    desk: Desk, server: Server, neighbour: Neighbour, browser: Any
) -> None:
    """Chromium sends the logged-in session cookie to a service on another port of
    127.0.0.1; replaying it, that service reads every page and its CSRF token, but no
    approve or reject goes through — without an Origin, with a forged one, with its own,
    with a guessed action key — and its own page's form post is refused as well. The same
    request with the tab's action key acts."""
    sid = desk.sids["agent-e"]
    log_in(browser, server, f"/held/{sid}")
    login = browser.get_cookie(COOKIE)["value"]
    browser.get(neighbour.url("/"))
    wait_for(browser, "p")
    assert neighbour.cookie() == login  # cookies ignore ports
    stolen = {"Cookie": f"{COOKIE}={login}"}
    status, _, page = fetch(f"{server.url}held/{sid}", headers=stolen)
    assert status == 200 and b"acting as rm-alice" in page  # reading needs nothing
    assert re.search(rb'data-key="|integrator-action"', page) is None
    form = {**form_of(page), "reason": "replayed from another port"}
    assert form["csrf"]  # and the claim the page shows, when it names one
    own, theirs = origin_of(server), neighbour.url("")
    attempts = {
        "a plain client (no Origin)": {},
        "the pages' Origin, forged": {"Origin": own},
        "its own Origin": {"Origin": theirs},
        "a guessed action key": {"Origin": own, ACTION_HEADER: "k" * 43},
        "the browser says same-site": {"Origin": own, "Sec-Fetch-Site": "same-site"},
    }
    for action in ("reject", "approve"):
        for label, extra in attempts.items():
            status, headers, body = fetch(
                f"{server.url}held/{sid}/{action}", data=form, headers={**stolen, **extra}
            )
            assert status == 403, (action, label, body)
            assert header(headers, "set-cookie") is None
    assert desk.folder_of("agent-e") == "fenced"
    assert actions_of(desk, "agent-e") == [("hold", "FENCED", ["STALE_GENERATION"])]
    assert form["claim-generation"] == "2"

    neighbour.pages["/attack"] = (
        f'<title>dev server</title><form method="post" action="{server.url}held/{sid}/reject">'
        + "".join(f'<input type="hidden" name="{k}" value="{v}">' for k, v in form.items())
        + "</form><script>document.forms[0].submit()</script>"
    )
    browser.get(neighbour.url("/attack"))
    wait_for(browser, REFUSED)
    assert "same-site request" in browser.find_element(_by("ID"), "message").text
    assert desk.folder_of("agent-e") == "fenced"

    # What the service lacks is the key a login hands to the tab that logged in.
    cookie, key = http_login(server)
    mine = {"Cookie": f"{COOKIE}={cookie}", "Origin": own}
    _, _, page = fetch(f"{server.url}held/{desk.sids['agent-g']}", headers=mine)
    status, _, body = fetch(
        f"{server.url}held/{desk.sids['agent-g']}/reject",
        data={**form_of(page), "reason": "links out of the repository"},
        headers={**mine, ACTION_HEADER: key},
    )
    assert status == 200, body
    assert desk.folder_of("agent-g") == "archived"


def test_the_release_managers_own_tab_still_approves(
    desk: Desk, server: Server, browser: Any
) -> None:
    """In the tab that logged in, approve sends the action key with the form: once the
    coordinator renewed agent-p's lapsed lease, the approval lands it."""
    with desk.canonical() as canonical:
        Claims(canonical).renew("pay", datetime.now(UTC) + timedelta(hours=1))
        queue = canonical.ref(canonical.queue_ref)
    sid = desk.sids["agent-p"]
    assert actions_of(desk, "agent-p") == [("hold", "FENCED", ["LEASE_EXPIRED"])]
    log_in(browser, server, f"/held/{sid}")
    submit(browser, "approve", OUTCOME, reason="lease renewed")
    assert browser.find_element(_by("ID"), "decision").text == "ACCEPTED"
    assert desk.folder_of("agent-p") == "accepted"
    with desk.canonical() as canonical:
        assert canonical.ref(canonical.queue_ref) != queue
    assert actions_of(desk, "agent-p")[-1] == ("approve", "ACCEPTED", [])


def test_a_tab_without_the_key_says_it_cannot_act(desk: Desk, server: Server, browser: Any) -> None:
    """A second tab shares the cookie but not the first tab's key: it says it cannot act,
    and pressing approve there is refused, naming the missing key."""
    sid = desk.sids["agent-c"]
    log_in(browser, server, f"/held/{sid}")
    first = browser.current_window_handle
    browser.switch_to.new_window("tab")
    try:
        visit(browser, f"{server.url}held/{sid}")
        assert browser.find_element(_by("ID"), "mode").text == "logged in; this tab cannot act"
        assert browser.find_element(_by("ID"), "tab-note").is_displayed()
        submit(browser, "approve", REFUSED, reason="from a tab without the key")
        assert "this tab holds no action key" in browser.find_element(_by("ID"), "message").text
    finally:
        browser.close()
        browser.switch_to.window(first)
    assert actions_of(desk, "agent-c") == [("hold", "FENCED", ["RENAME_NOT_OWNED"])]


def test_a_moved_claim_answers_409_with_what_changed(
    desk: Desk, server: Server, browser: Any
) -> None:
    """A page shown before the coordinator reclaimed the task carries the old generation
    and digest: its approve is refused with both claims side by side and nothing is done;
    a script's request naming the old claim gets 409, one naming the live claim acts."""
    sid = desk.sids["agent-h"]
    log_in(browser, server, f"/held/{sid}")
    with desk.canonical() as canonical:
        Claims(canonical).reclaim("notes", force=True, holder="agent-h2")
    submit(browser, "approve", REFUSED, reason="shown before the reclaim")
    assert browser.title.startswith("Refused")
    message = browser.find_element(_by("ID"), "message").text
    assert "moved since the page was shown" in message and "nothing was done" in message
    rows = {
        r.get_attribute("data-side"): [c.text for c in r.find_elements(_by("TAG_NAME"), "td")]
        for r in browser.find_elements(_by("CSS_SELECTOR"), "#moved tbody tr")
    }
    assert rows["shown"][1] == "1" and rows["live"][1] == "2"
    assert rows["shown"][3] != rows["live"][3]
    assert actions_of(desk, "agent-h") == [("hold", "FENCED", ["PATH_NOT_OWNED"])]
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    old = {"claim-generation": "1", "claim-digest": rows["shown"][3], "reason": "old page"}
    for action in ("approve", "reject"):
        status, _, body = fetch(f"{server.url}held/{sid}/{action}", data=old, headers=bearer)
        assert status == 409 and b"generation 1" in body and b"generation 2" in body, body
    assert desk.folder_of("agent-h") == "fenced" and len(actions_of(desk, "agent-h")) == 1
    _, _, page = fetch(f"{server.url}held/{sid}")
    live = {**form_of(page), "reason": "reviewed under the new claim"}
    assert live["claim-generation"] == "2"
    status, _, body = fetch(f"{server.url}held/{sid}/reject", data=live, headers=bearer)
    assert status == 200, body
    assert desk.folder_of("agent-h") == "archived"


def test_a_cross_site_link_does_not_replace_the_login_cookie(
    desk: Desk, server: Server, neighbour: Neighbour, browser: Any
) -> None:
    """A link from another site opens the pages without the SameSite=Strict cookie; the
    answer sets no cookie, so the login survives it; cross-site posts to log in or out
    are refused and set none either."""
    log_in(browser, server, "/queue")
    login = browser.get_cookie(COOKIE)["value"]
    neighbour.pages["/link"] = f'<title>elsewhere</title><a id="go" href="{server.url}">go</a>'
    browser.get(neighbour.url("/link", host="localhost"))  # localhost is another site
    browser.find_element(_by("ID"), "go").click()
    wait_for(browser, "#held")
    assert browser.find_element(_by("ID"), "mode").text == "viewing"  # no cookie was sent
    assert browser.get_cookie(COOKIE)["value"] == login
    visit(browser, f"{server.url}queue")
    wait_for(browser, LOGGED_IN)
    assert browser.find_element(_by("ID"), "mode").text == "acting as rm-alice"

    cookie, _ = http_login(server)
    held = {"Cookie": f"{COOKIE}={cookie}"}
    cross = {"Sec-Fetch-Site": "cross-site", "Origin": "http://evil.example"}
    status, headers, _ = fetch(server.url, headers={"Sec-Fetch-Site": "cross-site"})
    assert status == 200 and header(headers, "set-cookie") is None
    for path, data in (("login", {"token": TOKEN, "csrf": "x"}), ("logout", {"csrf": "x"})):
        status, headers, _ = fetch(f"{server.url}{path}", data=data, headers={**held, **cross})
        assert status == 403 and header(headers, "set-cookie") is None
    _, _, page = fetch(f"{server.url}queue", headers=held)
    assert b"acting as rm-alice" in page  # still logged in


def test_cookieless_requests_keep_no_state(desk: Desk, token_file: Path) -> None:
    """Hundreds of requests without a session's cookie — every page, failed logins,
    refused actions — set no cookie and leave no session: the server stops holding only
    the one login made."""
    own = start_server(desk, token_file)
    try:
        sid = desk.sids["agent-d"]
        paths = ["", "queue", f"held/{sid}", "login", "api/held", "static/review.css",
                 f"held/{sid}/patch", "held/nothing"]  # fmt: skip
        answers = []
        for round_ in range(25):
            for path in paths:
                answers.append(fetch(f"{own.url}{path}?r={round_}"))
            answers.append(fetch(f"{own.url}held/{sid}/approve", data={"reason": "x"}))
            answers.append(fetch(f"{own.url}login", data={"token": TOKEN, "csrf": "forged"}))
            answers.append(fetch(f"{own.url}logout", data={"csrf": "x"}))
        assert len(answers) == 275
        assert [h for _, h, _ in answers if header(h, "set-cookie")] == []
        assert {s for s, _, _ in answers} == {200, 403, 404}
        http_login(own)
    finally:
        stop_server(own)
    assert stopped_sessions(own.log) == 1


def _start(desk: Desk, token_file: Path, bind: str, *extra: str) -> tuple[Server, int]:
    args = [sys.executable, "-m", "integrator", "review", "web", "--spool", str(desk.spool.root),
            "--repo", str(desk.repo), "--http", bind, "--token-file", str(token_file), *extra]  # fmt: skip
    log = desk.repo.parent / f"server-bound-{time.monotonic_ns()}.log"
    with open(log, "w") as errors:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=errors, text=True,
                                env={**os.environ, **GIT_ENV})  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    found = re.match(r"review pages on http://[^ ]+:(\d+)/ ", line)
    if found is None:
        proc.kill()
        proc.communicate()
        raise AssertionError(f"server did not start: {line!r} {log.read_text()}")
    port = int(found.group(1))
    return Server(f"http://127.0.0.1:{port}/", proc, log), port


def test_a_host_not_allowed_is_refused(desk: Desk, server: Server, token_file: Path) -> None:
    """On loopback only the bound address and port (or localhost on that port) are served;
    off loopback only the --allow-host names, and without one the server does not start."""
    port = int(server.url.rstrip("/").rpartition(":")[2])
    assert fetch(server.url, headers={"Host": f"localhost:{port}"})[0] == 200
    for host in (f"127.0.0.1:{port + 1}", "127.0.0.1", f"evil.example:{port}", ""):
        assert fetch(server.url, headers={"Host": host})[0] == 421, host
    refused = subprocess.run(
        [sys.executable, "-m", "integrator", "review", "web", "--spool", str(desk.spool.root),
         "--http", "0.0.0.0:0", "--token-file", str(token_file)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert refused.returncode == 2 and "--allow-host" in refused.stderr
    wide, port = _start(desk, token_file, "0.0.0.0:0", "--allow-host", "review.test")
    try:
        for host, status in ((f"review.test:{port}", 200), ("Review.Test", 200),
                             (f"127.0.0.1:{port}", 421), (f"evil.example:{port}", 421)):  # fmt: skip
            assert fetch(wide.url, headers={"Host": host})[0] == status, host
    finally:
        stop_server(wide)


def test_a_held_list_of_3000_is_served_a_page_at_a_time(
    desk: Desk, token_file: Path, tmp_path: Path
) -> None:
    """3,000 held candidates: the Held page shows 100 of them with their counts and a next
    link that works, page after page; the figures are printed."""
    big = Spool(tmp_path / "big").ensure()
    source = desk.spool.folder("fenced") / desk.sids["agent-e"]
    made = time.perf_counter()
    sids = [f"20260601T{n // 10000:06d}{n % 10000:06d}Z-{n:08x}" for n in range(3000)]
    for sid in sids:
        shutil.copytree(source, big.folder("fenced") / sid)
    made = time.perf_counter() - made
    crowded = Desk(desk.repo, big, {})
    own = start_server(crowded, token_file)
    try:
        seen: list[str] = []
        url, pages, figures = f"{own.url}", 0, []
        while url:
            started = time.perf_counter()
            status, _, body = fetch(url)
            figures.append((time.perf_counter() - started, len(body)))
            assert status == 200
            rows = re.findall(rb'<tr data-sid="([^"]+)"', body)
            assert len(rows) == 100
            seen += [r.decode() for r in rows]
            pages += 1
            assert f"{len(seen) - 99}–{len(seen)} of 3000".encode() in body
            found = re.search(rb'<a href="/(\?page=\d+)" rel="next"', body)
            url = f"{own.url}{found.group(1).decode()}" if found else ""
        assert pages == 30 and seen == sorted(sids, reverse=True)
        assert b'id="total">3000<' in body and b"STALE_GENERATION</span> 3000" in body
    finally:
        stop_server(own)
    first, size = figures[0]
    slowest = max(t for t, _ in figures)
    print(
        f"\nheld list of 3,000 (made in {made:.1f}s): 30 pages of 100 rows; page 1 "
        f"{first * 1000:.0f} ms, {size:,} bytes; slowest page {slowest * 1000:.0f} ms"
    )
