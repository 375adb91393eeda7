"""Next-step hints: for each verdict code, what the person who submitted should do."""

from __future__ import annotations

from integrator import refnames
from integrator.documents.verdict import Code

# One short, actionable hint per code: what the person who submitted should do next.
# `{task}` is filled with the verdict's task id.
HINTS: dict[Code, str] = {
    Code.CONTRACT_INVALID: "fix the contract so it validates against its schema "
    "(integrator schema show ownership-contract.v1) "
    "or ask the coordinator to reissue it",
    Code.REPO_MISMATCH: "submit to the repository the contract names, "
    "or ask the coordinator for a contract for this one",
    Code.REPO_UNVERIFIED: "set integrator.repoId in this clone to the canonical "
    "repository's (git config integrator.repoId), or clone with full history",
    Code.CLAIM_UNVERIFIED: "fetch the claims first (git fetch origin "
    f"'{refnames.ALL_REFSPEC}'), or pass --static to check only the "
    "contract's own rules",
    Code.CLAIM_MISSING: "ask the coordinator to issue a contract for the task "
    "(integrator contract issue)",
    Code.CLAIM_REWRITTEN: "someone rewrote the claim on the server: the coordinator must "
    f"look at its history (git log {refnames.CLAIMS}{{task}}) and reissue it",
    Code.STALE_GENERATION: "this attempt was superseded; fetch the live contract "
    "(integrator contract show --task {task})",
    Code.CONTRACT_DIGEST_MISMATCH: "the contract is not the one the claim holds; fetch the live "
    "contract (integrator contract show --task {task}) and resubmit under it",
    Code.CLAIM_CONSUMED: "the task has already landed; further changes need a new task",
    Code.CLAIM_REVOKED: "the claim was revoked; ask the coordinator for a new contract",
    Code.LEASE_EXPIRED: "the lease lapsed; ask the coordinator to renew it "
    "(integrator contract renew) and resubmit",
    Code.POLICY_CHANGED: "the policy changed; ask the coordinator to reissue the contract "
    "under the current policy",
    Code.LEGACY_SUBMISSION: "a release manager decides (integrator review); "
    "resubmit with a contract that carries a generation",
    Code.CANDIDATE_MISSING: "push the candidate commit to the repository before gating it",
    Code.BASE_MISSING: "fetch full history (e.g. fetch-depth: 0) and the queue, where an "
    f"unpromoted base lives (git fetch origin '+{refnames.QUEUE}*:{refnames.QUEUE}*'), "
    "then gate again",
    Code.BASE_NOT_ANCESTOR: "rebase the candidate onto the contract's base commit; with "
    "validation on that base is the queue head, which a plain clone lacks: "
    f"git fetch origin '+{refnames.QUEUE}*:{refnames.QUEUE}*' (or integrator sync --contract "
    "FILE) first",
    Code.BASE_NOT_ON_QUEUE: "rebase onto the queue head and resubmit",
    Code.PATH_NOT_OWNED: "ask the coordinator to expand the claim (integrator contract expand) "
    "or drop the change",
    Code.PATH_DENIED: "drop the change; the contract denies this path explicitly",
    Code.RENAME_NOT_OWNED: "both ends of a rename must be owned: expand the claim "
    "(integrator contract expand) or leave the file where it was",
    Code.MODE_NOT_OWNED: "revert the mode change or expand the claim (integrator contract expand)",
    Code.SYMLINK_ESCAPE: "point the symlink inside the repository and outside .git",
    Code.SUBMODULE_NOT_OWNED: "claim both the submodule path and its submodule resource, "
    "or revert the submodule change",
    Code.CASE_COLLISION: "rename the path so it differs from its neighbour by more than case",
    Code.UNICODE_COLLISION: "rename the path so it differs from its neighbour after NFC",
    Code.UNSAFE_PATH: "use a relative NFC path inside the repository, "
    "without .git or control characters",
    Code.PATCH_TOO_LARGE: "split the change into smaller candidates "
    "or ask the coordinator for a larger maxPatchBytes",
    Code.EDIT_BEFORE_GRANT: "rebuild the change on the workspace state the expansion "
    "inspected: revert the early edits, then make them again after the grant",
    Code.RESOURCE_NOT_OWNED: "ask the coordinator to add the resource to the claim "
    "(integrator contract expand) or drop the change",
    Code.RESOURCE_UNKNOWN: "a release manager decides (integrator review); "
    "declaring the resource in the contract avoids this",
    Code.RESOURCE_CONFLICT: "another landing touched the same resource; rebase onto the queue "
    "head, reconcile and resubmit",
    Code.MERGE_CONFLICT: "rebase onto the queue head and resubmit",
    Code.REF_MOVED: "a ref moved under the transaction: the queue (contention) means submit "
    "again; the target branch, moved outside the queue, needs a release manager to reconcile "
    "it first (the candidate is held, never replayed automatically)",
    Code.VALIDATION_FAILED: "the merged tree failed validation (the log is in the verdict and "
    f"under {refnames.VALIDATIONS}): fix the change and submit it under a new contract, "
    "or, if the failure was not the change's, a release manager requeues it "
    "(integrator review requeue ID --reason ...)",
}


def hint(code: Code, task_id: str | None = None) -> str:
    """The next step for a person whose candidate drew `code`."""
    return HINTS[code].replace("{task}", task_id or "<task>")
