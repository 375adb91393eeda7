"""Reading one claim without opening the repository: a single `git cat-file --batch`.

The write guard runs before every write an agent makes, so it must start fast: this reads
the claim ref's commit id, `claim.json` and `contract.json` in one git process, without
loading libgit2.
"""

from __future__ import annotations

from pathlib import Path

from integrator import refnames
from integrator.documents.claim import ClaimView, parse_claim_state, view_from_state
from integrator.documents.rules import ContractRules, rules_from_bytes
from integrator.errors import ConfigurationError
from integrator.plumbing.catfile import batch_objects
from integrator.plumbing.git import run_git
from integrator.refnames import refname_problem


def _claim_objects(repo: Path, task_id: str) -> tuple[str, bytes, bytes] | None:
    """The claim ref's commit id, `claim.json` and `contract.json`; None: no claim."""
    problem = refname_problem(task_id)
    if problem:
        raise ConfigurationError(f"task id {task_id!r} cannot name a claim: it {problem}")
    ref = f"{refnames.CLAIMS}{task_id}"
    specs = [ref, f"{ref}:claim.json", f"{ref}:contract.json"]
    proc = run_git(
        ["cat-file", "--batch"], cwd=repo, input="".join(s + "\n" for s in specs).encode()
    )
    try:
        commit, state, contract = batch_objects(proc.stdout, len(specs))
    except ValueError as err:
        raise ConfigurationError(f"git cat-file printed no readable answer for {ref}") from err
    if commit is None:
        return None
    if state is None or contract is None:
        raise ConfigurationError(f"{ref} does not hold claim.json and contract.json")
    return proc.stdout.split(b" ", 1)[0].decode(), state, contract


def read_claim_rules(repo: Path, task_id: str) -> tuple[ClaimView, ContractRules] | None:
    """The claim of `task_id` with its contract read as plain rules (no contract models:
    the write guard's reading); None when there is no claim."""
    found = _claim_objects(repo, task_id)
    if found is None:
        return None
    _, state, contract = found
    view = view_from_state(parse_claim_state(state))
    return view, rules_from_bytes(contract, stated_digest=view.contract_digest)
