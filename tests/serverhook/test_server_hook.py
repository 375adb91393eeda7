"""The server-side guard: the pure decision over pushed updates, the signed push option, the
settings it reads, and `integrator server-hook install/check/sign` on real repositories
pushed to over file:// (servers with real authentication: tests/serverhook/test_server_hook_http.py)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

from integrator.errors import ConfigurationError, UsageError
from integrator.limits import MAX_UPDATES, SYMREF_PATTERNS
from integrator.plumbing import signing
from integrator.plumbing.signing import DEFAULT_MAX_AGE, Update, push_option
from integrator.refnames import fold, ref_problem
from integrator.serverhook import run
from integrator.serverhook.decide import (
    AUTHORITY,
    HookVerdict,
    Settings,
    Submitted,
    decide,
    resolve_identity,
)
from tests.gitutil import commit_files, git, make_repo
from tests.gitutil import run_integrator as integrator

Z = "0" * 40
A = "1" * 40
B = "2" * 40
NOW = 1_800_000_000
KEY = b"k" * 32
SETTINGS = Settings(targets=("main",), allow=("integrator",), key=KEY)
AGENT = {"REMOTE_USER": "agent"}
INTEGRATOR = {"REMOTE_USER": "integrator"}


def lines(*updates: tuple[str, str, str]) -> bytes:
    return b"".join(f"{o} {n} {r}\n".encode("utf-8", "surrogateescape") for o, n, r in updates)


def judge(
    *updates: tuple[str, str, str],
    env: Mapping[str, str] | None = None,
    settings: Settings = SETTINGS,
    used: frozenset[str] = frozenset(),
    symrefs: Mapping[str, str] | None = None,
    submitted: Mapping[str, Submitted] | None = None,
) -> HookVerdict:
    return decide(
        lines(*updates),
        env=AGENT if env is None else env,
        settings=settings,
        now=NOW,
        used_nonces=used,
        symrefs=symrefs,
        submitted=submitted,
    )


def signed(option: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """An environment as git sets it for a push carrying `option`."""
    return {**(base or {}), "GIT_PUSH_OPTION_COUNT": "1", "GIT_PUSH_OPTION_0": option}


# --- who may write what ---------------------------------------------------------------


@pytest.mark.parametrize(
    "update", [(A, B, "refs/heads/main"), (Z, A, "refs/heads/main"), (A, Z, "refs/heads/main")]
)
def test_agent_cannot_touch_the_target_branch(update: tuple[str, str, str]) -> None:
    """Creating, moving and deleting refs/heads/<target> are refused for a non-integrator."""
    verdict = judge(update)
    assert not verdict.accepted
    (ref,) = verdict.refs
    assert ref.rule == "target" and not ref.accepted
    assert f"only integrators may {ref.action} the target branch" in ref.reason
    assert "pusher 'agent' (REMOTE_USER) is not in integrator.hook.allow" in ref.reason


@pytest.mark.parametrize("namespace", sorted(AUTHORITY))
@pytest.mark.parametrize(("old", "new"), [(Z, A), (A, B), (A, Z)])
def test_authority_refs_belong_to_integrators(namespace: str, old: str, new: str) -> None:
    """Every authority namespace refuses an agent's create, update and delete, and accepts
    the same update from an allowed integrator."""
    ref = f"refs/integrator/{namespace}" + ("" if namespace in ("policy", "claims-index") else "/x")
    assert [r.rule for r in judge((old, new, ref)).refs] == ["authority"]
    assert not judge((old, new, ref)).accepted
    assert judge((old, new, ref), env=INTEGRATOR).accepted


@pytest.mark.parametrize(
    "ref",
    [
        "refs/integrator/verdicts/t/s",
        "refs/integrator/other",
        "refs/integrator",
        "refs/integrator/submit",
    ],
)
def test_the_rest_of_refs_integrator_belongs_to_integrators(ref: str) -> None:
    """Verdicts, unknown namespaces, the namespace itself and the submit folder itself are
    integrator-only, so an agent can neither forge a verdict nor block a folder."""
    verdict = judge((Z, A, ref))
    assert verdict.refs[0].rule == "integrator" and not verdict.accepted
    assert judge((Z, A, ref), env=INTEGRATOR).accepted


def test_agents_create_submissions_once() -> None:
    """A submission ref may be created by anyone; moving or deleting it is refused."""
    ref = "refs/integrator/submit/billing/20260101T000000000000Z-0123abcd"
    facts = {ref: Submitted(task="billing", holder="agent")}  # AGENT holds the lease
    assert judge((Z, A, ref), submitted=facts).accepted
    assert judge((Z, A, ref), env={}).accepted  # an unauthenticated pusher: anyone's
    theirs = judge((Z, A, ref), submitted={ref: Submitted(task="billing", holder="other")})
    assert not theirs.accepted and "does not hold the contract's lease" in theirs.refs[0].reason
    moved, deleted = judge((A, B, ref)), judge((A, Z, ref))
    assert not moved.accepted and "a submission is written once" in moved.refs[0].reason
    assert not deleted.accepted and "only integrators may delete it" in deleted.refs[0].reason
    assert judge((A, Z, ref), env=INTEGRATOR).accepted
    assert not judge((Z, A, "refs/integrator/submit/billing/x/y")).accepted  # too deep


def test_agents_push_their_own_branches() -> None:
    """Branches other than the target may be created, moved (even rewound) and deleted."""
    verdict = judge(
        (Z, A, "refs/heads/agent/a"), (A, B, "refs/heads/agent/b"), (A, Z, "refs/heads/x")
    )
    assert verdict.accepted
    assert [r.action for r in verdict.refs] == ["create", "update", "delete"]
    assert {r.rule for r in verdict.refs} == {"branch"}
    assert verdict.refusals() == []


@pytest.mark.parametrize(
    "ref", ["refs/tags/v1", "refs/notes/commits", "refs/pull/1/head", "refs/x"]
)
def test_tags_and_other_namespaces_belong_to_integrators(ref: str) -> None:
    """Tags, notes and anything outside refs/heads and refs/integrator are integrator-only."""
    assert judge((Z, A, ref)).refs[0].rule == "other"
    assert not judge((Z, A, ref)).accepted
    assert judge((Z, A, ref), env=INTEGRATOR).accepted


def test_one_refused_ref_refuses_the_push_and_names_only_itself() -> None:
    """A push mixing allowed and refused refs is refused, with one line for the refused ref."""
    verdict = judge((Z, A, "refs/heads/agent/x"), (Z, A, "refs/integrator/claims/x"))
    assert not verdict.accepted
    assert [r.accepted for r in verdict.refs] == [True, False]
    (line,) = verdict.refusals()
    assert line.startswith(
        "integrator: refused refs/integrator/claims/x: only integrators may create"
    )


def test_several_targets_are_all_protected() -> None:
    """With two targets configured, both branches are the integrators'."""
    settings = Settings(targets=("main", "release"), allow=("integrator",))
    assert not judge((A, B, "refs/heads/release"), settings=settings).accepted
    assert judge((A, B, "refs/heads/agent/x"), settings=settings).accepted


def test_a_branch_below_the_target_is_refused() -> None:
    """refs/heads/main/x would keep refs/heads/main from being created (a folder of that name)."""
    assert judge((Z, A, "refs/heads/main/x")).refs[0].rule == "target"


def test_pushing_through_a_symbolic_ref_is_refused_for_agents() -> None:
    """A branch that is a symbolic ref on the server moves what it points at, so only
    integrators may push to it."""
    symrefs = {"refs/heads/latest": "refs/heads/main"}
    verdict = judge((A, B, "refs/heads/latest"), symrefs=symrefs)
    assert (
        not verdict.accepted
        and "symbolic ref on the server (to refs/heads/main)" in verdict.refs[0].reason
    )
    assert judge((A, B, "refs/heads/latest"), symrefs=symrefs, env=INTEGRATOR).accepted


# --- hostile ref names ----------------------------------------------------------------

HOSTILE = [
    "refs/heads/a..b",
    "refs/heads/a.lock",
    "refs/heads/.hidden",
    "refs/heads/x/",
    "refs/heads//x",
    "refs/heads/x.",
    "refs/heads/a b",
    "refs/heads/a~1",
    "refs/heads/a^",
    "refs/heads/a:b",
    "refs/heads/a?",
    "refs/heads/a*",
    "refs/heads/a[",
    "refs/heads/a\\b",
    "refs/heads/a@{1}",
    "refs/heads/\x1b[2Jclear",
    "refs/heads/del\x7f",
    "refs/heads/tab\tx",
]
ODD = [
    "refs/heads/\u202eevil",  # a bidirectional override
    "refs/heads/zero\u200bwidth",
    "refs/heads/no\u00a0break",
    "refs/heads/bad\udcff",  # the byte 0xff, decoded with surrogateescape
    "refs/heads/" + "x" * 256,
    "refs/heads/" + "/".join(["y" * 200] * 6),
    "refs/heads/HEAD",
    "HEAD",
    "main",
    "heads/main",
]


@pytest.mark.parametrize("ref", HOSTILE)
def test_names_git_refuses_are_refused(ref: str, tmp_path: Path) -> None:
    """Every name `git check-ref-format` refuses is refused here too, even for integrators,
    and the refusal prints the name with its control characters spelled out."""
    proc = subprocess.run(["git", "check-ref-format", ref], capture_output=True, check=False)
    assert proc.returncode != 0
    assert ref_problem(ref) is not None
    verdict = judge((Z, A, ref), env=INTEGRATOR)
    assert not verdict.accepted and verdict.refs[0].rule == "invalid"
    text = "\n".join(verdict.refusals())
    assert "\x1b" not in text and "\x7f" not in text and "\t" not in text


@pytest.mark.parametrize("ref", ODD)
def test_odd_names_git_would_take_are_refused(ref: str) -> None:
    """Names that are not UTF-8, hide characters, overrun a file name or are not under refs/
    are refused rather than guessed at."""
    verdict = judge((Z, A, ref), env=INTEGRATOR)
    assert not verdict.accepted and verdict.refs[0].rule == "invalid", ref_problem(ref)
    assert "\u202e" not in "\n".join(verdict.refusals())


def test_undecodable_bytes_are_shown_escaped() -> None:
    """A ref with the byte 0xff is named as \\xff in the refusal."""
    verdict = decide(
        f"{Z} {A} refs/heads/x".encode() + b"\xff\n", env=AGENT, settings=SETTINGS, now=NOW
    )
    assert verdict.refusals() == [
        "integrator: refused refs/heads/x\\xff: not a ref name this server accepts: it is not valid UTF-8"
    ]


@pytest.mark.parametrize(
    "ref",
    [
        "refs/heads/agent/x",
        "refs/heads/feature/ünïcode",
        "refs/integrator/submit/t-1/s_2",
        "refs/tags/v1.0",
    ],
)
def test_plain_names_pass_both_checks(ref: str) -> None:
    """Ordinary names pass `git check-ref-format` and this check alike."""
    assert subprocess.run(["git", "check-ref-format", ref], check=False).returncode == 0
    assert ref_problem(ref) is None


@pytest.mark.parametrize(
    "ref",
    [
        "refs/Integrator/claims/x",
        "refs/INTEGRATOR/policy",
        "refs/heads/MAIN",
        "refs/HEADS/main",
        "refs/heads/ｍａｉｎ",  # fullwidth letters: NFKD makes them ASCII
        "refs/heads/mai\u0301n",  # a combining accent that a normalising file system drops
    ],
)
def test_spellings_that_share_a_file_with_authority_refs_are_refused(ref: str) -> None:
    """On case- or normalisation-insensitive servers these names are the same file as an
    authority ref, so they are treated as one (and the reason says so)."""
    verdict = judge((Z, A, ref))
    assert not verdict.accepted, verdict
    assert verdict.refs[0].rule in ("target", "authority", "other")
    assert fold(ref).startswith(("refs/integrator/", "refs/heads/main"))


# --- who is pushing -------------------------------------------------------------------


def test_an_unauthenticated_pusher_has_agent_rights() -> None:
    """With no identity (git daemon), branches and submissions pass and authority does not."""
    verdict = judge(
        (Z, A, "refs/heads/agent/x"),
        (Z, A, "refs/integrator/submit/t/20260101T000000000000Z-0123abcd"),
        env={},
    )
    assert verdict.accepted and verdict.identity is None
    refused = judge((A, B, "refs/heads/main"), env={})
    assert "the pusher is not authenticated" in refused.refs[0].reason


def test_require_identity_refuses_anonymous_pushes() -> None:
    """integrator.hook.requireIdentity turns away a push with no pusher and no signature."""
    settings = Settings(allow=("integrator",), require_identity=True)
    verdict = judge((Z, A, "refs/heads/agent/x"), env={}, settings=settings)
    assert not verdict.accepted
    assert verdict.refusals()[0] == (
        "integrator: refusing the push: this server requires an authenticated pusher, and git was given none"
    )


@pytest.mark.parametrize(
    ("env", "name", "source"),
    [
        ({"GITEA_PUSHER_NAME": "integrator"}, "integrator", "GITEA_PUSHER_NAME"),
        ({"GL_USERNAME": "integrator", "GL_ID": "user-1"}, "integrator", "GL_USERNAME"),
        ({"GITHUB_USER_LOGIN": "integrator"}, "integrator", "GITHUB_USER_LOGIN"),
        ({"GL_USER": "integrator"}, "integrator", "GL_USER"),
        ({"REMOTE_USER": "integrator"}, "integrator", "REMOTE_USER"),
        ({"GL_USER": "alice", "REMOTE_USER": "alice"}, "alice", "GL_USER"),
        ({"GITLAB_USER_LOGIN": "integrator"}, None, None),  # a CI variable, not set for hooks
        ({"USER": "integrator", "LOGNAME": "integrator"}, None, None),
    ],
)
def test_identity_comes_from_the_servers_variables(
    env: dict[str, str], name: str | None, source: str | None
) -> None:
    """Each host's variable names the pusher; variables no server sets for hooks do not."""
    identity = resolve_identity(env)
    assert (identity.name, identity.source, identity.problem) == (name, source, None)


def test_conflicting_identities_refuse_the_push() -> None:
    """Two server variables naming different people is a misconfiguration: refuse."""
    verdict = judge(
        (Z, A, "refs/heads/agent/x"), env={"GL_USER": "agent", "REMOTE_USER": "integrator"}
    )
    assert not verdict.accepted and not verdict.integrator
    assert "GL_USER says 'agent' but REMOTE_USER says 'integrator'" in verdict.problems[0]


def test_a_pinned_source_ignores_the_other_variables() -> None:
    """With integrator.hook.identity = REMOTE_USER, a GL_USER the pusher smuggled in (an ssh
    AcceptEnv that lets it through) names no one."""
    settings = Settings(allow=("integrator",), identity_from="REMOTE_USER")
    verdict = judge(
        (A, B, "refs/heads/main"),
        env={"GL_USER": "integrator", "REMOTE_USER": "agent"},
        settings=settings,
    )
    assert not verdict.accepted and verdict.identity == "agent"
    assert (
        judge((A, B, "refs/heads/main"), env={"GL_USER": "integrator"}, settings=settings).identity
        is None
    )


def test_the_unix_source_is_the_account_the_hook_runs_as() -> None:
    """identity_from = unix reads only the account name the runner passes in."""
    settings = Settings(allow=("integrator",), identity_from="unix")
    verdict = decide(
        lines((A, B, "refs/heads/main")),
        env=INTEGRATOR,
        settings=settings,
        now=NOW,
        unix_user="deploy",
    )
    assert verdict.identity == "deploy" and not verdict.accepted


@pytest.mark.parametrize("name", ["inte\x1bgrator", " integrator", "x" * 300, "a\u200bb"])
def test_odd_identities_refuse_the_push(name: str) -> None:
    """A pusher name with control or invisible characters, padding or no end is not trusted."""
    verdict = judge((Z, A, "refs/heads/agent/x"), env={"REMOTE_USER": name})
    assert not verdict.accepted and "is not a plain name" in verdict.problems[0]
    assert "\x1b" not in verdict.problems[0]


# --- the input as a whole -------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"", "no updates were given"),
        (f"{A} {B}\n".encode(), "input line 1 is not"),
        (f"{A[:39]} {B} refs/heads/x\n".encode(), "input line 1 is not"),
        (f"{A} {'A' * 40} refs/heads/x\n".encode(), "input line 1 is not"),
        (f"{A} {'2' * 64} refs/heads/x\n".encode(), "input line 1 is not"),
        (f"{A} {A} refs/heads/x\n".encode(), "input line 1 is not"),
        (f"{Z} {A} refs/heads/x\n\n{Z} {A} refs/heads/y\n".encode(), "input line 2 is not"),
        (f"{Z} {A} refs/heads/x\n{A} {B} refs/heads/x\n".encode(), "refs/heads/x is updated twice"),
    ],
)
def test_malformed_input_refuses_everything(data: bytes, problem: str) -> None:
    """Input git would never send refuses the whole push, naming the problem."""
    verdict = decide(data, env=INTEGRATOR, settings=SETTINGS, now=NOW)
    assert not verdict.accepted and not verdict.integrator
    assert any(problem in p for p in verdict.problems), verdict.problems
    assert all(not r.accepted for r in verdict.refs)


def test_sha256_object_ids_are_read() -> None:
    """A SHA-256 repository's 64-digit ids are accepted like SHA-1 ones."""
    assert judge(("0" * 64, "3" * 64, "refs/heads/agent/x")).accepted


def test_many_refs_are_decided_one_by_one() -> None:
    """A push of 20,000 updates is decided ref by ref, naming only the bad one (its cost is
    measured where the hook is installed, not timed here)."""
    updates = [(Z, A, f"refs/heads/agent/{i}") for i in range(20_000)]
    updates.append((A, B, "refs/integrator/claims/billing"))
    verdict = judge(*updates)
    assert not verdict.accepted
    assert [r.ref for r in verdict.refs if not r.accepted] == ["refs/integrator/claims/billing"]
    assert judge(*updates, env=INTEGRATOR).accepted


def test_more_updates_than_the_limit_are_refused_unread() -> None:
    """Past MAX_UPDATES lines the push is refused as a whole before any name is examined."""
    data = f"{Z} {A} refs/heads/x\n".encode() * (MAX_UPDATES + 1)
    verdict = decide(data, env=INTEGRATOR, settings=SETTINGS, now=NOW)
    assert not verdict.accepted and verdict.refs == ()
    assert f"at most {MAX_UPDATES} are accepted" in verdict.problems[0]


def test_the_json_form_carries_every_ref_and_no_nonce() -> None:
    """`check --json` prints the decision per ref; the nonce stays internal."""
    document = judge((Z, A, "refs/heads/agent/x")).to_json()
    assert document["accepted"] is True and "nonce" not in document
    assert document["refs"][0] == {
        "ref": "refs/heads/agent/x",
        "old": Z,
        "new": A,
        "action": "create",
        "rule": "branch",
        "accepted": True,
        "reason": "a branch other than the target",
    }


# --- the signed push option -----------------------------------------------------------

CLAIM = (A, B, "refs/integrator/claims/billing")
MAIN = (A, B, "refs/heads/main")


def test_a_valid_signature_makes_the_push_an_integrators() -> None:
    """A push signed with the server's key over exactly its updates passes, anonymous or not,
    and hands back the nonce to record."""
    option = push_option(KEY, [CLAIM, MAIN], now=NOW, nonce="ab" * 16)
    verdict = judge(CLAIM, MAIN, env=signed(option))
    assert verdict.accepted and verdict.integrator and verdict.signature == "valid"
    assert verdict.nonce == (NOW, "ab" * 16)
    assert option.startswith("integrator-hmac=v1:1800000000:" + "ab" * 16 + ":")


def test_the_signature_ignores_the_order_of_updates() -> None:
    """The canonical form sorts the lines, so git's order of commands does not matter."""
    option = push_option(KEY, [MAIN, CLAIM], now=NOW)
    assert judge(CLAIM, MAIN, env=signed(option)).accepted


@pytest.mark.parametrize(
    "pushed",
    [
        [CLAIM, (A, "3" * 40, "refs/heads/main")],  # another new value
        [CLAIM, (B, B.replace("2", "4"), "refs/heads/main")],  # another old value
        [CLAIM],  # an update left out
        [CLAIM, MAIN, (Z, A, "refs/integrator/policy")],  # an update added
        [CLAIM, (A, B, "refs/heads/other")],  # another ref
    ],
)
def test_a_signature_covers_exactly_the_pushed_updates(pushed: list[tuple[str, str, str]]) -> None:
    """Changing, dropping or adding any update invalidates the signature."""
    option = push_option(KEY, [CLAIM, MAIN], now=NOW)
    verdict = judge(*pushed, env=signed(option))
    assert not verdict.accepted and not verdict.integrator
    assert verdict.signature == "the signature does not match the pushed updates"
    assert any("the integrator-hmac option was not accepted" in r.reason for r in verdict.refs)


def test_a_replayed_signature_is_refused() -> None:
    """The nonce of an accepted signature is recorded; the same option again is a replay."""
    option = push_option(KEY, [CLAIM], now=NOW, nonce="cd" * 16)
    verdict = judge(CLAIM, env=signed(option), used=frozenset({"cd" * 16}))
    assert not verdict.accepted and verdict.signature == "the signature was used before (a replay)"


@pytest.mark.parametrize(
    ("stamp", "status"),
    [
        (
            NOW - DEFAULT_MAX_AGE - 1,
            f"the signature is {DEFAULT_MAX_AGE + 1} s old (limit {DEFAULT_MAX_AGE} s)",
        ),
        (
            NOW + DEFAULT_MAX_AGE + 5,
            f"the signature is dated {DEFAULT_MAX_AGE + 5} s ahead of the server's clock",
        ),
    ],
)
def test_a_signature_is_only_good_for_a_few_minutes(stamp: int, status: str) -> None:
    """Outside the time window either way, a signature is refused even if it matches."""
    assert judge(CLAIM, env=signed(push_option(KEY, [CLAIM], now=NOW - 10))).accepted
    verdict = judge(CLAIM, env=signed(push_option(KEY, [CLAIM], now=stamp)))
    assert not verdict.accepted and verdict.signature == status


@pytest.mark.parametrize(
    ("env", "status"),
    [
        (
            signed(push_option(b"x" * 32, [CLAIM], now=NOW)),
            "the signature does not match the pushed updates",
        ),
        (signed("integrator-hmac=v1:1:zz:zz"), "the integrator-hmac option is malformed"),
        (signed("integrator-hmac=" + "v1:" * 50), "the integrator-hmac option is malformed"),
        (
            {
                "GIT_PUSH_OPTION_COUNT": "2",
                "GIT_PUSH_OPTION_0": push_option(KEY, [CLAIM], now=NOW),
                "GIT_PUSH_OPTION_1": push_option(KEY, [CLAIM], now=NOW),
            },
            "the push carries 2 integrator-hmac options",
        ),
    ],
)
def test_forged_signatures_are_refused(env: dict[str, str], status: str) -> None:
    """A wrong key, a malformed option or two options do not make an integrator."""
    verdict = judge(CLAIM, env=env)
    assert not verdict.accepted and verdict.signature == status


def test_without_a_server_key_signatures_count_for_nothing() -> None:
    """A server with no key refuses the signed push like any other agent push."""
    option = push_option(KEY, [CLAIM], now=NOW)
    verdict = judge(CLAIM, env=signed(option), settings=Settings(allow=("integrator",)))
    assert not verdict.accepted and verdict.signature.startswith("this server has no key")


def test_other_push_options_are_left_alone() -> None:
    """Options that are not integrator-hmac neither help nor hurt."""
    env = {"GIT_PUSH_OPTION_COUNT": "2", "GIT_PUSH_OPTION_0": "ci.skip", "GIT_PUSH_OPTION_1": "x=y"}
    assert judge((Z, A, "refs/heads/agent/x"), env=env).signature == "none"


def test_push_option_drops_what_git_will_not_send() -> None:
    """An update whose ref already holds its new value sends no command, so it is not signed."""
    noop = (B, B, "refs/integrator/queue/main")
    assert judge(CLAIM, env=signed(push_option(KEY, [CLAIM, noop], now=NOW))).accepted


@pytest.mark.parametrize(
    ("key", "updates", "message"),
    [
        (b"short", [CLAIM], "at least 32 are needed"),
        (KEY, [("abc", B, "refs/heads/main")], "must be full object ids"),
        (KEY, [(B, B, "refs/heads/main")], "nothing to sign"),
    ],
)
def test_push_option_refuses_what_it_cannot_sign(
    key: bytes, updates: list[tuple[str, str, str]], message: str
) -> None:
    """A short key, abbreviated ids or an empty push are usage errors, not weak signatures."""
    with pytest.raises(UsageError, match=message):
        push_option(key, updates)


def test_push_option_takes_update_objects() -> None:
    """Update values and (old, new, ref) tuples sign alike."""
    assert push_option(KEY, [Update(*CLAIM)], now=NOW, nonce="00" * 16) == push_option(
        KEY, [CLAIM], now=NOW, nonce="00" * 16
    )


# --- settings and the nonce store -----------------------------------------------------


def test_settings_come_from_git_config(tmp_path: Path) -> None:
    """Every integrator.hook.* setting is read from the repository, key file included."""
    repo = make_repo(tmp_path / "srv.git", bare=True)
    key = tmp_path / "key"
    key.write_text("s" * 64 + "\n")
    for name, value in [
        ("integrator.hook.allow", "alice"),
        ("integrator.hook.allow", "bob"),
        ("integrator.hook.keyFile", str(key)),
        ("integrator.target", "trunk"),
        ("integrator.hook.identity", "GL_USER"),
        ("integrator.hook.maxAge", "60"),
        ("integrator.hook.requireIdentity", "yes"),
    ]:
        git("config", "--add", name, value, cwd=repo)
    settings = run.settings_from_config(run.read_config(repo))
    assert settings == Settings(
        targets=("trunk",),
        allow=("alice", "bob"),
        key=b"s" * 64,
        identity_from="GL_USER",
        max_age=60,
        require_identity=True,
    )


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"integrator.target": ["ma in"]}, "is not a branch name"),
        ({"integrator.hook.identity": ["HOME"]}, "is not one of"),
        ({"integrator.hook.maxage": ["soon"]}, "is not a number of seconds"),
        ({"integrator.hook.requireidentity": ["maybe"]}, "is not a boolean"),
        ({"integrator.hook.keyfile": ["/nonexistent/key"]}, "cannot read the key file"),
    ],
)
def test_bad_settings_are_configuration_errors(config: dict[str, list[str]], message: str) -> None:
    """A setting the hook cannot use stops it (the check then refuses the push)."""
    with pytest.raises(ConfigurationError, match=message):
        run.settings_from_config(config)


def test_a_short_key_file_is_refused(tmp_path: Path) -> None:
    """A key under 32 bytes is a configuration error, not a weak key."""
    key = tmp_path / "key"
    key.write_text("tooshort\n")
    with pytest.raises(ConfigurationError, match="holds 8 bytes"):
        signing.load_key(key)


def test_the_nonce_store_keeps_only_live_nonces(tmp_path: Path) -> None:
    """Recorded nonces are read back; ones past the time window are dropped on the next write."""
    with run.NonceStore(tmp_path) as store:
        store.record("old", NOW - 1000, now=NOW - 999, max_age=300)
    with run.NonceStore(tmp_path) as store:
        assert store.entries == {"old": NOW - 1000}
        store.record("new", NOW, now=NOW, max_age=300)
    with run.NonceStore(tmp_path) as store:
        assert store.entries == {"new": NOW}
    assert oct((tmp_path / "integrator-hook" / "nonces").stat().st_mode & 0o777) == "0o600"


# --- the commands on real repositories ------------------------------------------------


@pytest.fixture
def served(tmp_path: Path) -> tuple[Path, Path, str]:
    """A bare server repository with main, and a work repository with a new commit."""
    server = make_repo(tmp_path / "srv.git", bare=True)
    work = make_repo(tmp_path / "work")
    first = commit_files(work, {"a.txt": "1\n"}, "one")
    git("push", "-q", str(server), "HEAD:refs/heads/main", cwd=work)
    git("config", "integrator.target", "main", cwd=server)  # what install protects
    second = commit_files(work, {"a.txt": "2\n"}, "two")
    assert first != second
    return server, work, second


def push(
    work: Path, server: Path, *refspecs: str, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "push", "--porcelain", f"file://{server}", *refspecs],
        cwd=work,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
    )


def test_install_writes_a_hook_that_guards_pushes(served: tuple[Path, Path, str]) -> None:
    """After install, an anonymous file:// push to main is refused with the hook's line and
    a push of a branch and a submission lands."""
    server, work, _ = served
    proc = integrator(
        "server-hook", "install", "--repo", str(server), "--allow", "integrator", cwd=work
    )
    assert proc.returncode == 0, proc.stderr
    hook = server / "hooks" / "pre-receive"
    assert os.access(hook, os.X_OK) and "-m integrator server-hook check" in hook.read_text()
    before = git("for-each-ref", cwd=server)
    refused = push(work, server, "HEAD:refs/heads/main", "HEAD:refs/integrator/claims/x")
    assert refused.returncode == 1
    assert (
        "remote: integrator: refused refs/heads/main: only integrators may update the target branch"
        in refused.stderr
    )
    assert git("for-each-ref", cwd=server) == before
    landed = push(
        work,
        server,
        "HEAD:refs/heads/agent/x",
        "HEAD:refs/integrator/submit/t/20260101T000000000000Z-0123abcd",
    )
    assert landed.returncode == 0, landed.stderr


def test_install_is_idempotent(served: tuple[Path, Path, str], tmp_path: Path) -> None:
    """The same install twice leaves the hook and the config as the first one wrote them."""
    server, work, _ = served
    key = tmp_path / "key"
    assert integrator("server-hook", "keygen", "-o", str(key), cwd=work).returncode == 0
    args = (
        "server-hook",
        "install",
        "--repo",
        str(server),
        "--allow",
        "a",
        "--allow",
        "b",
        "--key-file",
        str(key),
    )
    first = integrator(*args, cwd=work)
    config = git("config", "--list", "--local", cwd=server)
    script = (server / "hooks" / "pre-receive").read_text()
    second = integrator(*args, cwd=work)
    assert first.stdout.startswith("wrote ") and second.stdout.startswith("unchanged ")
    assert git("config", "--list", "--local", cwd=server) == config
    assert (server / "hooks" / "pre-receive").read_text() == script
    assert "integrator.hook.allow=a\nintegrator.hook.allow=b" in config
    assert "receive.advertisepushoptions=true" in config


def test_install_needs_an_integrator(served: tuple[Path, Path, str]) -> None:
    """Without --allow or --key-file no one could move the target: a usage error, nothing written."""
    server, work, _ = served
    proc = integrator("server-hook", "install", "--repo", str(server), cwd=work)
    assert proc.returncode == 2 and "give --allow IDENTITY" in proc.stderr
    assert not (server / "hooks" / "pre-receive").exists()


def foreign_hook(server: Path, body: str) -> Path:
    hook = server / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\n" + body)
    hook.chmod(0o755)
    return hook


def test_install_leaves_a_foreign_hook_alone(served: tuple[Path, Path, str]) -> None:
    """A pre-receive hook integrator did not write is neither overwritten nor run around."""
    server, work, _ = served
    hook = foreign_hook(server, "exit 0\n")
    proc = integrator("server-hook", "install", "--repo", str(server), "--allow", "i", cwd=work)
    assert proc.returncode == 2 and "--chain" in proc.stderr and "--force" in proc.stderr
    assert hook.read_text() == "#!/bin/sh\nexit 0\n"


def test_install_chains_to_a_foreign_hook(served: tuple[Path, Path, str], tmp_path: Path) -> None:
    """With --chain the foreign hook keeps running after the check, on the same input, and
    its refusal still refuses; a refused check never reaches it."""
    server, work, _ = served
    log = tmp_path / "chained.log"
    foreign_hook(
        server,
        f"cat >> {log}\necho chained-ran >&2\ngrep -q refs/heads/blocked {log} && exit 1\nexit 0\n",
    )
    args = ("server-hook", "install", "--repo", str(server), "--allow", "i", "--chain")
    assert integrator(*args, cwd=work).returncode == 0
    assert (server / "hooks" / "pre-receive.chained").exists()
    ok = push(work, server, "HEAD:refs/heads/agent/x")
    assert ok.returncode == 0 and "chained-ran" in ok.stderr
    assert log.read_text().endswith(" refs/heads/agent/x\n")
    blocked = push(work, server, "HEAD:refs/heads/blocked")
    assert blocked.returncode == 1 and "chained-ran" in blocked.stderr
    log.write_text("")
    refused = push(work, server, "HEAD:refs/heads/main")
    assert refused.returncode == 1 and "chained-ran" not in refused.stderr and log.read_text() == ""
    assert integrator(*args[:-1], cwd=work).stdout.startswith("unchanged")  # still chained


def test_install_force_replaces_and_keeps_the_old_hook(served: tuple[Path, Path, str]) -> None:
    """--force puts integrator's hook in place and keeps the foreign one as pre-receive.replaced."""
    server, work, _ = served
    foreign_hook(server, "exit 1\n")
    proc = integrator(
        "server-hook", "install", "--repo", str(server), "--allow", "i", "--force", cwd=work
    )
    assert proc.returncode == 0, proc.stderr
    assert (server / "hooks" / "pre-receive.replaced").read_text() == "#!/bin/sh\nexit 1\n"
    assert push(work, server, "HEAD:refs/heads/agent/x").returncode == 0


def test_install_beside_giteas_hooks(served: tuple[Path, Path, str]) -> None:
    """In a Gitea repository (its delegating pre-receive and pre-receive.d/), the hook goes
    into pre-receive.d/integrator and Gitea's own files stay as they were."""
    server, work, _ = served
    delegate = (
        '#!/usr/bin/env bash\n# AUTO GENERATED BY GITEA, DO NOT MODIFY\ndata=$(cat)\nexitcodes=""\n'
        "hookname=$(basename $0)\nGIT_DIR=${GIT_DIR:-$(dirname $0)/..}\n"
        'for hook in ${GIT_DIR}/hooks/${hookname}.d/*; do\n  test -x "${hook}" && test -f "${hook}" || continue\n'
        '  echo "${data}" | "${hook}"\n  exitcodes="${exitcodes} $?"\ndone\n'
        "for i in ${exitcodes}; do\n  [ ${i} -eq 0 ] || exit ${i}\ndone\n"
    )
    (server / "hooks" / "pre-receive").write_text(delegate)
    (server / "hooks" / "pre-receive").chmod(0o755)
    (server / "hooks" / "pre-receive.d").mkdir()
    proc = integrator("server-hook", "install", "--repo", str(server), "--allow", "i", cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert (server / "hooks" / "pre-receive").read_text() == delegate
    assert os.access(server / "hooks" / "pre-receive.d" / "integrator", os.X_OK)
    refused = push(work, server, "HEAD:refs/heads/main")
    assert (
        refused.returncode == 1
        and "only integrators may update the target branch" in refused.stderr
    )
    assert (
        push(work, server, "HEAD:refs/heads/agent/x").returncode == 0
    )  # Gitea's echo adds a newline


def test_check_fails_closed_on_a_broken_setting(served: tuple[Path, Path, str]) -> None:
    """A setting the hook cannot read refuses every push, saying what to fix."""
    server, work, _ = served
    assert (
        integrator(
            "server-hook", "install", "--repo", str(server), "--allow", "i", cwd=work
        ).returncode
        == 0
    )
    git("config", "integrator.hook.maxAge", "soon", cwd=server)
    refused = push(work, server, "HEAD:refs/heads/agent/x")
    assert refused.returncode == 1
    assert (
        "integrator: refusing the push: the hook cannot decide: integrator.hook.maxAge 'soon'"
        in refused.stderr
    )


def test_check_options_stand_in_for_config(served: tuple[Path, Path, str]) -> None:
    """`check --allow` decides without any config (hooks outside the repository, GitLab)."""
    server, _work, new = served
    main = git("rev-parse", "refs/heads/main", cwd=server)
    data = f"{main} {new} refs/heads/main\n".encode()
    env = {"GIT_DIR": str(server), "GL_USERNAME": "bot"}
    refused = integrator("server-hook", "check", cwd=server, stdin=data, env=env)
    assert refused.returncode == 1
    assert refused.stderr.startswith("GL-HOOK-ERR: integrator: refused refs/heads/main")
    accepted = integrator(
        "server-hook", "check", "--allow", "bot", "--json", cwd=server, stdin=data, env=env
    )
    assert accepted.returncode == 0 and '"accepted": true' in accepted.stdout


def test_sign_prints_an_option_the_check_accepts(
    served: tuple[Path, Path, str], tmp_path: Path
) -> None:
    """`server-hook sign` and `check` agree, and the same option is refused the second time."""
    server, work, new = served
    key = tmp_path / "key"
    assert integrator("server-hook", "keygen", "-o", str(key), cwd=work).returncode == 0
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    assert integrator("server-hook", "keygen", "-o", str(key), cwd=work).returncode == 2
    main = git("rev-parse", "refs/heads/main", cwd=server)
    update = f"{main} {new} refs/heads/main"
    option = integrator(
        "server-hook", "sign", "--key-file", str(key), "--update", update, cwd=work
    ).stdout.strip()
    assert option.startswith("integrator-hmac=v1:")
    env = {"GIT_DIR": str(server), "GIT_PUSH_OPTION_COUNT": "1", "GIT_PUSH_OPTION_0": option}
    args = ("server-hook", "check", "--key-file", str(key))
    assert integrator(*args, cwd=server, stdin=(update + "\n").encode(), env=env).returncode == 0
    replay = integrator(*args, cwd=server, stdin=(update + "\n").encode(), env=env)
    assert replay.returncode == 1 and "the signature was used before (a replay)" in replay.stderr


def test_settings_in_the_environment_are_ignored(served: tuple[Path, Path, str]) -> None:
    """The check reads the repository's own config file only: an allow-list smuggled in
    through GIT_CONFIG_PARAMETERS or GIT_CONFIG_COUNT does not make the agent an integrator."""
    server, _work, new = served
    assert (
        integrator(
            "server-hook", "install", "--repo", str(server), "--allow", "i", cwd=server
        ).returncode
        == 0
    )
    main = git("rev-parse", "refs/heads/main", cwd=server)
    data = f"{main} {new} refs/heads/main\n".encode()
    env = {
        "GIT_DIR": str(server),
        "REMOTE_USER": "agent",
        "GIT_CONFIG_PARAMETERS": "'integrator.hook.allow'='agent'",
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "integrator.hook.allow",
        "GIT_CONFIG_VALUE_0": "agent",
    }
    proc = integrator("server-hook", "check", cwd=server, stdin=data, env=env)
    assert (
        proc.returncode == 1
        and "pusher 'agent' (REMOTE_USER) is not in integrator.hook.allow" in proc.stderr
    )


def test_install_refuses_a_shared_hooks_folder(
    served: tuple[Path, Path, str], tmp_path: Path
) -> None:
    """core.hooksPath pointing outside the repository (shared by others) needs --force."""
    server, work, _ = served
    shared = tmp_path / "shared-hooks"
    git("config", "core.hooksPath", str(shared), cwd=server)
    proc = integrator("server-hook", "install", "--repo", str(server), "--allow", "i", cwd=work)
    assert proc.returncode == 2 and "core.hooksPath" in proc.stderr and not shared.exists()
    forced = integrator(
        "server-hook", "install", "--repo", str(server), "--allow", "i", "--force", cwd=work
    )
    assert forced.returncode == 0 and (shared / "pre-receive").exists()


def test_a_symbolic_ref_on_the_server_is_not_a_way_round(
    served: tuple[Path, Path, str], tmp_path: Path
) -> None:
    """Pushing to a branch that is a symbolic ref to main moves main (shown on an unguarded
    copy); with the hook installed, an agent's push to it is refused and main stays."""
    server, work, new = served
    git("symbolic-ref", "refs/heads/latest", "refs/heads/main", cwd=server)
    unguarded = tmp_path / "unguarded.git"
    git("clone", "-q", "--mirror", str(server), str(unguarded), cwd=tmp_path)
    git("symbolic-ref", "refs/heads/latest", "refs/heads/main", cwd=unguarded)
    assert push(work, unguarded, f"{new}:refs/heads/latest").returncode == 0
    assert git("rev-parse", "refs/heads/main", cwd=unguarded) == new
    assert (
        integrator(
            "server-hook", "install", "--repo", str(server), "--allow", "i", cwd=work
        ).returncode
        == 0
    )
    main = git("rev-parse", "refs/heads/main", cwd=server)
    refused = push(work, server, f"{new}:refs/heads/latest")
    assert refused.returncode == 1
    assert (
        "refused refs/heads/latest: is a symbolic ref on the server (to refs/heads/main)"
        in refused.stderr
    )
    assert git("rev-parse", "refs/heads/main", cwd=server) == main


def test_symbolic_refs_are_found_for_few_and_for_many_pushed_names(tmp_path: Path) -> None:
    """The server's symbolic refs are looked up by name for small pushes and listed whole
    for large ones; both find the same link and nothing else."""
    repo = make_repo(tmp_path / "srv.git", bare=True)
    commit_files(repo, {"a": "1\n"}, "one", parent=None, ref="refs/heads/main")
    git("symbolic-ref", "refs/heads/latest", "refs/heads/main", cwd=repo)
    few = ["refs/heads/latest", "refs/heads/main", "refs/heads/late"]
    many = few + [f"refs/heads/agent/{i}" for i in range(SYMREF_PATTERNS)]
    expected = {"refs/heads/latest": "refs/heads/main"}
    assert run.server_symrefs(repo, few) == run.server_symrefs(repo, many) == expected
    assert run.server_symrefs(repo, ["refs/heads/main"]) == {}


@pytest.mark.parametrize(
    "ref",
    [
        "refs/integrator/submit/t/s1",  # not a submission id
        "refs/integrator/submit/t/20260101T000000000000Z-0123ABCD",  # upper-case hex
        "refs/integrator/submit/t/20260101T00000000000Z-0123abcd",  # a digit short
        "refs/integrator/submit/t/20260101T000000000000Z-0123abcd.x",  # trailing text
        "refs/integrator/submit/t.lock/20260101T000000000000Z-0123abcd",  # not a ref component
        "refs/integrator/submit/-t../20260101T000000000000Z-0123abcd",  # '..' in the task
    ],
)
def test_a_submit_ref_that_could_never_be_decided_is_refused(ref: str) -> None:
    """A submit ref whose task or id no daemon could use is refused by the hook for everyone
    (it would otherwise sit on the intake, warned about at every poll); a usable one passes."""
    refused = judge((Z, A, ref), env={})
    assert not refused.accepted, ref
    good = judge((Z, A, "refs/integrator/submit/t/20260101T000000000000Z-0123abcd"), env={})
    assert good.accepted
