"""The identity defences together, on real servers: a coordinator, two integrator hosts,
two honest agents and an attacker with a contract of its own, on a plain `git daemon` with
no hook (anyone may push any ref: the keys are the only defence) and on lighttpd + `git
http-backend` with basic auth and integrator's server hook (each party pushes as its own
user). Every forgery is refused by the server or detected by integrator, every honest change
lands once, and nothing the attacker does not own reaches the target
(docs/security.md, "Identity", "Verdict keys", "Authority keys")."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from integrator.documents.attempt_key import new_key
from integrator.documents.authority_key import new_authority_key
from integrator.documents.verdict_key import new_verdict_key
from integrator.store.spool import new_id
from tests.attack_world import (
    QUEUE,
    AttackWorld,
    daemon_server,
    forged_claim,
    forged_verdict,
    http_server,
    push,
)
from tests.gitutil import commit_files, git
from tests.gitutil import run_integrator_raw as cli
from tests.intake_pushes import submission_commit, submission_document

SUBMIT, VERDICTS = "refs/integrator/submit/", "refs/integrator/verdicts/"
IN_USE = "the submission id is already in use by another submission"
FILES = {"a/f.txt": "a\n", "b/f.txt": "b\n", "x/f.txt": "x\n", "shared/x": "shared\n"}


@pytest.fixture(params=["daemon", "http"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[AttackWorld]:
    start = daemon_server if request.param == "daemon" else http_server
    with start(tmp_path / "srv") as server:
        made = AttackWorld(tmp_path, server, FILES)
        try:
            yield made
        finally:
            made.stop()


def _key(path: Path, data: bytes) -> tuple[Path, str]:
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    path.chmod(0o600)
    return path, json.loads(data)["public"]


NOT_ALLOWED = "pusher 'attacker' (REMOTE_USER) is not in integrator.hook.allow"
NOT_HOLDER = "pusher 'attacker' does not hold the contract's lease (its holder is 'agent-a')"


def _refused(world: AttackWorld, repo: Path, url: str, ref: str, new: str,
             why: str = NOT_ALLOWED) -> None:  # fmt: skip
    """On the guarded server the attacker's push of `ref` is refused, saying `why`, and
    moves nothing."""
    server = world.canon if "/canon.git" in url else world.intake_repo
    before = world.refs(server, ref)
    done = push(repo, url, f"{new}:{ref}")
    assert done.returncode != 0 and "pre-receive hook declined" in done.stdout, done
    assert f"refused {ref}: " in done.stderr and why in done.stderr, done.stderr
    assert world.refs(server, ref) == before


@dataclass
class Team:
    coordinator: Path
    hosts: dict[str, Path]  # host-a, host-b
    verdict_keys: dict[str, str]  # host → the public half of its verdict key
    contracts: dict[str, Path]  # task → contract file (its attempt key beside it)


def _team(world: AttackWorld, tmp_path: Path) -> Team:
    """The coordinator and two integrator hosts sharing one authority key, each host with
    a verdict key of its own that the coordinator trusts; t-a, t-b and t-x issued to
    agent-a, agent-b and the attacker."""
    authority, _ = _key(tmp_path / "keys" / "authority.key", new_authority_key().to_bytes())
    verdict = {h: _key(tmp_path / "keys" / f"verdict-{h}.key", new_verdict_key().to_bytes())
               for h in ("host-a", "host-b")}  # fmt: skip
    trust = [a for _f, public in verdict.values() for a in ("--trust-verdict-key", public)]
    coordinator = world.mirror("coordinator", "coordinator", "--authority-key", str(authority),
                               *trust)  # fmt: skip
    hosts = {
        h: world.mirror(h, "integrator", "--authority-key", str(authority), "--verdict-key", str(f))
        for h, (f, _p) in verdict.items()
    }
    holders = {"t-a": "agent-a", "t-b": "agent-b", "t-x": "attacker"}
    contracts = {t: world.issue(coordinator, t, [f"{t[-1]}/**"], who) for t, who in holders.items()}
    return Team(coordinator, hosts, {h: p for h, (_f, p) in verdict.items()}, contracts)


def _reuse(world: AttackWorld, x: Path, contract: Path, sid: str, files: dict[str, str]) -> str:
    """Push the attacker's own candidate of `files`, under its own contract and signed with
    its own key, as t-x/`sid` (the id of another's submission): the candidate."""
    head = commit_files(x, files, "attacker")
    document = submission_document(json.loads(contract.read_text()), head,
                                   key=Path(f"{contract}.key"), sid=sid)  # fmt: skip
    reused = submission_commit(x, document, head)
    assert push(x, world.intake("attacker"), f"{reused}:{SUBMIT}t-x/{sid}").returncode == 0
    return head


@dataclass
class Scene:
    """The scenario's parties: the world, the team, and each agent's clone and head."""

    world: AttackWorld
    team: Team
    a: Path
    a_head: str
    b: Path
    b_head: str
    x: Path
    base: str  # the contracts' base (the queue before anything landed)

    @property
    def guarded(self) -> bool:
        return self.world.server.guarded

    def refused(self, url: str, ref: str, new: str, why: str = NOT_ALLOWED) -> None:
        _refused(self.world, self.x, url, ref, new, why)


def _forge_verdict(scene: Scene, sid_b: str) -> None:
    """4. A forged ACCEPTED verdict for b's pending submission, before any daemon decides:
    refused by the hook, or not believed by b (its clone trusts the hosts' verdict keys)."""
    world, x = scene.world, scene.x
    ref, forged = f"{VERDICTS}t-b/{sid_b}", forged_verdict(x, scene.b_head, "t-b")
    if scene.guarded:
        scene.refused(world.intake("attacker"), ref, forged)
        return
    assert push(x, world.intake("attacker"), f"{forged}:{ref}").returncode == 0
    code, out = world.status("agent-b", scene.b, "t-b", sid_b)
    assert code == 4 and "not believed" in out and "not signed" in out, out


def _steal_contract(scene: Scene, tmp_path: Path) -> dict[str, str]:
    """2. A candidate under a's contract, read from a's folder: signed with the attacker's
    own key, and not signed at all. Refused by the hook (the attacker does not hold the
    lease), or submitted: {id: the reason it must be rejected with}."""
    world, x, contracts = scene.world, scene.x, scene.team.contracts
    sid = new_id()  # after a's: a's id stays its task's oldest
    stolen = tmp_path / "stolen.json"
    stolen.write_bytes(contracts["t-a"].read_bytes())
    evil = commit_files(x, {"a/f.txt": "not agent a's\n"}, "attacker")
    document = submission_document(json.loads(stolen.read_text()), evil,
                                   key=Path(f"{contracts['t-x']}.key"), sid=sid)  # fmt: skip
    signed_own = submission_commit(x, document, evil)
    if scene.guarded:
        scene.refused(world.intake("attacker"), f"{SUBMIT}t-a/{sid}", signed_own, NOT_HOLDER)
        done = cli("submit", "--intake", world.intake("attacker"), "--contract", str(stolen),
                   "--candidate", "HEAD", "--repo", str(x))  # fmt: skip
        assert done.returncode != 0 and NOT_HOLDER.encode() in done.stderr, done.stderr
        return {}
    assert push(x, world.intake("attacker"), f"{signed_own}:{SUBMIT}t-a/{sid}").returncode == 0
    return {
        sid: "signature is not by the attempt key the claim of task 't-a'",
        world.submit("attacker", x, stolen): "the submission is not signed",
    }


def _round_one(scene: Scene, sid_a: str, sid_b: str, sid_out: str, stolen: dict[str, str]) -> None:
    """host-a decides: a and b land, and every submission is answered at its own ref."""
    world, x = scene.world, scene.x
    world.serve_once(scene.team.hosts["host-a"])
    assert world.landed() == [scene.a_head, scene.b_head]
    for task, sid, agent, user in (("t-a", sid_a, scene.a, "agent-a"),
                                   ("t-b", sid_b, scene.b, "agent-b")):  # fmt: skip
        code, out = world.status(user, agent, task, sid)
        assert code == 0 and '"ACCEPTED"' in out, out
    signature = git("show", f"{VERDICTS}t-b/{sid_b}:verdict.sig", cwd=world.intake_repo)
    assert json.loads(signature)["key"] == scene.team.verdict_keys["host-a"]  # not the forgery
    assert world.verdict("t-a", sid_a)["candidate"] == scene.a_head
    code, out = world.status("attacker", x, "t-x", sid_a)  # 1. the reused id
    assert code == 2 and IN_USE in out, out
    assert world.verdict("t-x", sid_a)["submission"] == sid_a
    for sid, why in stolen.items():  # 2.
        code, out = world.status("attacker", x, "t-a", sid)
        assert code == 2 and why in out, out
    code, out = world.status("attacker", x, "t-x", sid_out)  # 6.
    assert code == 1 and '"FENCED"' in out and "PATH_NOT_OWNED" in out and "shared/x" in out, out


def _rewrite_claim(scene: Scene, tmp_path: Path) -> None:
    """3. b's consumed claim made live again, naming the attacker's attempt key, and a
    candidate under b's contract signed with that key: refused by the hook, or FENCED
    CLAIM_REWRITTEN by host-b (its first sight of the claim since b landed), and the
    coordinator builds nothing on it."""
    world, x, team = scene.world, scene.x, scene.team
    ref = "refs/integrator/claims/t-b"
    claim = json.loads(git("show", f"{ref}:claim.json", cwd=world.canon))
    doc = json.loads(team.contracts["t-b"].read_text())
    mine = new_key("t-b", doc["attemptId"], doc["ownershipGeneration"], claim["contractDigest"])
    rewritten = forged_claim(x, world.url("attacker"), "t-b", mine.public)
    if scene.guarded:
        scene.refused(world.url("attacker"), ref, rewritten)
        return
    assert push(x, world.url("attacker"), f"{rewritten}:{ref}").returncode == 0
    git("reset", "-q", "--hard", scene.base, cwd=x)
    commit_files(x, {"b/f.txt": "not agent b's\n"}, "attacker")
    stolen = tmp_path / "stolen-b.json"
    stolen.write_bytes(team.contracts["t-b"].read_bytes())
    _key(Path(f"{stolen}.key"), mine.to_bytes())
    sid = world.submit("attacker", x, stolen)
    world.serve_once(team.hosts["host-b"])
    code, out = world.status("attacker", x, "t-b", sid)
    assert code == 1 and "CLAIM_REWRITTEN" in out and "not signed" in out, out
    assert world.landed() == [scene.a_head, scene.b_head]
    done = cli("contract", "renew", "--repo", str(team.coordinator), "--task", "t-b",
               "--until", "3h")  # fmt: skip
    assert done.returncode != 0, done.stderr.decode()
    assert b"not a claim a trusted authority key signed" in done.stderr


def _force_queue_back(scene: Scene) -> str:
    """5. The queue forced back after the honest landings: refused by the hook, or every
    host that saw it further on stops landing (the attacker's own pending change waits, the
    target does not move) until an operator restores it; then it lands. Its candidate."""
    world, x = scene.world, scene.x
    landed = git("rev-parse", QUEUE, cwd=world.canon)
    git("reset", "-q", "--hard", scene.base, cwd=x)  # on its contract's base
    x_head = commit_files(x, {"x/f.txt": "the attacker's own\n"}, "attacker")
    if scene.guarded:
        scene.refused(world.url("attacker"), QUEUE, scene.base)
    else:
        assert push(x, world.url("attacker"), f"{scene.base}:{QUEUE}").returncode == 0
    target = git("rev-parse", "refs/heads/main", cwd=world.canon)
    sid = world.submit("attacker", x, scene.team.contracts["t-x"])
    if not scene.guarded:
        for host in scene.team.hosts.values():  # both saw the queue at `landed`
            log = world.serve_once(host, expect=4)
            assert "the spool was not drained" in log and "forced it back" in log, log
            assert f"{SUBMIT}t-x/{sid}" in world.refs(world.intake_repo, SUBMIT)
            assert git("rev-parse", "refs/heads/main", cwd=world.canon) == target
        git("update-ref", QUEUE, landed, cwd=world.canon)  # an operator restores it
    world.serve_once(scene.team.hosts["host-b"])
    code, out = world.status("attacker", x, "t-x", sid)
    assert code == 0 and '"ACCEPTED"' in out, out
    return x_head


def test_an_attacker_lands_nothing_it_does_not_own(world: AttackWorld, tmp_path: Path) -> None:
    """Forgeries 1–6 of the attacker against a and b's honest submissions; at the end
    every honest change landed once and of the attacker's only what its contract owns."""
    team = _team(world, tmp_path)
    a, a_head = world.agent("agent-a", {"a/f.txt": "agent a\n"})
    b, b_head = world.agent("agent-b", {"b/f.txt": "agent b\n"})
    x, _ = world.agent("attacker", {"x/f.txt": "attacker, outside\n", "shared/x": "mine\n"})
    base = git("rev-parse", QUEUE, cwd=world.canon)
    scene = Scene(world, team, a, a_head, b, b_head, x, base)
    sid_a = world.submit("agent-a", a, team.contracts["t-a"])
    sid_b = world.submit("agent-b", b, team.contracts["t-b"])

    _forge_verdict(scene, sid_b)
    sid_out = world.submit("attacker", x, team.contracts["t-x"])  # 6. shared/x is not x/**
    git("reset", "-q", "--hard", base, cwd=x)
    _reuse(world, x, team.contracts["t-x"], sid_a, {"x/f.txt": "the attacker's, a's id\n"})  # 1.
    stolen = _steal_contract(scene, tmp_path)
    _round_one(scene, sid_a, sid_b, sid_out, stolen)
    _rewrite_claim(scene, tmp_path)
    x_head = _force_queue_back(scene)

    assert world.landed() == [a_head, b_head, x_head]
    main = git("rev-parse", "refs/heads/main", cwd=world.canon)
    tree = {p: git("show", f"{main}:{p}", cwd=world.canon) for p in FILES}
    assert tree == {"a/f.txt": "agent a", "b/f.txt": "agent b", "x/f.txt": "the attacker's own",
                    "shared/x": "shared"}  # fmt: skip
    assert world.refs(world.intake_repo, SUBMIT) == {}


@pytest.mark.parametrize("world", ["daemon"], indirect=True)
def test_an_id_the_attacker_gets_taken_first_costs_its_holder_one_submission(
    world: AttackWorld, tmp_path: Path
) -> None:
    """On an intake no hook guards, the attacker can put its reuse of a's pending id ahead
    of a's own ref in the poll's order (docs/remote.md, "Intake: what is keyed by what"): a
    junk ref under t-a with an earlier id takes t-a's first place in the round, and its own
    t-x/<a's id> is taken. a's ref is then answered "in use" at its own verdict ref — never
    with the attacker's verdict — and a's next submission lands; the attacker gets nothing
    but what its own contract owns."""
    team = _team(world, tmp_path)
    a, a_head = world.agent("agent-a", {"a/f.txt": "agent a\n"})
    x, junk = world.agent("attacker", {"a/f.txt": "not agent a's\n"})
    sid_a = world.submit("agent-a", a, team.contracts["t-a"])
    early = new_id(datetime(2026, 1, 1, tzinfo=UTC))  # the attacker chooses its ids
    document = submission_document(json.loads(team.contracts["t-a"].read_text()), junk)
    junk_ref = f"{submission_commit(x, document, junk)}:{SUBMIT}t-a/{early}"
    assert push(x, world.intake("attacker"), junk_ref).returncode == 0
    git("reset", "-q", "--hard", "HEAD~1", cwd=x)
    x_head = _reuse(world, x, team.contracts["t-x"], sid_a, {"x/f.txt": "the attacker's own\n"})

    world.serve_once(team.hosts["host-a"])
    code, out = world.status("agent-a", a, "t-a", sid_a)
    assert code == 2 and IN_USE in out and x_head not in out, out
    code, out = world.status("attacker", x, "t-a", early)
    assert code == 2 and "the submission is not signed" in out, out
    assert world.verdict("t-x", sid_a)["candidate"] == x_head  # its own contract's change
    assert world.landed() == [x_head]

    again = world.submit("agent-a", a, team.contracts["t-a"])
    world.serve_once(team.hosts["host-b"])
    code, out = world.status("agent-a", a, "t-a", again)
    assert code == 0 and a_head in out, out
    assert world.landed() == [x_head, a_head]
    main = git("rev-parse", "refs/heads/main", cwd=world.canon)
    tree = {p: git("show", f"{main}:{p}", cwd=world.canon) for p in FILES}
    assert tree == {"a/f.txt": "agent a", "b/f.txt": "b", "x/f.txt": "the attacker's own",
                    "shared/x": "shared"}  # fmt: skip
