"""Intake hygiene at the server (issue T, hole 4a): a name under refs/integrator/submit/
that no daemon could ever decide — fewer or more components than <task>/<id>, a task that is
not one ref component, an id not of integrator's shape — is refused by the hook for every
pusher, integrators included (an integrator may still delete one made before the hook),
on the decision and on real pushes through the installed hook."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from integrator.limits import MAX_ID_CHARS
from integrator.serverhook.decide import Settings, Submitted, decide
from tests.gitutil import commit_files, git, make_repo
from tests.gitutil import run_integrator as integrator

Z, A = "0" * 40, "1" * 40
SID = "20260101T000000000000Z-0123abcd"
SETTINGS = Settings(targets=("main",), allow=("integrator",))
AGENT: dict[str, str] = {"REMOTE_USER": "agent"}
INTEGRATOR: dict[str, str] = {"REMOTE_USER": "integrator"}
ANONYMOUS: dict[str, str] = {}
UNUSABLE = [
    "refs/integrator/submit/t",  # no id
    f"refs/integrator/submit/{SID}",  # no task
    f"refs/integrator/submit/t/x/{SID}",  # three components
    f"refs/integrator/submit/t/{SID}/x",  # the id is a folder
    "refs/integrator/submit/t/s1",  # not a submission id
    f"refs/integrator/submit/t/{SID.upper()}",  # not its shape
    f"refs/integrator/submit/{'t' * (MAX_ID_CHARS + 1)}/{SID}",  # a task id past the limit
    f"refs/integrator/submit/@/{SID}",  # git reads '@' as HEAD
]


def _one(ref: str, env: dict[str, str], old: str = Z, new: str = A) -> tuple[bool, str, str]:
    task = ref.removeprefix("refs/integrator/submit/").partition("/")[0]
    facts = {ref: Submitted(task=task, holder=env.get("REMOTE_USER"))}  # the pusher's own
    verdict = decide(
        f"{old} {new} {ref}\n".encode(), env=env, settings=SETTINGS, now=0, submitted=facts
    )
    (judged,) = verdict.refs
    return verdict.accepted, judged.rule, judged.reason


@pytest.mark.parametrize("ref", UNUSABLE)
@pytest.mark.parametrize(
    "env", [AGENT, INTEGRATOR, ANONYMOUS], ids=["agent", "integrator", "anonymous"]
)
def test_an_unusable_submit_ref_is_refused_for_everyone(ref: str, env: dict[str, str]) -> None:
    accepted, rule, reason = _one(ref, env)
    assert not accepted and rule == "invalid", (ref, rule, reason)
    assert "is not refs/integrator/submit/<task>/<submission id>" in reason


@pytest.mark.parametrize("ref", UNUSABLE)
def test_only_an_integrator_may_delete_an_unusable_submit_ref(ref: str) -> None:
    assert _one(ref, INTEGRATOR, A, Z)[0]
    assert not _one(ref, AGENT, A, Z)[0]


def test_a_usable_submit_ref_is_still_anyones_to_create() -> None:
    for env in (AGENT, ANONYMOUS, INTEGRATOR):
        assert _one(f"refs/integrator/submit/t-1.x_y/{SID}", env)[:2] == (True, "submit")


def _push(
    work: Path, server: Path, *specs: str, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "push", "--porcelain", f"file://{server}", *specs],
        cwd=work, capture_output=True, text=True, check=False, env={**os.environ, **env},
    )  # fmt: skip


def test_the_installed_hook_refuses_unusable_submit_refs_on_real_pushes(tmp_path: Path) -> None:
    """Pushes through `server-hook install`'s hook: every unusable name is refused, one by
    one and for the integrator too, and nothing is written; a usable one lands; an
    integrator clears an unusable ref that was on the server before the hook."""
    server = make_repo(tmp_path / "srv.git", bare=True)
    work = make_repo(tmp_path / "work")
    head = commit_files(work, {"a.txt": "1\n"}, "one")
    git("push", "-q", str(server), "HEAD:refs/heads/main", cwd=work)
    git("update-ref", "refs/integrator/submit/old", head, cwd=server)  # before the hook
    done = integrator("server-hook", "install", "--repo", str(server), "--allow", "integrator",
                      "--target", "main", cwd=work)  # fmt: skip
    assert done.returncode == 0, done.stderr
    before = git("for-each-ref", cwd=server)
    for env in (AGENT, INTEGRATOR):
        for ref in UNUSABLE:
            refused = _push(work, server, f"HEAD:{ref}", env=env)
            assert refused.returncode != 0, (env, ref)
            assert "is not refs/integrator/submit/<task>/<submission id>" in refused.stderr, ref
    assert git("for-each-ref", cwd=server) == before
    good = _push(work, server, f"HEAD:refs/integrator/submit/t/{SID}", env=ANONYMOUS)
    assert good.returncode == 0, good.stderr
    assert _push(work, server, ":refs/integrator/submit/old", env=AGENT).returncode != 0
    cleared = _push(work, server, ":refs/integrator/submit/old", env=INTEGRATOR)
    assert cleared.returncode == 0, cleared.stderr
    assert git("for-each-ref", "refs/integrator/submit/", cwd=server).split() == [
        head,
        "commit",
        f"refs/integrator/submit/t/{SID}",
    ]
