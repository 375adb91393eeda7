"""The review pages' view models and security helpers, without a browser or a server."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from integrator.documents.submission import Submission
from integrator.documents.verdict import Code, Decision, Verdict, Violation
from integrator.errors import ConfigurationError, UsageError
from integrator.limits import PAGE_FILES
from integrator.records.held import ReviewAction
from integrator.review.actions import Held
from integrator.review.changes import FileDiff
from integrator.review.seen import ClaimMark
from integrator.tokens import bearer, is_loopback, read_token, token_matches
from integrator.web import candidate, views
from integrator.web.forms import Refused, claim_of, local_target
from integrator.web.security import (
    TAB_KEYS,
    LoginForms,
    Sessions,
    allowed_hosts,
    csrf_matches,
    origin_is,
    safe_actor,
)
from integrator.web.server import listen
from tests.factories import contract_doc

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def make_held(
    sid: str = "20260601T115900000000Z-00000001",
    *,
    violations: list[Violation] | None = None,
    decision: Decision = Decision.FENCED,
    user: str = "agent-a",
    **contract: Any,
) -> Held:
    """A held candidate with every field defaulted (task `task-1`, allowed `src/**`)."""
    doc = contract_doc(**contract)
    submission = Submission.model_validate(
        {
            "schema": "integrator.submission.v1",
            "contract": doc,
            "candidate": "c" * 40,
            "submitter": {"user": user, "host": "ws"},
            "submittedAt": NOW,
        }
    )
    verdict = Verdict(
        decision=decision,
        violations=violations or [],
        task_id=doc["taskId"],
        attempt_id=doc["attemptId"],
        generation=doc["ownershipGeneration"],
        base="b" * 40,
    )
    return Held(sid, "fenced", verdict, submission, submission.to_json().encode())


def violation(code: Code, path: str | None = "x", detail: str = "why") -> Violation:
    return Violation(code=code, path=path, detail=detail)


def test_held_page_lists_newest_first_and_counts_every_code() -> None:
    """Rows are newest first; counts cover every held candidate whatever the filter."""
    old = make_held("20260601T110000000000Z-00000001", violations=[violation(Code.PATH_NOT_OWNED)])
    new = make_held(
        "20260601T115930000000Z-00000002",
        violations=[violation(Code.PATH_NOT_OWNED), violation(Code.SYMLINK_ESCAPE, "l")],
        taskId="web",
    )
    page = views.held_page([old, new], views.Filters(), NOW)
    assert [r.sid for r in page.rows] == [new.sid, old.sid]
    assert page.counts == (("PATH_NOT_OWNED", 2), ("SYMLINK_ESCAPE", 1))
    assert page.decisions == (("FENCED", 2),)
    assert page.tasks == ("task-1", "web")
    first = page.rows[0]
    assert (first.task, first.agent, first.generation, first.age) == (
        "web",
        "agent-a@ws",
        "1",
        "30s",
    )
    assert first.codes == ("PATH_NOT_OWNED", "SYMLINK_ESCAPE")
    filtered = views.held_page([old, new], views.Filters(code="SYMLINK_ESCAPE"), NOW)
    assert [r.sid for r in filtered.rows] == [new.sid] and filtered.total == 2


def test_filters_drop_unknown_values_and_build_links() -> None:
    """A code or decision that is not a known one filters nothing; links keep the others."""
    parsed = views.Filters.parse({"code": "NOT_A_CODE", "decision": "review", "task": "web"})
    assert parsed == views.Filters(None, "web", "REVIEW")
    assert parsed.link(code="PATH_DENIED") == "?code=PATH_DENIED&task=web&decision=REVIEW"
    assert parsed.link(task=None) == "?decision=REVIEW"
    rows = views.held_page(
        [make_held(decision=Decision.FENCED), make_held("20260601T115901000000Z-00000002",
                                                      decision=Decision.REVIEW, taskId="web")],
        views.Filters.parse({"decision": "REVIEW"}),
        NOW,
    ).rows  # fmt: skip
    assert [r.decision for r in rows] == ["REVIEW"]


def test_reason_line_is_one_short_safe_line() -> None:
    """The list's reason is the first enforced violation, control characters spelled out,
    cut to its limit; a violation without a subject shows its detail alone."""
    observed = Violation(code=Code.PATH_DENIED, path="a", detail="observed", mode="observe")
    escaped = violation(Code.PATH_NOT_OWNED, "evil\x1b[2Jpath", "x" * 500)
    line = views.reason_line(Verdict(decision=Decision.FENCED, violations=[observed, escaped]))
    assert line.startswith("evil\\x1b[2Jpath: xxx") and len(line) == views.REASON_LIMIT
    stale = violation(Code.STALE_GENERATION, None, "generation 1 is older than 2")
    assert views.reason_line(Verdict(decision=Decision.FENCED, violations=[stale])) == (
        "generation 1 is older than 2"
    )
    assert views.reason_line(Verdict(decision=Decision.REVIEW)) == "-"


def test_text_spells_out_controls_and_bidi_but_keeps_tabs() -> None:
    """Terminal escapes and bidirectional overrides are spelled out; markup is left for
    the template's autoescape; tabs stay."""
    assert views.text("a\tb\x07c\u202ed<i>") == "a\tb\\x07c\\u202ed<i>"


def test_duration_and_age() -> None:
    """Ages read in two units at most, from the spool id's time."""
    assert views.duration(timedelta(seconds=5)) == "5s"
    assert views.duration(timedelta(minutes=3, seconds=12)) == "3m 12s"
    assert views.duration(timedelta(hours=2, minutes=5, seconds=9)) == "2h 5m"
    assert views.duration(timedelta(days=4, hours=1)) == "4d 1h"
    assert views.duration(timedelta(seconds=-3)) == "0s"
    assert views.age("20260601T115800000000Z-00000000", NOW) == "2m 0s"
    assert views.age("not-an-id", NOW) == "-"


def test_file_rows_name_the_deciding_contract_line_for_both_rename_ends() -> None:
    """Each changed path shows its modes, its violations and the allow or deny line that
    decided it; a rename shows both ends."""
    held = make_held(
        violations=[violation(Code.RENAME_NOT_OWNED, "lib/a.py", "the new end is not owned")],
        paths=["src/**"], deny=["src/secret/**"],
    )  # fmt: skip
    contract, problem = candidate.contract_of(held)
    assert contract is not None and problem is None
    files = [
        FileDiff("lib/a.py", "src/a.py", "R", "", held.verdict.violations, 0o100644, 0o100755),
        FileDiff("src/secret/k", None, "A", "", [], 0, 0o100644),
        FileDiff("src/ok.py", None, "M", "", [], 0o100644, 0o100644),
    ]
    rename, denied, ok = candidate.file_rows(files, contract.matcher())
    assert (rename.old_path, rename.path, rename.old_mode, rename.new_mode) == (
        "src/a.py", "lib/a.py", "100644", "100755",
    )  # fmt: skip
    assert [(e.path, e.allowed, e.line) for e in rename.ends] == [
        ("src/a.py", True, "allow 'src/**'"),
        ("lib/a.py", False, "no allow line matches"),
    ]
    assert rename.violating and rename.violations == (
        ("RENAME_NOT_OWNED", "the new end is not owned"),
    )
    assert denied.ends[0].line == "deny 'src/secret/**'" and denied.old_mode == "-"
    assert not ok.violating and ok.status_name == "modified"


def test_contract_that_does_not_parse_is_shown_as_sent() -> None:
    """A CONTRACT_INVALID candidate's contract is shown as the document it was sent, with
    why it does not parse, and no path is said to be allowed by it."""
    held = make_held(paths=[], extra="field")
    view = candidate.contract_view(held)
    assert not view.parsed and view.problem is not None and "contract is invalid" in view.problem
    assert '"extra": "field"' in view.document
    assert candidate.file_rows([FileDiff("a", None, "A", "", [])], None)[0].ends == ()


def test_diff_view_classifies_lines_and_stops_at_the_limit() -> None:
    """The unified diff is shown line by line with its kind, and cut at the character limit."""
    patch = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n same\n"
    view = candidate.diff_view([FileDiff("x", None, "M", patch, [])], 10)
    assert [line.kind for line in view.lines] == [
        "file",
        "meta",
        "meta",
        "hunk",
        "del",
        "add",
        "ctx",
    ]
    assert not view.truncated
    cut = candidate.diff_view([FileDiff("x", None, "M", patch, [])], 10, limit=40)
    assert cut.truncated and [line.text for line in cut.lines] == [
        "diff --git a/x b/x",
        "--- a/x",
        "+++ b/x",
    ]
    omitted = candidate.diff_view([], 10**9, "too large")
    assert omitted.omitted == "too large" and omitted.lines == ()


def test_candidate_view_gathers_histories_and_resources() -> None:
    """The Candidate page shows the live claim (newest commit of its chain), the claim and
    review histories, and marks a violation whose path is not in the diff."""
    held = make_held(violations=[violation(Code.PATH_NOT_OWNED, "gone.txt")])
    chain = [
        ("a" * 40, {"event": "revoke", "generation": 2, "attemptId": "t-2", "state": "revoked",
                    "leaseExpiresAt": "2026-06-01T13:00:00+00:00", "reason": "moved"}, "revoke: t"),
        ("b" * 40, {"event": "issue", "generation": 1, "attemptId": "t-1", "state": "live",
                    "leaseExpiresAt": "2026-06-01T13:00:00+00:00"}, "issue: task-1 generation 1\n"),
    ]  # fmt: skip
    action = ReviewAction(
        submission=held.sid, action="hold", actor="integrator", at=NOW,
        decision=Decision.FENCED, codes=["PATH_NOT_OWNED"],
    )  # fmt: skip
    view = candidate.candidate_view(
        held, "b" * 40, [], claim_chain=chain, review_chain=[("d" * 40, action)]
    )
    assert view.live_claim.startswith("generation 2 attempt t-2: revoked")
    assert [(e.event, e.summary) for e in view.claim_history] == [
        ("revoke", "moved"), ("issue", "issue: task-1 generation 1"),
    ]  # fmt: skip
    assert [(e.action, e.outcome) for e in view.review_history] == [
        ("hold", "FENCED PATH_NOT_OWNED")
    ]
    assert [v.in_diff for v in view.violations] == [False]
    assert view.contract.paths == ("src/**",) and view.diff_base == "b" * 40


def test_queue_rows_read_trailers_and_time_in_queue() -> None:
    """A landed staging commit shows its task, attempt and generation trailers and how long
    its submission waited; an unreadable waiting entry says why."""
    message = (
        "billing: round\n\nLanded by integrator.\n\nIntegrator-Candidate: " + "c" * 40 + "\n"
        "Integrator-Task: billing\nIntegrator-Attempt: billing-1\nIntegrator-Generation: 3\n"
    )
    row = views.landed_row("e" * 40, message, NOW, "20260601T115815000000Z-00000001")
    assert (row.task, row.attempt, row.generation, row.in_queue) == (
        "billing",
        "billing-1",
        "3",
        "1m 45s",
    )
    assert (row.summary, row.candidate) == ("billing: round", "c" * 12)
    assert views.landed_row("e" * 40, message, NOW, None).in_queue == "-"
    bad = views.waiting_row("new", "x\x1b", None, "not a submission folder", NOW)
    assert (bad.sid, bad.problem) == ("x\\x1b", "not a submission folder")
    ok = views.waiting_row("work", make_held().sid, make_held().submission, None, NOW)
    assert (ok.task, ok.agent, ok.age) == ("task-1", "agent-a@ws", "1m 0s")


def test_sessions_rotate_on_login_and_stay_bounded() -> None:
    """Only a login makes a session; logging in replaces the session id and adds this tab's
    action key (the other tabs of the same origin keep theirs); the store drops its oldest
    past its limit and forgets sessions past their age."""
    clock = [0.0]
    sessions = Sessions(limit=2, ttl=10, clock=lambda: clock[0])
    assert len(sessions) == 0 and sessions.get("planted") is None and len(sessions) == 0
    first, key = sessions.login(None, "http://127.0.0.1:8787")
    assert first.has_key(key) and not first.has_key("other") and not first.has_key(None)
    second, key2 = sessions.login(first, "http://127.0.0.1:8787")
    assert second.sid != first.sid and sessions.get(first.sid) is None
    assert second.has_key(key) and second.has_key(key2) and second.csrf != first.csrf
    assert csrf_matches(second, second.csrf) and not csrf_matches(second, first.csrf)
    assert not csrf_matches(None, second.csrf) and not csrf_matches(second, None)
    other, key3 = sessions.login(second, "http://127.0.0.1:9999")  # another origin: no keys
    assert other.keys == [key3]
    many = first
    for _ in range(TAB_KEYS + 3):
        many, _ = sessions.login(many, "http://x")
    assert len(many.keys) == TAB_KEYS
    third, _ = sessions.login(None, "http://x")
    assert sessions.get(other.sid) is None  # the oldest goes past the limit
    assert sessions.get(many.sid) is many and sessions.get(third.sid) is third
    assert len(sessions) == 2
    clock[0] = 11
    assert sessions.get(third.sid) is None


def test_login_forms_are_signed_times_not_stored_tokens() -> None:
    """The login form's CSRF token is the time it was served, signed by this process: it
    holds nothing server-side, is refused when forged, altered, from another process, or
    older than its age."""
    now = [1_000_000.0]
    forms = LoginForms(ttl=60, clock=lambda: now[0])
    token = forms.issue()
    assert forms.valid(token)
    moment, _, signature = token.partition(".")
    assert not forms.valid(f"{int(moment) + 1}.{signature}")
    assert not forms.valid(LoginForms(clock=lambda: now[0]).issue())
    assert not forms.valid(None) and not forms.valid("") and not forms.valid("x.y")
    now[0] += 61
    assert not forms.valid(token)


def test_token_rules(tmp_path: Path) -> None:
    """The token file must be a private regular file holding one long token; comparison
    is exact."""
    path = tmp_path / "token"
    path.write_text("  " + "k" * 20 + "\n")
    path.chmod(0o600)
    assert read_token(path) == "k" * 20
    for mode in (0o640, 0o620, 0o610):  # any right of the group is one too many
        path.chmod(mode)
        with pytest.raises(ConfigurationError, match="readable by its group"):
            read_token(path)
    for mode in (0o644, 0o604, 0o602, 0o601):  # any right of others is one too many
        path.chmod(mode)
        with pytest.raises(ConfigurationError, match="readable by every user"):
            read_token(path)
    with pytest.raises(ConfigurationError, match="not a regular file"):
        read_token(tmp_path)  # a folder (or a pipe, a device) holds no token
    path.chmod(0o600)
    path.write_text("short\n")
    with pytest.raises(ConfigurationError, match="16 to 4096"):
        read_token(path)
    assert token_matches("k" * 20, "k" * 20)
    assert not token_matches("k" * 20, "k" * 19) and not token_matches(None, "anything")
    assert (
        bearer("Bearer abc") == "abc" and bearer("Basic abc") is None and bearer("Bearer ") is None
    )


def test_binding_actors_hosts_and_redirects() -> None:
    """Only loopback binds without a token; actor names, Host headers and login redirects
    are held to what they may be."""
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.org")
    with pytest.raises(UsageError, match="not a loopback address"):
        listen("0.0.0.0:0", token=False)
    sock = listen("127.0.0.1:0", token=False)
    sock.close()
    assert safe_actor("rm-alice@host.example") and not safe_actor("<b>") and not safe_actor("-x")
    assert local_target("/queue") == "/queue"
    assert local_target("https://evil.example/") == "/"
    assert local_target("/held/../../x") == "/"
    assert local_target("/held/20260601T115900000000Z-00000001").startswith("/held/")


def test_hosts_served_are_the_bound_port_and_the_allowed_names() -> None:
    """On loopback only the bound address and `localhost`, on the bound port; each
    `--allow-host` bare and on the bound port, or on its own port; off loopback nothing
    unless named."""
    assert allowed_hosts("127.0.0.1", 8787) == {"127.0.0.1:8787", "localhost:8787"}
    assert allowed_hosts("::1", 80) == {"[::1]:80", "localhost:80"}
    assert allowed_hosts("localhost", 5) == {"localhost:5", "127.0.0.1:5"}
    assert allowed_hosts("0.0.0.0", 8787, ["Review.Example.org", "10.0.0.5:443"]) == {
        "review.example.org", "review.example.org:8787", "10.0.0.5:443",
    }  # fmt: skip
    with pytest.raises(UsageError, match="--allow-host"):
        allowed_hosts("0.0.0.0", 8787)
    for bad in ("a b", "evil.example/x", "x:99999999", "x:65536", ""):
        with pytest.raises(UsageError, match="is not HOST"):
            allowed_hosts("127.0.0.1", 1, [bad])


def test_an_origin_is_scheme_host_and_port() -> None:
    """`Origin` matches only the Host it was sent to, port included: another port of
    127.0.0.1 is another origin, and so are `null`, a path, or another scheme."""
    assert origin_is("http://127.0.0.1:8787", "127.0.0.1:8787")
    assert origin_is("https://review.example.org", "review.example.org")
    assert not origin_is("http://127.0.0.1:3000", "127.0.0.1:8787")
    assert not origin_is("null", "127.0.0.1:8787") and not origin_is(None, "127.0.0.1:8787")
    assert not origin_is("http://127.0.0.1:8787/x", "127.0.0.1:8787")
    assert not origin_is("ftp://127.0.0.1:8787", "127.0.0.1:8787")
    assert not origin_is("http://127.0.0.1:8787", None)


def test_views_shape_is_json_free_of_agent_markup() -> None:
    """A submitter with markup in its name stays text in every view (escaping is the
    template's, spelling out controls is the view's)."""
    held = make_held(user="<script>alert(1)</script>")
    row = views.held_row(held, NOW)
    assert row.agent == "<script>alert(1)</script>@ws"
    assert json.dumps(row.agent)  # plain text, nothing rendered


def _sid(n: int) -> str:
    return f"20260601T{n // 3600 % 24:02d}{n // 60 % 60:02d}{n % 60:02d}000000Z-{n:08d}"


def test_the_held_page_is_one_page_of_the_filtered_list() -> None:
    """250 held candidates are shown 100 at a time, newest first, counted over all; a page
    past the last shows the last; where a landing is is asked only for the rows shown; a
    filter link starts again at the first page."""
    items = [
        make_held(_sid(n), taskId="web" if n % 2 else "api",
                  violations=[violation(Code.PATH_NOT_OWNED)])
        for n in range(250)
    ]  # fmt: skip
    asked: list[str] = []

    def landing(held: Held) -> None:
        asked.append(held.sid)

    first = views.held_page(items, views.Filters(), NOW, landing=landing)
    assert (first.total, first.matching, first.page, first.pages) == (250, 250, 1, 3)
    assert [r.sid for r in first.rows] == [_sid(n) for n in range(249, 149, -1)]
    assert (first.first, first.last) == (1, 100) and sorted(asked) == sorted(first_sids := [
        r.sid for r in first.rows
    ])  # fmt: skip
    assert first.previous_link is None and first.next_link == "?page=2"
    assert first.counts == (("PATH_NOT_OWNED", 250),)
    last = views.held_page(items, views.Filters.parse({"page": "9"}), NOW)
    assert (last.page, last.first, last.last, len(last.rows)) == (3, 201, 250, 50)
    assert last.next_link is None and last.previous_link == "?page=2"
    web = views.held_page(items, views.Filters.parse({"task": "web", "page": "2"}), NOW)
    assert (web.matching, web.pages, web.page, len(web.rows)) == (125, 2, 2, 25)
    assert web.previous_link == "?task=web" and web.filters.link(code="PATH_NOT_OWNED") == (
        "?code=PATH_NOT_OWNED&task=web"
    )
    assert not set(first_sids) & {r.sid for r in last.rows}
    for junk in ("0", "-1", "x", "²", "9" * 10):
        assert views.Filters.parse({"page": junk}).page == 1


def test_a_long_candidate_lists_its_violating_paths_first_and_says_what_it_left_out() -> None:
    """Past PAGE_FILES changed paths the page lists those with violations first, the
    others from the top, in diff order, and says how many it left out."""
    total = PAGE_FILES + 500
    bad = {total - 1 - 7 * k for k in range(30)}
    named = {n: [violation(Code.PATH_NOT_OWNED, f"f{n}")] for n in bad}
    files = [FileDiff(f"f{n}", None, "A", "", named.get(n, [])) for n in range(total)]
    shown = candidate.listed(files)
    assert len(shown) == PAGE_FILES
    assert [f.path for f in shown] == sorted((f.path for f in shown), key=lambda p: int(p[1:]))
    assert {f.path for f in shown if f.violations} == {f"f{n}" for n in bad}
    note = candidate.left_out(files, shown)
    assert note is not None and note.startswith(f"1,000 of {total:,} changed paths")
    assert "500 are left out, 0 of them with violations" in note
    assert candidate.left_out(files[:10], files[:10]) is None
    held = make_held(violations=[violation(Code.PATH_NOT_OWNED, f"p{n}") for n in range(1200)])
    view = candidate.candidate_view(held, None, files)
    assert len(view.files) == PAGE_FILES and view.files_left_out is not None
    assert len(view.violations) == 1000 and view.violations_left_out is not None
    assert "200 are left out" in view.violations_left_out
    lines = candidate.verdict_lines(held.verdict)
    assert len(lines) == 1001 and lines[-1][2].startswith("200 more")


def test_an_action_form_names_the_claim_it_showed() -> None:
    """The claim fields read as the claim shown (both empty: none); a form of the pages
    must carry them, a script's may leave them out; anything else is refused."""
    shown = {"claim-generation": "3", "claim-digest": "sha256:" + "a" * 64}
    assert claim_of(shown, required=True) == ClaimMark(3, "sha256:" + "a" * 64)
    none = {"claim-generation": "", "claim-digest": ""}
    assert claim_of(none, required=True) == ClaimMark(None, None)
    assert claim_of({}, required=False) is None
    for form in ({}, {"claim-generation": "x", "claim-digest": "d"},
                 {"claim-generation": "3", "claim-digest": ""},
                 {"claim-generation": "3", "claim-digest": "<b>"}):  # fmt: skip
        with pytest.raises(Refused) as refused:
            claim_of(form, required=True)
        assert refused.value.status == 400
