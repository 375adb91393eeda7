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
from integrator.records.held import ReviewAction
from integrator.review.actions import FileDiff, Held
from integrator.tokens import bearer, is_loopback, read_token, token_matches
from integrator.web import candidate, views
from integrator.web.app import _host_of, _local_target
from integrator.web.security import Sessions, csrf_matches, safe_actor
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
    """Logging in replaces the session id; each store drops its oldest past its limit and
    forgets sessions past their age; a flood of anonymous visitors (cookieless requests
    each make one) never evicts the release manager's login."""
    clock = [0.0]
    sessions = Sessions(limit=2, ttl=10, clock=lambda: clock[0])
    anon = sessions.new()
    logged = sessions.login(anon)
    assert logged.authenticated and logged.sid != anon.sid and sessions.get(anon.sid) is None
    assert csrf_matches(logged, logged.csrf) and not csrf_matches(logged, anon.csrf)
    assert not csrf_matches(None, logged.csrf) and not csrf_matches(logged, None)
    visitors = [sessions.new() for _ in range(1030)]
    assert sessions.get(logged.sid) is logged  # still logged in
    assert sessions.get(visitors[0].sid) is None and sessions.get(visitors[-1].sid) is not None
    assert len(sessions) == 3  # two anonymous (the limit) and the login
    second = sessions.login(None)
    third = sessions.login(None)
    assert sessions.get(logged.sid) is None  # logins are bounded too (the oldest goes)
    assert sessions.get(second.sid) is second and sessions.get(third.sid) is third
    late = sessions.new()
    clock[0] = 11
    assert sessions.get(late.sid) is None


def test_token_rules(tmp_path: Path) -> None:
    """The token file must be private and hold one long token; comparison is exact."""
    path = tmp_path / "token"
    path.write_text("  " + "k" * 20 + "\n")
    path.chmod(0o600)
    assert read_token(path) == "k" * 20
    for mode in (0o640, 0o620, 0o610):  # any right of the group is one too many
        path.chmod(mode)
        with pytest.raises(ConfigurationError, match="readable by its group"):
            read_token(path)
    path.chmod(0o644)
    with pytest.raises(ConfigurationError, match="readable by every user"):
        read_token(path)
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
    assert [_host_of(h) for h in ("127.0.0.1:8787", "[::1]:80", "localhost")] == [
        "127.0.0.1", "::1", "localhost",
    ]  # fmt: skip
    assert _local_target("/queue") == "/queue"
    assert _local_target("https://evil.example/") == "/"
    assert _local_target("/held/../../x") == "/"
    assert _local_target("/held/20260601T115900000000Z-00000001").startswith("/held/")


def test_views_shape_is_json_free_of_agent_markup() -> None:
    """A submitter with markup in its name stays text in every view (escaping is the
    template's, spelling out controls is the view's)."""
    held = make_held(user="<script>alert(1)</script>")
    row = views.held_row(held, NOW)
    assert row.agent == "<script>alert(1)</script>@ws"
    assert json.dumps(row.agent)  # plain text, nothing rendered
