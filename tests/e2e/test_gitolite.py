"""Remote mode against a real gitolite over a real sshd on 127.0.0.1, one ssh key per
person: the gitolite.conf and the hook installs are the blocks of docs/remote.md, run as
they stand. Agents push their own branches and the submissions of tasks they hold; the
coordinator issues claims; only the integrator lands; every other push is refused, by
gitolite's rules or by `integrator server-hook` (identity GL_USER)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from integrator.documents.trailers import TRAILER_CANDIDATE
from tests.e2e import gitolite_server
from tests.e2e.gitolite_server import Gitolite
from tests.e2e.gitolite_setup import as_key, cli, configure, on_server, server_refs
from tests.gitutil import commit_files, git, make_repo

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


@dataclass
class Flow:
    """The setup of docs/remote.md done: main seeded by the integrator's key, the
    integrator's and the coordinator's mirrors made with init --remote, a contract per
    agent issued by the coordinator's key, agent-a's clone with its candidate."""

    server: Gitolite
    tmp: Path
    mirror: Path
    contracts: dict[str, Path]
    agent: Path
    candidate: str

    @property
    def product(self) -> str:
        return self.server.url("product")

    @property
    def intake(self) -> str:
        return self.server.url("product-intake")

    def refused(self, who: str, url: str, *refspecs: str) -> str:
        """A forced push from agent-a's clone with `who`'s key, which must fail: its stderr."""
        done = as_key(self.server, who, "push", "--porcelain", "--force", url, *refspecs,
                      cwd=self.agent)  # fmt: skip
        assert done.returncode != 0, (who, refspecs, done.stdout)
        return done.stderr


@pytest.fixture(scope="module")
def flow(server: Gitolite, tmp_path_factory: pytest.TempPathFactory) -> Flow:
    tmp = tmp_path_factory.mktemp("gitolite-flow")
    configure(server, tmp, PEOPLE)
    product = server.url("product")
    seed = make_repo(tmp / "seed")
    commit_files(seed, {"a/f.txt": "0\n", "b/f.txt": "0\n", "shared.txt": "x\n"}, "base")
    first = as_key(server, "integrator", "push", "-q", product, "HEAD:refs/heads/main", cwd=seed)
    assert first.returncode == 0, first.stderr
    mirror, coord = tmp / "mirror.git", tmp / "coord.git"
    for who, path in (("integrator", mirror), ("coordinator", coord)):
        done = cli(server, who, "init", "--repo", str(path), "--remote", product, cwd=tmp)
        assert done.returncode == 0, done.stderr
        assert "refs/integrator/queue/main" in server_refs(server, "product")
    contracts = {}
    for task, holder in (("a", "agent-a"), ("b", "agent-b")):
        contracts[task] = tmp / f"{task}.json"
        done = cli(server, "coordinator", "contract", "issue", "--repo", str(coord), "--task", task,
                   "--path", f"{task}/**", "--holder", holder, "--lease", "2h",
                   "-o", str(contracts[task]), cwd=tmp)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert f"refs/integrator/claims/{task}" in server_refs(server, "product")
    agent = tmp / "agent-a"
    done = as_key(server, "agent-a", "clone", "-q", product, str(agent), cwd=tmp)
    assert done.returncode == 0, done.stderr
    assert git("symbolic-ref", "HEAD", cwd=agent) == "refs/heads/main"
    candidate = commit_files(agent, {"a/f.txt": "agent a\n"}, "agent a's change")
    return Flow(server, tmp, mirror, contracts, agent, candidate)


def test_the_hook_keeps_authority_refs_to_the_integrators(flow: Flow) -> None:
    """The hook runs first (pre-receive, before gitolite's update hook): an agent's key moves
    no claim, not main, writes no verdict, with the pusher named from GL_USER."""
    before = server_refs(flow.server, "product")
    for url, ref in ((flow.product, "refs/integrator/claims/a"), (flow.product, "refs/heads/main"),
                     (flow.intake, "refs/integrator/verdicts/a/x")):  # fmt: skip
        said = flow.refused("agent-a", url, f"HEAD:{ref}")
        assert f"integrator: refused {ref}: only integrators may" in said, said
        assert "pusher 'agent-a' (GL_USER) is not in integrator.hook.allow" in said
    assert server_refs(flow.server, "product") == before


def test_gitolite_keeps_each_key_to_its_refs(flow: Flow) -> None:
    """gitolite's rules refuse what the hook lets through: another agent's branch, and the
    coordinator (an integrator to the hook, for claims) moving main or the queue; an agent's
    own branch is accepted."""
    before = server_refs(flow.server, "product")
    said = flow.refused("agent-a", flow.product, "HEAD:refs/heads/agents/agent-b/work")
    assert "W refs/heads/agents/agent-b/work product agent-a DENIED by fallthru" in said, said
    for ref in ("refs/heads/main", "refs/integrator/queue/main"):
        said = flow.refused("coordinator", flow.product, f"HEAD:{ref}")
        assert f"W {ref} product coordinator DENIED by fallthru" in said, said
    assert server_refs(flow.server, "product") == before
    own = as_key(flow.server, "agent-a", "push", "-q", flow.product,
                 "HEAD:refs/heads/agents/agent-a/work", cwd=flow.agent)  # fmt: skip
    assert own.returncode == 0, own.stderr
    assert server_refs(flow.server, "product")["refs/heads/agents/agent-a/work"] == flow.candidate


# (repository, key, permission, ref, allowed) as gitolite's own rules answer them: the
# second wall behind the hook, asked with `gitolite access` on the server.
ACCESS = [
    ("product", "agent-a", "W", "refs/integrator/claims/a", False),
    ("product", "agent-a", "W", "refs/integrator/claims-index", False),
    ("product", "agent-a", "W", "refs/integrator/policy", False),
    ("product", "agent-a", "W", "refs/integrator/queue/main", False),
    ("product", "agent-a", "W", "refs/heads/main", False),
    ("product", "agent-a", "W", "refs/integrator/submit/a/x", False),
    ("product", "agent-a", "+", "refs/heads/agents/agent-a/work", True),
    ("product", "agent-a", "W", "refs/heads/agents/agent-b/work", False),
    ("product", "coordinator", "W", "refs/integrator/claims/a", True),
    ("product", "coordinator", "+", "refs/integrator/claims/a", False),  # claims only grow
    ("product", "coordinator", "W", "refs/integrator/claims-index", True),
    ("product", "coordinator", "W", "refs/integrator/policy", False),
    ("product", "coordinator", "W", "refs/heads/main", False),
    ("product", "integrator", "+", "refs/heads/main", True),
    ("product-intake", "agent-a", "W", "refs/integrator/submit/a/x", True),
    ("product-intake", "agent-a", "+", "refs/integrator/submit/a/x", False),
    ("product-intake", "agent-a", "W", "refs/integrator/verdicts/a/x", False),
    ("product-intake", "coordinator", "W", "refs/integrator/submit/a/x", False),
    ("product-intake", "integrator", "+", "refs/integrator/submit/a/x", True),
]


def test_gitolite_rules_alone_refuse_every_authority_ref_to_agents(flow: Flow) -> None:
    """Behind the hook, gitolite's rules (the documented gitolite.conf) refuse agents every
    authority ref and keep the coordinator to growing claims."""
    for repo, who, perm, ref, allowed in ACCESS:
        done = flow.server.as_account(
            f"gitolite access -q {repo} {who} '{perm}' {ref}", check=False
        )
        assert (done.returncode == 0) == allowed, (repo, who, perm, ref, done.stdout, done.stderr)


def test_only_the_holder_submits_and_the_integrator_lands(flow: Flow) -> None:
    """agent-a with agent-b's contract and attempt key is refused (the lease holder is not
    the pusher), and so is its own contract under task b's ref; its own submission goes in,
    the integrator's `serve` lands it on main and answers on the intake."""
    server, agent = flow.server, flow.agent
    stolen = cli(server, "agent-a", "submit", "--intake", flow.intake, "--contract",
                 str(flow.contracts["b"]), "--candidate", "HEAD", "--repo", str(agent),
                 cwd=agent)  # fmt: skip
    assert stolen.returncode != 0
    assert "pusher 'agent-a' does not hold the contract's lease" in stolen.stderr, stolen.stderr
    assert "'agent-b'" in stolen.stderr
    document = json.dumps({"contract": json.loads(flow.contracts["a"].read_text())})
    blob = git("hash-object", "-w", "--stdin", cwd=agent, input=document.encode())
    tree = git("mktree", cwd=agent, input=f"100644 blob {blob}\tsubmission.json\n".encode())
    forged = git("commit-tree", tree, "-p", flow.candidate, "-m", "forged", cwd=agent)
    said = flow.refused(
        "agent-a", flow.intake, f"{forged}:{SUBMITS}b/20260101T000000000000Z-0123abcd"
    )
    assert "not of the task its ref names" in said, said
    assert not server_refs(server, "product-intake", SUBMITS)

    done = cli(server, "agent-a", "submit", "--intake", flow.intake, "--contract",
               str(flow.contracts["a"]), "--candidate", "HEAD", "--repo", str(agent),
               cwd=agent)  # fmt: skip
    assert done.returncode == 0, done.stderr
    sid = done.stdout.strip()
    assert list(server_refs(server, "product-intake", SUBMITS)) == [f"{SUBMITS}a/{sid}"]
    served = cli(server, "integrator", "serve", "--repo", str(flow.mirror), "--spool",
                 str(flow.tmp / "spool"), "--intake", flow.intake, "--once", cwd=flow.tmp)  # fmt: skip
    assert served.returncode == 0, served.stderr
    assert on_server(server, "product", "show", "main:a/f.txt") == "agent a"
    trailers = on_server(server, "product", "log", "-1",
                         f"--format=%(trailers:key={TRAILER_CANDIDATE},valueonly)", "main")  # fmt: skip
    assert trailers.strip() == flow.candidate  # the landing names agent a's candidate
    assert list(server_refs(server, "product-intake", VERDICTS)) == [f"{VERDICTS}a/{sid}"]
    assert not server_refs(server, "product-intake", SUBMITS)
    status = cli(server, "agent-a", "status", "--intake", flow.intake, "--submission", sid,
                 "--task", "a", "--repo", str(agent), cwd=agent)  # fmt: skip
    assert status.returncode == 0, status.stderr + status.stdout
