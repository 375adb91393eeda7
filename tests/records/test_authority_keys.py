"""Authority keys: claims, the claims index, the policy, the claims pause and queue control
are commits signed with an authority key, and a repository that trusts such keys acts on
no record none of them signed — whoever could write the ref (docs/security.md, "Authority
keys")."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pygit2
import pytest

from integrator.documents import authority_key as ak
from integrator.documents.verdict import Code, Decision
from integrator.errors import ConfigurationError, QueuePausedError
from integrator.limits import AUTHORITY_COMMIT_BYTES
from integrator.plumbing.packs import commit_bytes
from integrator.records import verdict_keys
from integrator.records.claims import Claims
from integrator.records.pause import refuse_if_paused, set_pause
from integrator.records.policy_ref import set_policy
from integrator.records.queue_control import paused, set_control
from tests.canon import Canon, make_canon
from tests.gitutil import git

REF = "refs/integrator/claims/billing"


def _raw(message: str = "issue: billing\n", parents: list[bytes] | None = None) -> bytes:
    sig = pygit2.Signature("integrator", "integrator@localhost", 1_700_000_000, 0)
    return commit_bytes(bytes(20), parents or [], sig, sig, message)


def _moved_up(raw: bytes) -> bytes:
    """`raw` with its signature line moved before `committer`: the same signed bytes in
    another order (another object id), which only one form may carry."""
    head, _, body = raw.partition(b"\n\n")
    lines = head.split(b"\n")
    lines.insert(-2, lines.pop())
    return b"\n".join(lines) + b"\n\n" + body


def test_a_signature_covers_the_commit_and_its_ref() -> None:
    """Every change to a signed commit, or reading it at another ref, unsigns it; only a
    trusted key's signature counts, and a malformed header is a reason, never a crash."""
    key, stranger = ak.new_authority_key(), ak.new_authority_key()
    trusted = frozenset({key.public})
    signed = ak.sign_commit(_raw(), REF, key)
    assert ak.signature_problem(trusted, signed, REF) is None
    problems = {
        "unsigned": ak.signature_problem(trusted, _raw(), REF),
        "other ref": ak.signature_problem(trusted, signed, "refs/integrator/claims/tax"),
        "stranger": ak.signature_problem(trusted, ak.sign_commit(_raw(), REF, stranger), REF),
        "message": ak.signature_problem(
            trusted, signed.replace(b"issue: billing", b"issue: billinG"), REF
        ),
        "parent": ak.signature_problem(
            trusted,
            signed.replace(b"\ncommitter", b"\nparent " + b"1" * 40 + b"\ncommitter", 1),
            REF,
        ),
        "twice": ak.signature_problem(
            trusted, ak.sign_commit(signed, REF, key), REF
        ),  # a second header
        "shape": ak.signature_problem(
            trusted, signed.replace(b"integrator-sig ed25519:", b"integrator-sig x ed25519:"), REF
        ),
        "not a commit": ak.signature_problem(trusted, b"garbage", REF),
        "position": ak.signature_problem(trusted, _moved_up(signed), REF),
        "repository": ak.signature_problem(
            trusted,
            ak.sign_commit(_raw(), REF, key, "sha256:" + "a" * 64),
            REF,
            "sha256:" + "b" * 64,
        ),
        "huge": ak.signature_problem(trusted, b"x" * (AUTHORITY_COMMIT_BYTES + 1) + b"\n\nm", REF),
    }
    assert problems["unsigned"] == "it is not signed (no integrator-sig header)"
    assert problems["other ref"] == "it was signed for another ref"
    assert problems["stranger"] == "it is signed by a key this mirror does not trust"
    assert (
        problems["message"]
        == problems["parent"]
        == ("its signature is not valid for this ref of this repository")
    )
    assert problems["twice"] == "it carries more than one integrator-sig header"
    assert problems["shape"] is not None and "<key> <ref> <signature>" in problems["shape"]
    assert problems["not a commit"] == "it is not a commit object"
    assert problems["position"] == "its integrator-sig header is not the last one"
    assert problems["repository"] == problems["message"]  # a record of another repository
    assert problems["huge"] is not None and "over" in problems["huge"]
    with pytest.raises(ValueError, match="not a ref name"):
        ak.sign_commit(_raw(), "refs/integrator/claims/a b", key)


def _keyed(tmp_path: Path) -> tuple[Canon, str]:
    """A canonical repository whose records are signed from now on (the policy set again,
    so it is signed too: how an existing repository turns the keys on)."""
    canon = make_canon(tmp_path)
    key_file = tmp_path / "keys" / "authority.key"
    key_file.parent.mkdir()
    lines = verdict_keys.configure(canon.path / ".git", key_file, [], verdict_keys.AUTHORITY)
    assert any("authority records written here are signed" in line for line in lines)
    assert key_file.stat().st_mode & 0o777 == 0o600
    with canon.open() as canonical:
        assert canonical.trusted_authority
        with pytest.raises(ConfigurationError, match="not a policy a trusted authority key"):
            canonical.policy_state()
        set_policy(canonical, canonical.repo.revparse_single("refs/integrator/policy:policy.toml")
                   .data.decode())  # type: ignore[attr-defined]  # fmt: skip
        assert canonical.policy_state().generation == 2
    return canon, ak.parse_authority_key(key_file.read_bytes()).public


def _forge(canon: Canon, ref: str, *, parent: str | None, message: str = "forged") -> str:
    """Point `ref` at a commit no authority key signed (the ref's own tree), as anyone who
    can write the repository's refs can."""
    tree = git("rev-parse", f"{ref}^{{tree}}", cwd=canon.path)
    args = ["commit-tree", tree, "-F", "-"] + (["-p", parent] if parent else [])
    forged = git(*args, cwd=canon.path, input=message.encode())
    git("update-ref", ref, forged, cwd=canon.path)
    return forged


def test_every_record_written_is_signed_and_git_accepts_it(tmp_path: Path) -> None:
    canon, public = _keyed(tmp_path)
    canon.issue("billing", ["billing/**"])
    with canon.open() as canonical:
        set_pause(canonical, "paused", "incident", "ops")
        set_pause(canonical, "resumed", "over", "ops")
        set_control(canonical, paused=True, reason="look", actor="ops", now=canon.clock())
        refs = ["refs/integrator/policy", REF, "refs/integrator/claims-index",
                "refs/integrator/pause", "refs/integrator/queue-control/main"]  # fmt: skip
        for ref in refs:
            oid = canonical.ref(ref)
            assert oid is not None
            assert canonical.authority_problem(ref, oid) is None, ref
            assert f"integrator-sig {public} {ref} ".encode() in canonical.repo[oid].read_raw()
    subprocess.run(["git", "fsck", "--strict"], cwd=canon.path, check=True)
    server = tmp_path / "server.git"
    git("init", "-q", "--bare", str(server), cwd=tmp_path)
    git("config", "receive.fsckObjects", "true", cwd=server)
    git("push", "-q", str(server), "refs/integrator/*:refs/integrator/*", cwd=canon.path)


def test_a_claim_no_trusted_key_signed_is_fenced_and_never_built_on(tmp_path: Path) -> None:
    """A descendant written without the key (a consumed claim made live, a lease widened),
    a signed claim of another task moved here, or one signed by a stranger: the gate fences
    CLAIM_REWRITTEN saying why, and no coordinator operation builds on it."""
    canon, _ = _keyed(tmp_path)
    contract = canon.issue("billing", ["billing/**"], lease=timedelta(hours=2))
    canon.issue("tax", ["auth/**"])
    candidate = canon.commit({"billing/invoice.py": "invoice = 2\n"})
    signed = canon.ref(REF)
    assert signed is not None
    stranger = ak.new_authority_key()
    raw = bytes(pygit2.Repository(str(canon.path)).odb.read(signed)[1])
    unsigned = raw.split(b"\nintegrator-sig ", 1)[0] + b"\n\n" + raw.split(b"\n\n", 1)[1]
    strangers = pygit2.Repository(str(canon.path)).odb.write(
        pygit2.enums.ObjectType.COMMIT, ak.sign_commit(unsigned, REF, stranger)
    )
    cases: dict[str, Callable[[], object]] = {
        "descendant": lambda: _forge(canon, REF, parent=signed),
        "moved": lambda: git(
            "update-ref", REF, git("rev-parse", "refs/integrator/claims/tax", cwd=canon.path),
            cwd=canon.path,
        ),
        "stranger": lambda: git("update-ref", REF, str(strangers), cwd=canon.path),
        "huge": lambda: _forge(canon, REF, parent=signed, message="x" * (1 << 20)),
    }  # fmt: skip
    reasons = {}
    for name, forge in cases.items():
        forge()
        verdict = canon.check(contract, candidate)
        assert verdict.decision is Decision.FENCED, name
        (violation,) = [v for v in verdict.violations if v.code is Code.CLAIM_REWRITTEN]
        reasons[name] = violation.detail
        with canon.open() as canonical, pytest.raises(ConfigurationError, match="not a claim"):
            Claims(canonical).renew("billing", canon.clock() + timedelta(hours=3))
        git("update-ref", REF, signed, cwd=canon.path)
    assert "it is not signed" in reasons["descendant"]
    assert "signed for another ref" in reasons["moved"]
    assert "does not trust" in reasons["stranger"]
    assert "over 1048576 bytes" in reasons["huge"]
    assert canon.integrate(contract, candidate).decision is Decision.ACCEPTED  # the real one


def test_an_unsigned_policy_pause_or_queue_control_is_not_acted_on(tmp_path: Path) -> None:
    """A policy no key signed stops every decision (an operator error, nothing decided); an
    unsigned claims pause or resume refuses new claims; an unsigned queue control reads as
    paused — the safe side of each."""
    canon, _ = _keyed(tmp_path)
    contract = canon.issue("billing", ["billing/**"])
    candidate = canon.commit({"billing/invoice.py": "invoice = 3\n"})
    policy = canon.ref("refs/integrator/policy")
    _forge(canon, "refs/integrator/policy", parent=policy)
    with pytest.raises(ConfigurationError, match="not a policy a trusted authority key signed"):
        canon.integrate(contract, candidate)
    git("update-ref", "refs/integrator/policy", str(policy), cwd=canon.path)

    with canon.open() as canonical:
        set_pause(canonical, "paused", "incident", "ops")
        set_pause(canonical, "resumed", "over", "ops")
    _forge(canon, "refs/integrator/pause", parent=canon.ref("refs/integrator/pause"))
    with canon.open() as canonical, pytest.raises(ConfigurationError, match="pause at"):
        refuse_if_paused(canonical)
    with pytest.raises(ConfigurationError, match="pause at"):
        canon.issue("auth", ["auth/**"])

    with canon.open() as canonical:
        set_control(canonical, paused=True, reason="look", actor="ops", now=canon.clock())
        set_control(canonical, paused=False, reason="fine", actor="ops", now=canon.clock())
        assert paused(canonical) is None
    control = "refs/integrator/queue-control/main"
    _forge(canon, control, parent=canon.ref(control))
    with canon.open() as canonical:
        found = paused(canonical)
        assert found is not None and "not a record a trusted authority key signed" in (
            found.reason or ""
        )
    with pytest.raises(QueuePausedError, match="not a record a trusted authority key signed"):
        canon.integrate(contract, candidate)


def test_a_repository_that_trusts_no_key_checks_nothing(tmp_path: Path) -> None:
    """Without trusted keys (every repository before this feature) unsigned records are
    read as before: the check is opt-in, per mirror, and never fetched."""
    canon = make_canon(tmp_path)
    contract = canon.issue("billing", ["billing/**"])
    candidate = canon.commit({"billing/invoice.py": "invoice = 4\n"})
    _forge(canon, REF, parent=canon.ref(REF))
    assert canon.integrate(contract, candidate).decision is Decision.ACCEPTED
