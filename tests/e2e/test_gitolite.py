"""Remote mode against a real gitolite over a real sshd on 127.0.0.1, one ssh key per
person: the gitolite.conf and the hook installs are the blocks of docs/remote.md, run as
they stand. Agents push their own branches and the submissions of tasks they hold; the
coordinator issues claims; only the integrator lands; every other push is refused, by
gitolite's rules or by `integrator server-hook` (identity GL_USER)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from integrator.documents.trailers import TRAILER_CANDIDATE
from tests.e2e import gitolite_server
from tests.e2e.gitolite_server import Gitolite, doc_block
from tests.gitutil import GIT_ENV, commit_files, git, make_repo
from tests.gitutil import run_integrator as integrator

pytestmark = pytest.mark.e2e

PEOPLE = ["integrator", "coordinator", "agent-a", "agent-b"]
SUBMITS = "refs/integrator/submit/"
VERDICTS = "refs/integrator/verdicts/"


@pytest.fixture(scope="module")
def server() -> Iterator[Gitolite]:
    reason = gitolite_server.missing()
    if reason:
        pytest.skip(reason)
    yield from gitolite_server.start(PEOPLE)


def as_key(server: Gitolite, who: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`git args` with `who`'s ssh key (no check)."""
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=False,
        env={**os.environ, **GIT_ENV, **server.env(who), "GIT_TERMINAL_PROMPT": "0"},
    )  # fmt: skip


def cli(server: Gitolite, who: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return integrator(*args, cwd=cwd, env=server.env(who))


def on_server(server: Gitolite, repo: str, *args: str) -> str:
    """git in the server's repository (named by --git-dir: it belongs to another account)."""
    path = server.home / "repositories" / f"{repo}.git"
    return git("--git-dir", str(path), *args, cwd=path)


def server_refs(server: Gitolite, repo: str, prefix: str = "refs/") -> dict[str, str]:
    out = on_server(server, repo, "for-each-ref", "--format=%(refname) %(objectname)", prefix)
    return dict(line.split(" ", 1) for line in out.splitlines() if line)  # type: ignore[misc]


def configure(server: Gitolite, work: Path) -> None:
    """Push the documented gitolite.conf and every key through gitolite-admin, then run the
    documented hook installs on the server as the gitolite account."""
    admin = work / "gitolite-admin"
    done = as_key(server, "admin", "clone", "-q", server.url("gitolite-admin"), str(admin),
                  cwd=work)  # fmt: skip
    assert done.returncode == 0, done.stderr
    (admin / "conf" / "gitolite.conf").write_text(
        doc_block("remote.md", "gitolite.conf (tests/e2e/test_gitolite.py pushes exactly this)")
    )
    for who in PEOPLE:
        (admin / "keydir" / f"{who}.pub").write_text(
            server.keys[who].with_suffix(".pub").read_text()
        )
    git("add", "-A", cwd=admin)
    git("commit", "-qm", "integrator's repositories and keys", cwd=admin)
    pushed = as_key(server, "admin", "push", "-q", "origin", "HEAD", cwd=admin)
    assert pushed.returncode == 0, pushed.stderr
    head = (server.home / "repositories" / "product.git" / "HEAD").read_text()
    assert head == "ref: refs/heads/master\n"  # the trap the hook must not fall into
    hooks = doc_block(
        "remote.md", "gitolite hooks (tests/e2e/test_gitolite.py runs exactly these lines)"
    )
    server.as_account(hooks)
    for repo in ("product", "product-intake"):
        assert on_server(server, repo, "config", "--get-all", "integrator.target") == "main"


def test_gitolite_keys_claims_intake_and_landing(server: Gitolite, tmp_path: Path) -> None:
    """The whole remote flow through gitolite: init --remote, claims by the coordinator's
    key, a submission by the holder's key, the landing by the integrator's; and every push
    a key may not make is refused, by gitolite or by the hook, with nothing moved."""
    configure(server, tmp_path)
    product, intake = server.url("product"), server.url("product-intake")
    seed = make_repo(tmp_path / "seed")
    commit_files(seed, {"a/f.txt": "0\n", "b/f.txt": "0\n", "shared.txt": "x\n"}, "base")
    first = as_key(server, "integrator", "push", "-q", product, "HEAD:refs/heads/main", cwd=seed)
    assert first.returncode == 0, first.stderr
    # An agent's key cannot move main, even as the first push of the branch.
    mirror, coord = tmp_path / "mirror.git", tmp_path / "coord.git"
    done = cli(
        server, "integrator", "init", "--repo", str(mirror), "--remote", product, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "refs/integrator/queue/main" in server_refs(server, "product")
    done = cli(
        server, "coordinator", "init", "--repo", str(coord), "--remote", product, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    contracts = {}
    for task, holder in (("a", "agent-a"), ("b", "agent-b")):
        contracts[task] = tmp_path / f"{task}.json"
        done = cli(server, "coordinator", "contract", "issue", "--repo", str(coord), "--task", task,
                   "--path", f"{task}/**", "--holder", holder, "--lease", "2h",
                   "-o", str(contracts[task]), cwd=tmp_path)  # fmt: skip
        assert done.returncode == 0, done.stderr
    assert {"refs/integrator/claims/a", "refs/integrator/claims/b"} <= set(
        server_refs(server, "product")
    )

    agent = tmp_path / "agent-a"
    done = as_key(server, "agent-a", "clone", "-q", product, str(agent), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert git("symbolic-ref", "HEAD", cwd=agent) == "refs/heads/main"
    commit_files(agent, {"a/f.txt": "agent a\n"}, "agent a's change")
    candidate = git("rev-parse", "HEAD", cwd=agent)
    before = server_refs(server, "product")

    def refused(who: str, url: str, *refspecs: str) -> str:
        done = as_key(server, who, "push", "--porcelain", "--force", url, *refspecs, cwd=agent)
        assert done.returncode != 0, (who, refspecs, done.stdout)
        return done.stderr

    # The hook runs first (pre-receive, before gitolite's update hook): an agent's key
    # moves no authority ref, on either repository.
    for url, ref in ((product, "refs/integrator/claims/a"), (product, "refs/heads/main"),
                     (intake, "refs/integrator/verdicts/a/x")):  # fmt: skip
        said = refused("agent-a", url, f"HEAD:{ref}")
        assert f"integrator: refused {ref}: only integrators may" in said, said
        assert "pusher 'agent-a' (GL_USER) is not in integrator.hook.allow" in said
    # gitolite's rules: what the hook lets through but a key may still not write.
    said = refused("agent-a", product, "HEAD:refs/heads/agents/agent-b/work")
    assert "W refs/heads/agents/agent-b/work product agent-a DENIED by fallthru" in said, said
    assert "DENIED by fallthru" in refused("coordinator", product, "HEAD:refs/heads/main")
    assert "DENIED by fallthru" in refused(
        "coordinator", product, "HEAD:refs/integrator/queue/main"
    )
    assert server_refs(server, "product") == before
    own = as_key(
        server, "agent-a", "push", "-q", product, "HEAD:refs/heads/agents/agent-a/work", cwd=agent
    )
    assert own.returncode == 0, own.stderr

    # The hook: agent-a, holding agent-b's contract and attempt key, cannot submit under it.
    stolen = cli(server, "agent-a", "submit", "--intake", intake, "--contract", str(contracts["b"]),
                 "--candidate", "HEAD", "--repo", str(agent), cwd=agent)  # fmt: skip
    assert stolen.returncode != 0
    assert "does not hold the contract's lease" in stolen.stderr, stolen.stderr
    assert "pusher 'agent-a' does not hold" in stolen.stderr and "'agent-b'" in stolen.stderr
    # Its own contract, pushed under task b's name, is refused as well.
    submission = git("rev-parse", "HEAD", cwd=agent)
    document = json.dumps({"contract": json.loads(contracts["a"].read_text())})
    blob = git("hash-object", "-w", "--stdin", cwd=agent, input=document.encode())
    tree = git("mktree", cwd=agent, input=f"100644 blob {blob}\tsubmission.json\n".encode())
    forged = git("commit-tree", tree, "-p", submission, "-m", "forged", cwd=agent)
    said = refused("agent-a", intake, f"{forged}:{SUBMITS}b/20260101T000000000000Z-0123abcd")
    assert "not of the task its ref names" in said
    assert not server_refs(server, "product-intake", SUBMITS)

    # The holder's own submission goes in; the integrator lands it and answers on the intake.
    sid = cli(server, "agent-a", "submit", "--intake", intake, "--contract", str(contracts["a"]),
              "--candidate", "HEAD", "--repo", str(agent), cwd=agent)  # fmt: skip
    assert sid.returncode == 0, sid.stderr
    assert list(server_refs(server, "product-intake", SUBMITS)) == [
        f"{SUBMITS}a/{sid.stdout.strip()}"
    ]
    served = cli(server, "integrator", "serve", "--repo", str(mirror), "--spool", str(tmp_path / "spool"),
                 "--intake", intake, "--once", cwd=tmp_path)  # fmt: skip
    assert served.returncode == 0, served.stderr
    after = server_refs(server, "product")
    assert on_server(server, "product", "show", f"{after['refs/heads/main']}:a/f.txt") == "agent a"
    trailers = on_server(server, "product", "log", "-1",
                         f"--format=%(trailers:key={TRAILER_CANDIDATE},valueonly)", "main")  # fmt: skip
    assert trailers.strip() == candidate  # the landing names agent a's candidate
    verdicts = server_refs(server, "product-intake", VERDICTS)
    assert list(verdicts) == [f"{VERDICTS}a/{sid.stdout.strip()}"]
    status = cli(server, "agent-a", "status", "--intake", intake, "--submission", sid.stdout.strip(),
                 "--task", "a", "--repo", str(agent), cwd=agent)  # fmt: skip
    assert status.returncode == 0, status.stderr + status.stdout
    assert not server_refs(server, "product-intake", SUBMITS)
