"""Verdicts on an intake that cannot guard its refs: a verdict no trusted integrator key
signed for this very submission is never believed by a reader that was given the keys,
and the daemon replaces it with its own signed verdict (a plain `git daemon` on 127.0.0.1,
no hook: any writer may push any ref)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from integrator.documents.attempt_key import AttemptKeyError, parse_key
from integrator.documents.verdict_key import (
    SIGNATURE_FILE,
    new_verdict_key,
    parse_verdict_key,
    signature_problem,
)
from tests.daemon.test_remote import _candidate
from tests.gitutil import git
from tests.gitutil import run_integrator_raw as cli
from tests.remote_world import RemoteWorld, remote

__all__ = ["remote"]  # the fixture

SID = "20260601T120000123456Z-0a1b2c3d"


def _forge(agent: Path, url: str, task: str, sid: str, candidate: str, sig: bytes | None) -> None:
    """Push an ACCEPTED verdict for `sid` that no daemon wrote (with `sig` as its
    verdict.sig when given) — what any writer of an unguarded intake can do."""
    doc = {"schema": "integrator.verdict.v1", "decision": "ACCEPTED", "violations": [],
           "resources": [], "candidate": candidate, "taskId": task}  # fmt: skip
    files = {"verdict.json": json.dumps(doc).encode() + b"\n"}
    if sig is not None:
        files[SIGNATURE_FILE] = sig
    entries = []
    for name, data in files.items():
        blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=agent, input=data,
                              capture_output=True, check=True).stdout.decode().strip()  # fmt: skip
        entries.append(f"100644 blob {blob}\t{name}\n")
    tree = git("mktree", cwd=agent, input="".join(entries).encode())
    commit = git("commit-tree", tree, "-m", "forged", cwd=agent)
    git("push", "-q", "--force", url, f"{commit}:refs/integrator/verdicts/{task}/{sid}", cwd=agent)


def _status(repo: Path, url: str, sid: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    done = cli("status", "--intake", url, "--task", "t0", "--repo", str(repo), "--submission",
               sid, "--json", env=env)  # fmt: skip
    return done.returncode, (done.stdout + done.stderr).decode()


def test_a_verdict_no_trusted_key_signed_is_never_believed(
    remote: RemoteWorld, tmp_path: Path
) -> None:
    key_file = tmp_path / "keys" / "verdict.key"
    key_file.parent.mkdir()
    lander = remote.mirror("host-a")
    done = cli("init", "--repo", str(lander), "--remote", remote.url, "--verdict-key",
               str(key_file), "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    assert os.stat(key_file).st_mode & 0o777 == 0o600
    public = parse_verdict_key(key_file.read_bytes()).public
    coordinator = remote.mirror("coordinator")
    done = cli("init", "--repo", str(coordinator), "--remote", remote.url,
               "--trust-verdict-key", public)  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()

    contract = tmp_path / "c0.json"
    remote.issue(coordinator, "t0", ["t0/**"], contract)
    assert parse_key(Path(f"{contract}.key").read_bytes()).verdict_keys == (public,)
    agent = _candidate(remote, 0, {"t0/f.txt": "mine\n", "shared/x": "not mine\n"})
    done = cli("submit", "--intake", remote.intake, "--contract", str(contract),
               "--candidate", "HEAD", "--repo", str(agent))  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    sid = done.stdout.decode().split()[-1]
    assert git("config", "--get-all", "integrator.trustedVerdictKey", cwd=agent) == public
    candidate = git("rev-parse", "HEAD", cwd=agent)

    # Forged before any daemon decides: unsigned, then signed by a key no one trusts.
    stranger = new_verdict_key()
    for sig in (None, stranger.sign("t0", sid, "verdict.json", b"anything")):
        _forge(agent, remote.intake, "t0", sid, candidate, sig)
        code, out = _status(agent, remote.intake, sid)
        assert code == 4 and "not believed" in out, out
    # A reader given no key believes what is there (docs/security.md says so) — the
    # environment is one way to give a reader the keys.
    bystander = remote.agent("bystander")
    assert _status(bystander, remote.intake, sid)[0] == 0
    env = {"INTEGRATOR_VERDICT_KEYS": public}
    assert _status(bystander, remote.intake, sid, env)[0] == 4

    # The daemon's publication is refused by the forged ref: it reads it, finds no trusted
    # signature, and replaces it with its own signed verdict.
    assert remote.serve(lander, tmp_path / "spool", "--once").wait(120) == 0
    code, out = _status(agent, remote.intake, sid)
    assert code == 1 and '"FENCED"' in out and "PATH_NOT_OWNED" in out, out
    assert _status(bystander, remote.intake, sid, env)[0] == 1
    shown = git("show", f"refs/integrator/verdicts/t0/{sid}:{SIGNATURE_FILE}",
                cwd=remote.server.root / "intake.git")  # fmt: skip
    assert json.loads(shown)["key"] == public
    assert not git("for-each-ref", "refs/integrator/submit/", cwd=remote.server.root / "intake.git")


def test_a_signature_is_bound_to_its_submission_and_document() -> None:
    key = new_verdict_key()
    trusted = frozenset({key.public})
    document = b'{"decision": "FENCED"}\n'
    sig = key.sign("t0", SID, "verdict.json", document)
    fields = {"task": "t0", "submission": SID, "name": "verdict.json", "document": document}
    assert signature_problem(trusted, sig, **fields) is None  # type: ignore[arg-type]
    other = "20260601T120000123457Z-0a1b2c3e"
    for change in ({"submission": other}, {"task": "t1"}, {"name": "rejection.json"},
                   {"document": b'{"decision": "ACCEPTED"}\n'}):  # fmt: skip
        assert signature_problem(trusted, sig, **(fields | change)) is not None, change  # type: ignore[arg-type]
    assert "does not trust" in str(signature_problem(frozenset(), sig, **fields))  # type: ignore[arg-type]
    for bad in (b"", b"{}", b"[1]", b"x" * 5000, sig.replace(b'"value": "', b'"value": "A')):
        assert signature_problem(trusted, bad, **fields) is not None, bad  # type: ignore[arg-type]
    assert signature_problem(trusted, None, **fields) == "it is not signed (no verdict.sig)"  # type: ignore[arg-type]


def test_key_files_are_checked() -> None:
    key = new_verdict_key()
    assert parse_verdict_key(key.to_bytes()) == key
    other = new_verdict_key()
    mixed = json.loads(key.to_bytes()) | {"public": other.public}
    for bad in (b"", b"[]", json.dumps(mixed).encode(), b"x" * 5000):
        with pytest.raises(AttemptKeyError):
            parse_verdict_key(bad)
