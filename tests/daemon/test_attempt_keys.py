"""A contract is not a bearer token: only the holder of the attempt key issued with it can
hand a submission in under it, through the spool and through the intake (real daemons,
real `integrator submit`, a real `git daemon` for the intake)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from datetime import timedelta
from pathlib import Path

from integrator.documents.attempt_key import AttemptKey, new_key
from integrator.documents.submission import SubmissionSignature
from integrator.records.claims import Claims
from integrator.store.spool import REJECTION_FILE, SUBMISSION_FILE
from tests.daemon_world import PYTHON, World, hand_over, key_for, submission
from tests.gitutil import git
from tests.gitutil import run_integrator_raw as cli
from tests.remote_world import RemoteWorld


def _clone_with(world: World, tmp_path: Path, name: str, files: dict[str, str]) -> Path:
    clone = tmp_path / name
    git("clone", "-q", str(world.repo), str(clone), cwd=tmp_path)
    for path, text in files.items():
        (clone / path).parent.mkdir(parents=True, exist_ok=True)
        (clone / path).write_text(text)
    git("add", "-A", cwd=clone)
    git("commit", "-qm", f"{name}'s work", cwd=clone)
    return clone


def _submit(
    world: World, contract: Path, clone: Path, *extra: str
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [PYTHON, "-m", "integrator", "submit", "--spool", str(world.spool.root),
         "--contract", str(contract), "--candidate", "HEAD", "--repo", str(clone), "--bundle",
         *extra],
        capture_output=True, check=False,
    )  # fmt: skip


def _rejection(world: World, sid: str) -> str:
    doc = json.loads((world.spool.folder("rejected") / sid / REJECTION_FILE).read_text())
    return str(doc["reason"])


def test_a_copied_contract_without_its_key_cannot_submit(world: World, tmp_path: Path) -> None:
    """The attack: another agent reads the victim's live contract and submits its own
    candidate under it. Before attempt keys it landed and the victim was fenced
    CLAIM_CONSUMED; now it is REJECTED before any work, the claim stays live, and the
    victim's signed submission lands."""
    data, _ = world.candidate("victim")
    contract = hand_over(world.repo, data, tmp_path / "victim.json")
    stolen = tmp_path / "stolen" / "victim.json"
    stolen.parent.mkdir()
    stolen.write_bytes(data)  # the contract only: the key stays with its holder
    attacker = _clone_with(world, tmp_path, "attacker", {"work/victim/f.txt": "planted\n"})
    sent = _submit(world, stolen, attacker)
    assert sent.returncode == 0, sent.stderr.decode()
    assert b"unsigned" in sent.stderr  # the client says so
    bad = sent.stdout.decode().split()[-1]
    assert world.once().proc.returncode == 0
    assert world.spool.entries("rejected") == [bad]
    assert "not signed" in _rejection(world, bad)
    assert world.landed() == []
    claim = json.loads(git("show", "refs/integrator/claims/victim:claim.json", cwd=world.repo))
    assert claim["state"] == "live"

    victim = _clone_with(world, tmp_path, "victim", {"work/victim/f.txt": "mine\n"})
    done = _submit(world, contract, victim)
    assert done.returncode == 0, done.stderr.decode()
    assert b"unsigned" not in done.stderr
    assert world.once().proc.returncode == 0
    assert world.spool.entries("accepted") == [done.stdout.decode().split()[-1]]
    assert world.landed() == [git("rev-parse", "HEAD", cwd=victim)]


def test_a_signed_submission_copied_under_another_id_is_rejected(world: World) -> None:
    """A signature names its submission id: the same signed document in a second folder
    is rejected, the original accepted."""
    sid = world.submit("once")
    copy = "99991231T235959999999Z-ffffffff"  # after the original in id order
    draft = world.spool.root / "tmp" / copy
    draft.mkdir()
    shutil.copy(world.spool.folder("new") / sid / SUBMISSION_FILE, draft / SUBMISSION_FILE)
    os.rename(draft, world.spool.folder("new") / copy)
    assert world.once().proc.returncode == 0
    assert world.spool.entries("accepted") == [sid]
    assert world.spool.entries("rejected") == [copy]
    assert "another submission id" in _rejection(world, copy)


def test_keys_that_are_not_this_contracts_are_rejected(world: World) -> None:
    """A signature by the attacker's own valid key (of its own task), and by the victim's
    key of an earlier generation after a reclaim, are both rejected; the live attempt's
    key lands."""
    data, oid = world.candidate("v")
    contract = json.loads(data)
    mine, _ = world.candidate("mine")
    own = key_for(world.repo, json.loads(mine))
    assert own is not None
    forged_key = AttemptKey(
        contract["taskId"], contract["attemptId"], contract["ownershipGeneration"],
        own.contract_digest, own.private, own.public,
    )  # fmt: skip
    doc = submission(contract, oid)
    with world.spool.draft() as draft:
        signature = forged_key.signature(draft.name, oid)
        forged = doc.model_copy(update={"signature": SubmissionSignature.model_validate(signature)})
        other = world.spool.publish(draft, forged)
    old_key = key_for(world.repo, contract)
    with world.canonical() as canonical:
        renewed = Claims(canonical).reclaim("v", force=True, lease=timedelta(hours=1))
    stale_signer = AttemptKey(
        renewed.task_id, renewed.attempt_id, renewed.ownership_generation, renewed.digest,
        old_key.private, old_key.public,  # type: ignore[union-attr]
    )  # fmt: skip
    new_doc = submission(json.loads(renewed.to_json()), oid)
    with world.spool.draft() as draft:
        sig = SubmissionSignature.model_validate(stale_signer.signature(draft.name, oid))
        stale = world.spool.publish(draft, new_doc.model_copy(update={"signature": sig}))
    good = world.spool.submit(new_doc, key=key_for(world.repo, json.loads(renewed.to_json())))
    assert world.once().proc.returncode == 0
    assert sorted(world.spool.entries("rejected")) == sorted([other, stale])
    for sid in (other, stale):
        assert "not by the attempt key" in _rejection(world, sid)
    assert world.spool.entries("accepted") == [good]
    assert world.landed() == [oid]


def test_the_client_never_signs_with_a_key_that_does_not_fit(world: World, tmp_path: Path) -> None:
    """`submit --key` with the key of another task is refused (exit 2) before anything is
    written; the key file beside the contract is the one `contract issue -o` wrote, 0600."""
    data, _ = world.candidate("a")
    contract = hand_over(world.repo, data, tmp_path / "a.json")
    other, _ = world.candidate("b")
    other_contract = hand_over(world.repo, other, tmp_path / "b.json")
    clone = _clone_with(world, tmp_path, "agent", {"work/a/f.txt": "a\n"})
    wrong = _submit(world, contract, clone, "--key", f"{other_contract}.key")
    assert wrong.returncode == 2
    assert b"does not fit the contract" in wrong.stderr
    assert world.spool.entries("new") == []


def test_contract_issue_hands_out_the_key_and_never_into_a_tracked_tree(
    world: World, tmp_path: Path
) -> None:
    out = tmp_path / "issued" / "c.json"
    out.parent.mkdir()
    done = cli("contract", "issue", "--repo", str(world.repo), "--task", "k", "--path",
               "work/k/**", "-o", str(out))  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    key = Path(f"{out}.key")
    assert os.stat(key).st_mode & 0o777 == 0o600
    claim = json.loads(git("show", "refs/integrator/claims/k:claim.json", cwd=world.repo))
    assert json.loads(key.read_text())["public"] == claim["attemptKey"]
    # Inside a work tree that does not ignore it: refused before anything is issued.
    tracked = _clone_with(world, tmp_path, "tracked", {"README": "x\n"})
    refused = cli("contract", "issue", "--repo", str(world.repo), "--task", "k2", "--path",
                  "work/k2/**", "-o", str(tracked / "c.json"))  # fmt: skip
    assert refused.returncode == 2, refused.stderr.decode()
    assert b"must never be committed" in refused.stderr
    assert not (tracked / "c.json.key").exists()
    assert git("for-each-ref", "refs/integrator/claims/k2", cwd=world.repo) == ""
    (tracked / ".gitignore").write_text("*.key\n")
    ignored = cli("contract", "issue", "--repo", str(world.repo), "--task", "k3", "--path",
                  "work/k3/**", "-o", str(tracked / "c.json"))  # fmt: skip
    assert ignored.returncode == 0, ignored.stderr.decode()
    assert os.stat(tracked / "c.json.key").st_mode & 0o777 == 0o600


def test_the_intake_rejects_a_contract_copied_without_its_key(
    remote: RemoteWorld, tmp_path: Path
) -> None:
    """The same attack through the intake on a real git daemon: the attacker's push is
    answered REJECTED on the intake, the holder's signed one lands."""
    mirror = remote.mirror("host")
    contract = tmp_path / "c.json"
    remote.issue(mirror, "t1", ["t1/**"], contract)
    stolen = tmp_path / "stolen.json"
    stolen.write_bytes(contract.read_bytes())
    attacker = remote.agent("attacker")
    (attacker / "t1").mkdir(exist_ok=True)
    (attacker / "t1" / "x").write_text("planted\n")
    git("add", "-A", cwd=attacker)
    git("commit", "-qm", "planted", cwd=attacker)
    sent = cli("submit", "--intake", remote.intake, "--contract", str(stolen),
               "--candidate", "HEAD", "--repo", str(attacker))  # fmt: skip
    assert sent.returncode == 0, sent.stderr.decode()
    bad = sent.stdout.decode().split()[-1]
    once = ["serve", "--once", "--repo", str(mirror), "--spool", str(tmp_path / "spool"),
            "--intake", remote.intake, "--log-format", "json"]  # fmt: skip
    assert cli(*once).returncode == 0
    rejection = remote.verdict(f"refs/integrator/verdicts/t1/{bad}")
    assert "not signed" in rejection["reason"]
    assert remote.landed() == []
    holder = remote.agent("holder")
    (holder / "t1").mkdir(exist_ok=True)
    (holder / "t1" / "x").write_text("mine\n")
    git("add", "-A", cwd=holder)
    git("commit", "-qm", "mine", cwd=holder)
    good = cli("submit", "--intake", remote.intake, "--contract", str(contract),
               "--candidate", "HEAD", "--repo", str(holder))  # fmt: skip
    assert good.returncode == 0, good.stderr.decode()
    assert cli(*once).returncode == 0
    assert remote.landed() == [git("rev-parse", "HEAD", cwd=holder)]


def test_a_generated_key_is_fresh_per_issue() -> None:
    """Two contracts never share a key (a key is made per issue, not derived)."""
    digest = "sha256:" + "00" * 32
    assert new_key("t", "a", 1, digest).public != new_key("t", "a", 1, digest).public
