"""Who may hand a submission in: the attempt key's signature, checked before any work.

A submission under a contract the claim issued with an attempt key must carry that key's
signature over (task, attempt, generation, contract digest, submission id, candidate);
one that does not is REJECTED (the submitter's to fix) before its bundle is imported or
its diff computed. A contract no claim commit issued is left to the gate, which fences
it: a stale or forged contract is a FENCE for the release manager, whoever sent it.

The claim chain is read after the batch's entries were listed (`Daemon._batch` refreshes
the mirror first), so a claim issued before a submission was handed in is always seen;
the engine then lands the batch on that same fetched view (`Canonical.refresh`), so a
submission cannot slip through as "no such contract" and then meet a claim fetched later.
"""

from __future__ import annotations

from integrator.documents.attempt_key import signature_problem
from integrator.documents.bounds import CEILING_LIMITS
from integrator.documents.contract import parse_contract
from integrator.documents.submission import Submission
from integrator.errors import ContractError
from integrator.records.attempt_keys import Unknown, issued_key
from integrator.records.canonical import Canonical


def submission_problem(canonical: Canonical, sid: str, submission: Submission) -> str | None:
    """Why `sid` is rejected for want of its attempt's signature; None when it may go on."""
    try:
        # As far as any policy admits: never narrower than the gate's reading, or a contract
        # a raised [limits] admits would skip this check and be judged by the gate alone.
        contract = parse_contract(submission.contract_bytes(), limits=CEILING_LIMITS)
    except ContractError:
        return None  # the gate fences it CONTRACT_INVALID
    issued = issued_key(
        canonical,
        contract.task_id,
        contract.attempt_id,
        contract.ownership_generation,
        contract.digest,
    )
    if isinstance(issued, Unknown):
        return None  # no claim commit issued it: the gate fences it
    signed = submission.signature
    return signature_problem(
        issued=issued,
        signature=signed.model_dump() if signed is not None else None,
        sid=sid,
        task=contract.task_id,
        attempt=contract.attempt_id,
        generation=contract.ownership_generation,
        contract=contract.digest,
        candidate=submission.candidate,
    )
