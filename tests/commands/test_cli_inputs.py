"""Bad command-line input is refused with one line naming it, exit 2, and nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from integrator.cli import main
from integrator.fleet.assignments import Fleet
from integrator.fleet.taskqueue import Queue
from integrator.limits import DETAILS_BYTES
from tests.factories import contract_doc, task_file
from tests.gitutil import commit_files, declare_bare, git, make_repo

SID = "20260601T120000000000Z-0a1b2c3d"


def refs_and_config(repo: Path) -> tuple[str, str]:
    """Everything `integrator init` may write: the refs and the repository's git config."""
    refs = git("for-each-ref", "--format=%(objectname) %(refname)", cwd=repo)
    return refs, git("config", "--local", "--list", cwd=repo)


# --- submit: a spool that cannot be a folder --------------------------------------------


@pytest.fixture
def submit_args(tmp_path: Path) -> list[str]:
    """`submit` arguments for a valid contract and candidate; the test adds --spool."""
    repo = make_repo(tmp_path / "repo")
    head = commit_files(repo, {"a": "a"}, "base")
    contract = tmp_path / "contract.json"
    contract.write_text(json.dumps(contract_doc(baseCommit=head)))
    return ["submit", "--contract", str(contract), "--candidate", "HEAD", "--repo", str(repo)]


def test_submit_to_a_regular_file_names_the_spool(
    tmp_path: Path, submit_args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: `submit --spool FILE` printed a traceback and exited 4; now exit 2, one line."""
    spool = tmp_path / "spool"
    spool.write_text("not a spool\n")
    code = main([*submit_args, "--spool", str(spool)])
    err = capsys.readouterr().err
    assert code == 2
    assert f"spool {spool} is not a folder" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert spool.read_text() == "not a spool\n"


def test_submit_to_an_uncreatable_spool_names_it(
    tmp_path: Path, submit_args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: a spool that cannot be created (here: beneath a file) is exit 2, not 4."""
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    spool = blocker / "spool"
    code = main([*submit_args, "--spool", str(spool), "--create"])
    err = capsys.readouterr().err
    assert code == 2
    assert f"cannot create spool {spool}" in err and "Traceback" not in err
    assert blocker.read_text() == "x"


def test_submit_to_a_missing_spool_is_refused_unless_create(
    tmp_path: Path, submit_args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: a mistyped --spool was created and the submission exited 0 into a spool
    no daemon reads; now exit 2 naming it and nothing made, and --create makes it."""
    spool = tmp_path / "fresh" / "spool"
    assert main([*submit_args, "--spool", str(spool)]) == 2
    err = capsys.readouterr().err
    assert f"spool {spool} does not exist" in err and "--create" in err
    assert not spool.exists() and not spool.parent.exists()
    (tmp_path / "plain").mkdir()
    assert main([*submit_args, "--spool", str(tmp_path / "plain")]) == 2
    assert "is not a spool" in capsys.readouterr().err
    assert main([*submit_args, "--spool", str(spool), "--create"]) == 0
    sid = capsys.readouterr().out.strip()
    assert (spool / "new" / sid).is_dir()


# --- review and history: a spool that is not there --------------------------------------


@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_review_list_of_a_missing_spool_is_an_error(
    tmp_path: Path, extra: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: `review list` of a mistyped spool said "nothing is held" and exited 0."""
    spool = tmp_path / "typo"
    code = main(["review", "list", "--spool", str(spool), *extra])
    out, err = capsys.readouterr()
    assert code == 2
    assert f"spool {spool} does not exist" in err
    assert out == ""
    assert not spool.exists()


@pytest.mark.parametrize(
    "action",
    [["show", SID], ["approve", SID], ["reject", SID, "--reason", "no"]],
    ids=["show", "approve", "reject"],
)
def test_review_actions_on_a_missing_spool_name_it(
    tmp_path: Path, action: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """`review show|approve|reject` of a missing spool say so, even with --repo given."""
    repo = make_repo(tmp_path / "repo")
    commit_files(repo, {"a": "a"}, "base")
    spool = tmp_path / "typo"
    for where in ([], ["--repo", str(repo)]):
        code = main(["review", *action, "--spool", str(spool), *where])
        assert code == 2
        assert f"spool {spool} does not exist" in capsys.readouterr().err
    assert not spool.exists()


def test_review_list_of_a_file_says_it_is_not_a_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A regular file given as the spool is named as such, not listed as an empty spool."""
    spool = tmp_path / "spool"
    spool.write_text("x")
    assert main(["review", "list", "--spool", str(spool)]) == 2
    assert f"spool {spool} is not a folder" in capsys.readouterr().err


@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_history_of_a_missing_spool_is_a_usage_error(
    tmp_path: Path, extra: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: `history --spool TYPO` exited 4 "registry unavailable"; now exit 2."""
    spool = tmp_path / "typo"
    code = main(["history", "--spool", str(spool), *extra])
    out, err = capsys.readouterr()
    assert code == 2
    assert f"spool {spool} does not exist" in err
    assert "registry" not in err and out == ""
    assert not spool.exists()


# --- init: the target is not changed by accident -----------------------------------------


@pytest.fixture
def prepared(tmp_path: Path) -> Path:
    """A repository with branches main and other, initialized for target main."""
    repo = declare_bare(make_repo(tmp_path / "repo"))
    commit_files(repo, {"a": "a"}, "base")
    git("branch", "other", cwd=repo)
    assert main(["init", "--repo", str(repo), "--target", "main"]) == 0
    return repo


def test_init_refuses_another_target(prepared: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Regression: init --target other silently retargeted a prepared repository."""
    capsys.readouterr()
    before = refs_and_config(prepared)
    code = main(["init", "--repo", str(prepared), "--target", "other"])
    err = capsys.readouterr().err
    assert code == 2
    assert "already prepared for target main, not other" in err
    assert "config integrator.target other" in err
    assert refs_and_config(prepared) == before
    assert git("config", "integrator.target", cwd=prepared) == "main"


@pytest.mark.parametrize("target", [[], ["--target", "main"]], ids=["default", "same"])
def test_init_again_with_the_same_target_changes_nothing(
    prepared: Path, target: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Re-running init with the target it already has stays idempotent."""
    capsys.readouterr()
    before = refs_and_config(prepared)
    assert main(["init", "--repo", str(prepared), *target]) == 0
    assert "nothing to do: already initialized" in capsys.readouterr().out
    assert refs_and_config(prepared) == before


def test_init_refused_for_another_policy_writes_no_config(
    prepared: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A re-init refused for a different policy checks before it writes: config stays as is."""
    git("config", "--unset", "core.fsync", cwd=prepared)  # an operator's own choice
    before = refs_and_config(prepared)
    policy = tmp_path / "policy.toml"
    text = git("cat-file", "blob", "refs/integrator/policy:policy.toml", cwd=prepared)
    policy.write_text(text.replace('migrations = "enforce"', 'migrations = "observe"'))
    assert main(["init", "--repo", str(prepared), "--policy", str(policy)]) == 2
    assert "a different policy is already set" in capsys.readouterr().err
    assert refs_and_config(prepared) == before


def test_deliberate_retarget_through_git_config(
    prepared: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The way the refusal names works: set integrator.target, then init creates its queue."""
    git("config", "integrator.target", "other", cwd=prepared)
    assert main(["init", "--repo", str(prepared)]) == 0
    queues = git("for-each-ref", "--format=%(refname)", "refs/integrator/queue", cwd=prepared)
    assert queues.split() == ["refs/integrator/queue/main", "refs/integrator/queue/other"]


# --- task claim: a task that is not in the inbox, and --json errors ------------------------


@pytest.fixture
def queue_repo(tmp_path: Path) -> Path:
    """A checkout with an initialized queue holding one cognitive task T1."""
    repo = make_repo(tmp_path / "repo")
    commit_files(repo, {"src/a.py": "a\n"}, "init")
    git("reset", "-q", "--hard", cwd=repo)
    queue = Queue.find(repo)
    queue.init()
    queue.add(task_file("T1"))
    return repo


def queue_state(repo: Path) -> dict[str, list[str]]:
    queue = Queue.find(repo)
    return {
        state: sorted(p.name for p in queue.folder(state).iterdir())
        for state in ("inbox", "claimed", "done")
    }


def claim_refs(repo: Path) -> list[str]:
    return git("for-each-ref", "--format=%(refname)", "refs/integrator/claims", cwd=repo).split()


def claim(repo: Path, *extra: str) -> int:
    return main(["task", "claim", "--repo", str(repo), "--agent", "bob", *extra])


def test_claim_of_an_unknown_task_says_no_such_task(
    queue_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: `task claim --task NOPE` printed "inbox:blocked" and exited 0."""
    before = queue_state(queue_repo)
    assert claim(queue_repo, "--task", "NOPE") == 2
    out, err = capsys.readouterr()
    assert "no such task NOPE" in err and str(queue_repo / ".agents") in err
    assert "inbox:" not in out
    assert queue_state(queue_repo) == before and claim_refs(queue_repo) == []


def test_claim_of_a_task_claimed_by_another_agent_names_it(
    queue_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`task claim --task T1` while alice holds T1 is refused (exit 1) naming alice."""
    assert Fleet(queue_repo).claim("alice", task_id="T1").assignment is not None
    before = queue_state(queue_repo)
    assert claim(queue_repo, "--task", "T1") == 1
    assert "task T1 is already claimed by alice" in capsys.readouterr().err
    assert queue_state(queue_repo) == before


def test_claim_of_a_done_task_says_it_is_done(
    queue_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`task claim --task T1` after T1 was completed says it is done (exit 2)."""
    fleet = Fleet(queue_repo)
    assert fleet.claim("alice", task_id="T1").assignment is not None
    fleet.complete("T1", agent="alice")
    assert claim(queue_repo, "--task", "T1") == 2
    assert "task T1 is already done" in capsys.readouterr().err


def test_claim_of_a_ready_task_by_id_still_works(
    queue_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A named task that is ready in the inbox is claimed as before."""
    assert claim(queue_repo, "--task", "T1", "--json") == 0
    assert json.loads(capsys.readouterr().out)["task"] == "T1"
    assert queue_state(queue_repo)["claimed"] == ["T1@bob.md"]


def test_claim_json_reports_a_workspace_error_as_a_document(
    queue_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: `task claim --json` printed only stderr text on WorkspaceConfigurationError."""
    Queue.find(queue_repo).add(task_file("CODE", ["src/**"]))
    before = queue_state(queue_repo)
    assert claim(queue_repo, "--task", "CODE", "--json") == 2
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert doc["claimed"] is None and doc["state"] == "error"
    assert doc["error"]["type"] == "WorkspaceConfigurationError"
    assert doc["error"]["exitCode"] == 2
    assert "agent bob has no workspace" in doc["error"]["message"]
    assert "agent bob has no workspace" in err
    assert queue_state(queue_repo) == before and claim_refs(queue_repo) == []


def test_claim_json_reports_an_unknown_task_as_a_document(
    queue_repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`task claim --json --task NOPE` prints the error document with the same exit code."""
    assert claim(queue_repo, "--task", "NOPE", "--json") == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["error"]["type"] == "UsageError" and doc["error"]["exitCode"] == 2
    assert "no such task NOPE" in doc["error"]["message"]


@pytest.mark.parametrize(
    "argv",
    [
        ["gate", "--contract", "/dev/zero", "--candidate", "HEAD"],
        [
            "submit",
            "--spool",
            "SPOOL",
            "--create",
            "--contract",
            "/dev/zero",
            "--candidate",
            "HEAD",
        ],
        ["contract", "expand", "--request", "/dev/zero"],
    ],
)
def test_an_endless_input_is_refused_unread(
    tmp_path: Path, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Every document a command reads is read up to a limit: a path naming a device that
    never ends (or stdin) is refused with exit 2, not read until memory runs out."""
    repo = make_repo(tmp_path / "repo")
    commit_files(repo, {"a": "a\n"}, "base")
    args = [a.replace("SPOOL", str(tmp_path / "spool")) for a in argv]
    assert main([*args, "--repo", str(repo)]) == 2
    assert "limit" in capsys.readouterr().err


def test_validation_details_must_be_a_small_json_document(tmp_path: Path) -> None:
    """`validation report --details` takes a JSON document of at most DETAILS_BYTES bytes."""
    from integrator.commands._common import read_input
    from integrator.errors import UsageError

    big = tmp_path / "big.json"
    big.write_bytes(b" " * (DETAILS_BYTES + 1))
    with pytest.raises(UsageError, match="limit"):
        read_input(str(big), DETAILS_BYTES)
    assert read_input(str(big), DETAILS_BYTES + 1) == b" " * (DETAILS_BYTES + 1)
