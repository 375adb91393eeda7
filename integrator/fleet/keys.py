"""Finding the attempt key a submission is signed with, agent side.

In order: the file the caller names (`integrator submit --key FILE`; the MCP server's
bound worktree), the file `INTEGRATOR_ATTEMPT_KEY` names, the key bound into the worktree
with its contract (`task claim`), and the key store of the repository the agent works in
(store/keys.py: a coordinator issuing in the same repository puts keys there). The key
must be the one issued with the very contract submitted: another attempt's key, or the
key of an earlier generation of the same attempt, is refused here with the reason, rather
than rejected by the daemon later.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from integrator.documents.attempt_key import AttemptKey
from integrator.documents.digests import digest_of
from integrator.errors import UsageError
from integrator.fleet.bound import BINDING_DIR
from integrator.plumbing.git import run_git
from integrator.store.keys import KeyStore, read_key_file, store_of, write_key

ENV = "INTEGRATOR_ATTEMPT_KEY"
BOUND_KEY = "attempt-key.json"  # beside the bound contract.json in a worktree's git dir


def _git_dirs(repo: Path) -> tuple[Path, Path] | None:
    proc = run_git(
        ["rev-parse", "--path-format=absolute", "--absolute-git-dir", "--git-common-dir"],
        cwd=repo,
        check=False,
    )
    lines = proc.stdout.decode("utf-8", "surrogateescape").splitlines()
    if proc.returncode != 0 or len(lines) != 2:
        return None
    return Path(lines[0]), Path(lines[1])


def _fits(key: AttemptKey, document: dict[str, Any]) -> str | None:
    """Why `key` cannot sign a submission under `document`; None when it can."""
    wanted = (document.get("taskId"), document.get("attemptId"))
    if (key.task_id, key.attempt_id) != wanted:
        return (
            f"it was issued for task {key.task_id!r} attempt {key.attempt_id!r}, not "
            f"{wanted[0]!r} attempt {wanted[1]!r}"
        )
    if key.generation != document.get("ownershipGeneration"):
        return (
            f"it was issued for generation {key.generation}, the contract is generation "
            f"{document.get('ownershipGeneration')} (an expansion or reclaim issues a new key)"
        )
    if key.contract_digest != digest_of(document):
        return "it was issued for another contract of that attempt and generation"
    return None


class NoKey(str):
    """No key was found: the text says where integrator looked (the submission goes in
    unsigned, and the daemon rejects it if the claim issued its contract with a key)."""


def find_key(
    document: dict[str, Any], repo: Path, explicit: Path | None = None
) -> AttemptKey | NoKey:
    """The attempt key to sign a submission under the contract `document` with; NoKey when
    none is to be found (a key that is found but does not fit is an error)."""
    named = explicit or (Path(os.environ[ENV]) if os.environ.get(ENV) else None)
    if named is not None:
        key = read_key_file(named)
        problem = _fits(key, document)
        if problem:
            raise UsageError(f"attempt key {named} does not fit the contract: {problem}")
        return key
    task, attempt = document.get("taskId"), document.get("attemptId")
    generation = document.get("ownershipGeneration")
    if not isinstance(task, str) or not isinstance(attempt, str) or type(generation) is not int:
        return NoKey("the contract names no task, attempt and generation to find a key by")
    dirs = _git_dirs(repo)
    looked: list[str] = []
    if dirs is not None:
        git_dir, common = dirs
        bound = git_dir / BINDING_DIR / BOUND_KEY
        if os.path.lexists(bound):
            key = read_key_file(bound)
            if _fits(key, document) is None:
                return key
        looked.append(str(bound))
        store = KeyStore(store_of(common))
        stored = store.load(task, attempt, generation)
        looked.append(str(store.root))
        if stored is not None:
            problem = _fits(stored, document)
            if problem is None:
                return stored
            return NoKey(
                f"the attempt key stored for task {task!r} attempt {attempt!r} does not fit "
                f"the contract ({problem}); the submission goes in unsigned, and the daemon "
                "rejects it if its contract was issued with a key"
            )
    return NoKey(
        f"no attempt key for task {task!r} attempt {attempt!r} generation {generation} "
        f"(looked in {', '.join(looked) or 'no git repository'}); the submission goes in "
        "unsigned, and the daemon rejects it if its contract was issued with a key: pass "
        f"--key FILE, the key the coordinator issued with the contract, or set {ENV}"
    )


def tracked_tree_problem(path: Path) -> str | None:
    """Why a key file may not be written at `path`: it would lie in a git work tree that
    does not ignore it (one `git add -A` from being committed and pushed)."""
    folder = path.parent
    top = run_git(["rev-parse", "--show-toplevel"], cwd=folder, check=False)
    if top.returncode != 0 or not top.stdout.strip():
        return None  # not in a work tree (or in a git dir, which no tree tracks)
    ignored = run_git(
        ["check-ignore", "-q", "--no-index", "--", path.name], cwd=folder, check=False
    )
    if ignored.returncode == 0:
        return None
    return (
        f"{path} would lie in the git work tree {top.stdout.decode(errors='replace').strip()}, "
        "which does not ignore it: a key must never be committed (write the contract "
        "elsewhere, name an ignored --key-out, or add it to .gitignore)"
    )


def hand_out(path: Path, key: AttemptKey) -> Path:
    """Write the key the coordinator hands to the agent at `path` (0600), refusing a place
    in a tracked tree."""
    problem = tracked_tree_problem(path)
    if problem:
        raise UsageError(problem)
    return write_key(path, key)
