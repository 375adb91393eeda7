"""A claim forged on a server that cannot guard its refs (a plain `git daemon` on 127.0.0.1,
no hook: any writer may push any ref) is refused by a mirror that trusts authority keys —
even a mirror made after the forgery, which has nothing earlier to compare it with."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from integrator.documents.attempt_key import new_key
from integrator.documents.authority_key import parse_authority_key
from integrator.plumbing.git import open_repo
from tests.daemon.test_remote import _candidate
from tests.gitutil import git
from tests.gitutil import run_integrator_raw as cli
from tests.remote_world import RemoteWorld, remote

__all__ = ["remote"]  # the fixture


def _hash(agent: Path, data: bytes) -> str:
    return subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=agent, input=data,
                          capture_output=True, check=True).stdout.decode().strip()  # fmt: skip


def _forge_claim(agent: Path, url: str, task: str, public: str) -> None:
    """Give the live claim of `task` a descendant naming the attacker's attempt key (the
    contract unchanged): what any writer of an unguarded server can push."""
    ref = f"refs/integrator/claims/{task}"
    git("fetch", "-q", url, f"+{ref}:{ref}", cwd=agent)
    state = json.loads(git("show", f"{ref}:claim.json", cwd=agent))
    state["attemptKey"] = public
    contract = git("rev-parse", f"{ref}:contract.json", cwd=agent)
    claim = _hash(agent, json.dumps(state, indent=2).encode() + b"\n")
    tree = git("mktree", cwd=agent, input=(f"100644 blob {claim}\tclaim.json\n"
               f"100644 blob {contract}\tcontract.json\n").encode())  # fmt: skip
    forged = git("commit-tree", tree, "-p", ref, "-m", f"renew: {task}", cwd=agent)
    git("push", "-q", "--force", url, f"{forged}:{ref}", cwd=agent)


def test_a_forged_claim_is_refused_by_a_mirror_made_after_it(
    remote: RemoteWorld, tmp_path: Path
) -> None:
    key_file = tmp_path / "keys" / "authority.key"
    key_file.parent.mkdir()
    coordinator = tmp_path / "coordinator.git"
    done = cli("init", "--repo", str(coordinator), "--remote", remote.url, "--authority-key",
               str(key_file))  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    public = parse_authority_key(key_file.read_bytes()).public
    contract = tmp_path / "c0.json"
    doc = remote.issue(coordinator, "t0", ["t0/**"], contract)

    # The attacker reads the victim's contract, makes an attempt key of its own, rewrites
    # the claim to name it, and submits a candidate signed with it.
    attacker = _candidate(remote, 0, {"t0/f.txt": "the attacker's\n"})
    stolen = tmp_path / "stolen.json"
    stolen.write_bytes(contract.read_bytes())
    digest = json.loads(git("show", "refs/integrator/claims/t0:claim.json", cwd=coordinator))[
        "contractDigest"
    ]
    key = new_key("t0", doc["attemptId"], doc["ownershipGeneration"], digest)
    Path(f"{stolen}.key").write_bytes(key.to_bytes())
    Path(f"{stolen}.key").chmod(0o600)
    _forge_claim(attacker, remote.url, "t0", key.public)
    done = cli("submit", "--intake", remote.intake, "--contract", str(stolen), "--candidate",
               "HEAD", "--repo", str(attacker))  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    sid = done.stdout.decode().split()[-1]
    target = git("rev-parse", "refs/heads/main", cwd=remote.server.root / "canon.git")

    # A host prepared only now, sharing the team's key: it first sees the forged claim.
    lander = tmp_path / "host-a.git"
    done = cli("init", "--repo", str(lander), "--remote", remote.url, "--authority-key",
               str(key_file))  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    assert public in str(open_repo(lander).config["integrator.trustedAuthorityKey"])
    assert remote.serve(lander, tmp_path / "spool", "--once").wait(120) == 0
    done = cli("status", "--intake", remote.intake, "--task", "t0", "--repo", str(attacker),
               "--submission", sid, "--json")  # fmt: skip
    out = (done.stdout + done.stderr).decode()
    assert done.returncode == 1 and "CLAIM_REWRITTEN" in out and "not signed" in out, out
    assert git("rev-parse", "refs/heads/main", cwd=remote.server.root / "canon.git") == target
    # The coordinator builds nothing on the forged claim either.
    done = cli("contract", "renew", "--repo", str(coordinator), "--task", "t0", "--until", "3h")
    assert done.returncode != 0 and "not a claim a trusted authority key signed" in (
        done.stderr.decode()
    ), done.stderr.decode()


def test_serve_refuses_to_trust_keys_it_cannot_sign_with(
    remote: RemoteWorld, tmp_path: Path
) -> None:
    """A daemon that believes only signed claims but has no key would write consumptions
    no mirror believes: it refuses to start, saying what to do."""
    key_file = tmp_path / "authority.key"
    coordinator = tmp_path / "coordinator.git"
    assert cli("init", "--repo", str(coordinator), "--remote", remote.url,
               "--authority-key", str(key_file)).returncode == 0  # fmt: skip
    public = parse_authority_key(key_file.read_bytes()).public
    lander = tmp_path / "host-b.git"
    done = cli("init", "--repo", str(lander), "--remote", remote.url,
               "--trust-authority-key", public)  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    assert remote.serve(lander, tmp_path / "spool", "--once").wait(60) == 2
    (log,) = tmp_path.glob("serve-*.log")
    assert "has no authority key to sign" in log.read_text(), log.read_text()
