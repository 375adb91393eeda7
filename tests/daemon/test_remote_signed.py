"""Remote mode against a server whose pre-receive hook admits only signed pushes to its
authority refs: a real `git daemon` (it authenticates no one) with integrator's server hook
installed on the canonical repository and on the intake."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.gitutil import GIT_ENV, commit_files, git
from tests.gitutil import run_integrator_raw as cli
from tests.remote_world import RemoteWorld

VERDICTS = "refs/integrator/verdicts/"


def _protect(world: RemoteWorld, key: Path) -> None:
    for name in ("canon", "intake"):
        done = cli("server-hook", "install", "--repo", str(world.server.root / f"{name}.git"),
                   "--key-file", str(key), "--target", "main")  # fmt: skip
        assert done.returncode == 0, done.stderr.decode()


def test_signed_integrators_land_and_unsigned_ones_move_nothing(
    remote: RemoteWorld, tmp_path: Path
) -> None:
    """With the hook installed, an integrator without the key cannot even prepare the
    server; one with it (init --remote-key-file) prepares, issues a claim, lands an agent's
    candidate from the intake and publishes its verdict — every push signed afresh — while
    the agent's own unsigned push to the claims is refused."""
    key = tmp_path / "push.key"
    assert cli("server-hook", "keygen", "-o", str(key)).returncode == 0
    _protect(remote, key)

    unsigned = cli("init", "--repo", str(tmp_path / "unsigned.git"), "--remote", remote.url)
    assert unsigned.returncode == 2, unsigned.stderr.decode()
    assert "refused" in unsigned.stderr.decode()
    assert remote.refs(remote.canon, "refs/integrator/") == {}

    host = tmp_path / "host.git"
    done = cli("init", "--repo", str(host), "--remote", remote.url,
               "--remote-key-file", str(key))  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    assert git("config", "integrator.remoteKeyFile", cwd=host) == str(key.resolve())
    contract = tmp_path / "c.json"
    remote.issue(host, "t1", ["t1/**"], contract)

    agent = remote.agent("a1")
    commit_files(agent, {"t1/f.txt": "agent\n"}, "agent's change")
    forged = subprocess.run(
        ["git", "push", "--porcelain", remote.url, "+HEAD:refs/integrator/claims/t1"],
        cwd=agent, capture_output=True, env={**os.environ, **GIT_ENV}, check=False,
    )  # fmt: skip
    assert forged.returncode != 0 and b"declined" in forged.stdout + forged.stderr
    sid = cli("submit", "--intake", remote.intake, "--contract", str(contract),
              "--candidate", "HEAD", "--repo", str(agent)).stdout.decode().strip()  # fmt: skip
    assert sid

    # The intake is another repository on the same server: its key is the canonical one's
    # only when the URL is the same, so name it.
    git("config", "integrator.intakeKeyFile", str(key), cwd=host)
    remote.serve(host, tmp_path / "spool")
    waited = cli("status", "--intake", remote.intake, "--submission", sid, "--repo", str(agent),
                 "--contract", str(contract), "--wait", "60", "--json")  # fmt: skip
    assert waited.returncode == 0, waited.stderr.decode() + waited.stdout.decode()
    assert json.loads(waited.stdout)["verdict"]["decision"] == "ACCEPTED"
    assert remote.landed() == [git("rev-parse", "HEAD", cwd=agent).strip()]
    main = git("rev-parse", "refs/heads/main", cwd=remote.canon).strip()
    assert git("show", f"{main}:t1/f.txt", cwd=remote.canon) == "agent"


def test_a_key_file_that_cannot_sign_is_refused_before_any_push(
    remote: RemoteWorld, tmp_path: Path
) -> None:
    """A missing or too-short key file stops `init --remote` with a usage error, and the
    server is left untouched."""
    short = tmp_path / "short.key"
    short.write_text("too short\n")
    for key in (short, tmp_path / "missing.key"):
        done = cli("init", "--repo", str(tmp_path / f"{key.stem}.git"), "--remote", remote.url,
                   "--remote-key-file", str(key))  # fmt: skip
        assert done.returncode == 2, done.stderr.decode()
        assert str(key) in done.stderr.decode()
    assert remote.refs(remote.canon, "refs/integrator/") == {}
