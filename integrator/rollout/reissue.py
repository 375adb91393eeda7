"""Restoring service after a policy change: reissue revoked contracts one at a time.

`policy set` (and `policy observe|enforce`) revokes every unconsumed contract in the same
transaction that moves the policy: an agent still holding one is fenced (POLICY_CHANGED,
CLAIM_REVOKED), and then STALE_GENERATION once its task is reissued. Reissuing is a
reclaim of the revoked claim: generation + 1, a new attempt, the same paths, resources and
holder, built under the policy now in force and on the queue head, with the overlap check
against every live claim (an overlap refuses that task and leaves it revoked).

One at a time is the default: each run reissues the next task only (the order of `--task`,
else task id order), so the coordinator brings agents back one by one and watches each;
`--all` reissues every one in turn, each its own compare-and-swap.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from integrator.documents.claim import POLICY_REVOKE_EVENT, Claim
from integrator.documents.contract import OwnershipContract
from integrator.errors import ClaimConflictError, ClaimsPausedError, UsageError
from integrator.records.canonical import Canonical
from integrator.records.claims import Claims

# The reason `integrator.records.policy_ref.set_policy` writes into each claim it revokes; only
# read for the generation once the event says the revocation was a policy change's (a
# reason is text anyone revoking may choose: an agent releasing its task, among others).
POLICY_REVOKE = re.compile(r"^policy changed to generation (?P<generation>\d+)")


@dataclass(frozen=True)
class Revoked:
    """A claim a policy change revoked that has not been reissued since."""

    claim: Claim
    policy_generation: int

    @property
    def task_id(self) -> str:
        return self.claim.view.task_id


@dataclass(frozen=True)
class Reissue:
    """One task's outcome: its new contract, or why it was refused."""

    task_id: str
    contract: OwnershipContract | None = None
    refused: str | None = None

    def row(self) -> dict[str, object]:
        """The outcome as `contract reissue` reports it: the new generation, attempt and
        contract, or why it was refused."""
        row: dict[str, object] = {"taskId": self.task_id}
        if self.contract is not None:
            contract = self.contract
            row |= {
                "generation": contract.ownership_generation,
                "attemptId": contract.attempt_id,
                "contract": contract.wire(),
            }
        else:
            row["refused"] = self.refused
        return row


def revoked_by_policy(canonical: Canonical) -> list[Revoked]:
    """Every claim whose last event is a revocation by a policy change, by task id."""
    out = []
    for claim in canonical.claims():
        if claim.view.state != "revoked" or claim.view.event != POLICY_REVOKE_EVENT:
            continue
        found = POLICY_REVOKE.match(claim.view.reason or "")
        if found is not None:
            out.append(Revoked(claim, int(found.group("generation"))))
    return out


def reissue(
    canonical: Canonical,
    *,
    tasks: Sequence[str] = (),
    every: bool = False,
    lease: timedelta = timedelta(minutes=30),
) -> tuple[list[Reissue], list[str]]:
    """Reissue the next revoked-by-policy task (all of them with `every`): (outcomes, the
    tasks still waiting). A refused task (an overlap) is reported and the next one tried;
    a pause refuses the whole run (ClaimsPausedError)."""
    canonical.refresh()
    waiting = {r.task_id: r for r in revoked_by_policy(canonical)}
    unknown = [t for t in tasks if t not in waiting]
    if unknown:
        raise UsageError(
            f"not revoked by a policy change (or reissued already): {', '.join(unknown)}; "
            "`integrator contract list` shows every claim's state"
        )
    order = list(dict.fromkeys(tasks)) if tasks else sorted(waiting)
    claims = Claims(canonical)
    outcomes: list[Reissue] = []
    for task in order:
        holder = waiting[task].claim.contract.lease.holder
        try:
            contract = claims.reclaim(task, holder=holder, lease=lease)
        except ClaimsPausedError:
            raise
        except ClaimConflictError as err:
            outcomes.append(Reissue(task, refused=str(err)))
            continue
        outcomes.append(Reissue(task, contract=contract))
        if not every:
            break
    done = {o.task_id for o in outcomes if o.contract is not None}
    return outcomes, [t for t in order if t not in done]
