"""Asking for more, the way integrator can verify: an expansion request built from the
workspace itself.

The request carries the contract it extends and what to add, and the workspace's whole
current state as git would commit it — tracked and untracked files, ignored ones left out
— as a tree id (`workspaceTree`) beside its HEAD (`workspaceHead`). The coordinator's
`contract expand` refuses a request whose workspace already changed a path it asks for.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import ValidationError

from integrator.documents.bounds import CEILING_LIMITS
from integrator.documents.contract import OwnershipContract, parse_contract
from integrator.documents.expansion import ExpansionRequest
from integrator.errors import UsageError
from integrator.fleet.workspace import (
    bind,
    binding_record,
    bound_contract,
    main_checkout,
    worktree_root,
)
from integrator.plumbing import git


def workspace_state(worktree: Path) -> tuple[str, str | None]:
    """(tree id of everything git would commit from the working tree, HEAD or None).

    Built in a private index, so the worktree's own index and HEAD stay as they are; the
    blobs of untracked files are written to the object store, as `git stash` would.
    """
    head_proc = git.run_git(["rev-parse", "--verify", "-q", "HEAD"], cwd=worktree, check=False)
    head = head_proc.stdout.decode().strip() or None if head_proc.returncode == 0 else None
    with tempfile.TemporaryDirectory(prefix="integrator-expansion-") as tmp:
        index = Path(tmp) / "index"
        if head is not None:
            git.run_git(["read-tree", head], cwd=worktree, index_file=index)
        git.run_git(["add", "-A", "--", "."], cwd=worktree, index_file=index)
        tree = git.run_git(["write-tree"], cwd=worktree, index_file=index).stdout.decode().strip()
    return tree, head


def build_request(
    worktree: Path,
    contract: OwnershipContract,
    add_paths: Sequence[str],
    add_resources: Sequence[str] = (),
) -> ExpansionRequest:
    """The `integrator.expansion.v1` request for `contract` from the workspace at `worktree`."""
    tree, head = workspace_state(worktree)
    diff = git.run_git(
        ["diff-tree", "-r", "--no-renames", contract.base_commit, tree], cwd=worktree
    ).stdout
    return ExpansionRequest.model_validate(
        {
            "schema": "integrator.expansion.v1",
            "taskId": contract.task_id,
            "contractDigest": contract.digest,
            "expectedGeneration": contract.ownership_generation,
            "treeDigest": "sha256:" + hashlib.sha256(tree.encode()).hexdigest(),
            "diffDigest": "sha256:" + hashlib.sha256(diff).hexdigest(),
            "addPaths": list(add_paths),
            "addResources": list(add_resources),
            "workspaceTree": tree,
            "workspaceHead": head,
        }
    )


def request_expansion(
    worktree: Path,
    add_paths: Sequence[str],
    add_resources: Sequence[str] = (),
    *,
    contract: Callable[[], bytes] | None = None,
) -> ExpansionRequest:
    """`contract request-expansion`: the request for the contract `contract` reads (by
    default the one bound to the worktree), from the workspace the worktree is in."""
    if not add_paths and not add_resources:
        raise UsageError("name what to add: --add-path GLOB and/or --add-resource KIND:NAME")
    root = worktree_root(worktree)
    if contract is not None:
        held = parse_contract(contract(), limits=CEILING_LIMITS)  # contract expand judges
    else:
        bound = bound_contract(root)
        if bound is None:
            raise UsageError(f"no contract is bound to {root}; pass --contract FILE")
        held = bound
    return build_request(root, held, add_paths, add_resources)


def send_expansion(
    worktree: Path, add_paths: Sequence[str], add_resources: Sequence[str] = ()
) -> tuple[dict[str, object], int]:
    """`contract request-expansion --send`, MCP `request_expansion`: file the request for
    the worktree's bound contract with the coordinator; the answer document and its exit
    code (0: granted and bound here, 3: waiting for the coordinator or dismissed).

    Nothing is granted by the agent: the request is recorded pending (`contract list`
    shows it, `contract expand --id ID` grants it), unless the policy's `[expansion]
    auto_grant` covers it. A grant the coordinator made since — a newer generation of the
    same attempt for the same worktree — is bound here first, with its attempt key, and
    what it already holds is not asked for again.
    """
    from integrator.records.attempt_keys import stored_key
    from integrator.records.canonical import Canonical
    from integrator.records.expansions import Expansions

    if not add_paths and not add_resources:
        raise UsageError("name what to add: add paths and/or resources")
    root = worktree_root(worktree)
    contract = bound_contract(root)
    if contract is None:
        raise UsageError(f"no contract is bound to {root}; claim a task first")
    with Canonical(main_checkout(root)) as canonical:
        live = canonical.claim(contract.task_id)
        if (
            live is not None
            and live.view.state == "live"
            and live.contract.attempt_id == contract.attempt_id
            and live.contract.worktree_id == contract.worktree_id
            and live.contract.ownership_generation > contract.ownership_generation
        ):
            contract = live.contract
            bind(root, contract, binding_record(root), stored_key(canonical, contract))
        paths = [p for p in add_paths if p not in contract.paths]
        resources = [r for r in add_resources if r not in contract.resources]
        if not paths and not resources:
            held = "the bound contract holds them already"
            return _answer("granted", contract, held, None, add_paths, add_resources), 0
        try:
            request = build_request(root, contract, paths, resources)
        except ValidationError as err:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in err.errors()
            )
            raise UsageError(f"invalid expansion request: {problems}") from err
        outcome = Expansions(canonical).file(request)
        if isinstance(outcome, OwnershipContract):
            bind(root, outcome, binding_record(root), stored_key(canonical, outcome))
            why = "granted by the policy's [expansion] auto_grant"
            return _answer("granted", outcome, why, request.request_id, paths, resources), 0
    record = outcome.record
    doc = _answer(record.state, contract, record.reason, request.request_id, paths, resources)
    doc["ref"] = outcome.ref
    return doc, 3


def _answer(
    state: str,
    contract: OwnershipContract,
    reason: str,
    request_id: str | None,
    paths: Sequence[str],
    resources: Sequence[str],
) -> dict[str, object]:
    return {
        "state": state,
        "taskId": contract.task_id,
        "requestId": request_id,
        "addPaths": list(paths),
        "addResources": list(resources),
        "reason": reason,
        "generation": contract.ownership_generation,
        "contract": contract.wire() if state == "granted" else None,
        "ref": None,
    }
