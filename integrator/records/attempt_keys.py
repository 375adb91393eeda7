"""Which attempt key the claim says a contract was issued with, and the key store of the
repository that issues contracts (store/keys.py).

The daemon never needs a private key: it reads the public half the claim chain recorded
for the very contract a submission carries (`issued_key`).
"""

from __future__ import annotations

from pathlib import Path

import pygit2

from integrator import refnames
from integrator.documents.attempt_key import AttemptKey
from integrator.documents.claim import parse_claim_state
from integrator.documents.contract import OwnershipContract
from integrator.errors import ConfigurationError
from integrator.limits import MAX_HISTORY
from integrator.records.canonical import Canonical
from integrator.refnames import refname_problem
from integrator.store.keys import KeyStore, store_of


def key_store(canonical: Canonical) -> KeyStore:
    """The key store of the repository `canonical` opened (where issuing puts keys)."""
    return KeyStore(store_of(Path(canonical.repo.path)))


def stored_key(canonical: Canonical, contract: OwnershipContract) -> AttemptKey | None:
    """The private key this repository issued `contract` with (None: issued elsewhere, or
    before attempt keys existed) — what integrator's own submissions (a revert, a requeue)
    are signed with."""
    return key_store(canonical).load(
        contract.task_id, contract.attempt_id, contract.ownership_generation
    )


class Unknown:
    """No commit of the claim chain issued the contract: it is not one the coordinator made
    (the gate fences it); there is no key to check a signature against."""


UNKNOWN = Unknown()


def issued_key(
    canonical: Canonical, task_id: str, attempt_id: str, generation: int, digest: str
) -> str | Unknown | None:
    """The public key the claim chain of `task_id` recorded when it issued the contract
    `digest` (attempt, generation): a key, None when that contract was issued before attempt
    keys existed, UNKNOWN when no commit in the chain (MAX_HISTORY deep) issued it."""
    if refname_problem(task_id):
        return UNKNOWN
    oid = canonical.ref(refnames.claim(task_id))
    repo = canonical.repo
    walked = 0
    while oid and walked < MAX_HISTORY:
        walked += 1
        try:
            commit = repo[oid]
            if not isinstance(commit, pygit2.Commit):
                return UNKNOWN
            doc = parse_claim_state(canonical.blob_at(oid, "claim.json"))
        except (KeyError, ValueError, ConfigurationError, pygit2.GitError):
            return UNKNOWN
        if (
            doc.get("attemptId") == attempt_id
            and doc.get("generation") == generation
            and doc.get("contractDigest") == digest
        ):
            key = doc.get("attemptKey")
            return key if isinstance(key, str) else None
        oid = str(commit.parent_ids[0]) if commit.parent_ids else None
    return UNKNOWN
