"""A review decision found in git (an approval or rejection another host recorded) files
this host's held copy only when a trusted authority key signed it: on a server that
cannot guard its refs, anyone could otherwise write an "approve" record and have every
host report a held candidate ACCEPTED (docs/security.md, "Authority keys")."""

from __future__ import annotations

from pathlib import Path

from integrator.documents.verdict import Decision
from integrator.records import verdict_keys
from integrator.records.held import ReviewAction, archived_ref, write_record
from integrator.review.reconcile import decided_on_server
from tests.canon import make_canon
from tests.factories import NOW
from tests.gitutil import git

SID = "20260601T120000123456Z-0a1b2c3d"


def test_a_decision_no_trusted_key_signed_is_no_decision(tmp_path: Path) -> None:
    canon = make_canon(tmp_path)
    action = ReviewAction(submission=SID, action="approve", actor="someone", at=NOW,
                          decision=Decision.ACCEPTED)  # fmt: skip
    with canon.open() as canonical:
        forged = write_record(canonical, action, None, b"{}", None)  # this host has no key
    git("update-ref", archived_ref(SID), forged, cwd=canon.path)
    with canon.open() as canonical:
        assert decided_on_server(canonical, SID) == (forged, action)  # trusting no key

    key = tmp_path / "authority.key"
    verdict_keys.configure(canon.path / ".git", key, [], verdict_keys.AUTHORITY)
    with canon.open() as canonical:
        assert decided_on_server(canonical, SID) is None
        signed = write_record(canonical, action, None, b"{}", None)
    git("update-ref", archived_ref(SID), signed, cwd=canon.path)
    with canon.open() as canonical:
        assert decided_on_server(canonical, SID) == (signed, action)
    raw = git("cat-file", "commit", signed, cwd=canon.path)
    assert "integrator-sig ed25519:" in raw and f"refs/integrator/held/{SID}" in raw
