"""A verdict ref on the intake that no trusted integrator signed: told apart and replaced.

On an intake that cannot guard `refs/integrator/verdicts/*`, a writer may put a verdict
there before any daemon decides. A daemon with trusted verdict keys reads what is there
when its own publication is refused; a verdict not signed by one of those keys for this
very submission and document is replaced by the daemon's own, leased on the value seen
(so a genuine verdict another daemon publishes meanwhile is never overwritten)."""

from __future__ import annotations

from collections.abc import Callable

import pygit2

from integrator.daemon.admission import Pending
from integrator.documents.verdict_key import SIGNATURE_FILE, signature_problem
from integrator.errors import InfrastructureError
from integrator.fleet.intake import submit_ref, verdict_ref
from integrator.limits import (
    VERDICT_BYTES,
    VERDICT_COMMIT_BYTES,
    VERDICT_SIGNATURE_BYTES,
    VERDICT_TREE_BYTES,
)
from integrator.plumbing import git
from integrator.plumbing.remote import push_signature
from integrator.store.spool import REJECTION_FILE, VERDICT_FILE

Run = Callable[[list[str]], git.GitRun]  # git with the intake, in the mirror

__all__ = ["replace", "untrusted"]


def _blob(repo: pygit2.Repository, tree: pygit2.Tree, name: str, limit: int) -> bytes | None:
    if name not in tree:
        return None
    entry = tree[name]
    if entry.type_str != "blob" or repo.odb.read_header(entry.id)[1] > limit:
        return None
    blob = repo.get(entry.id)
    return blob.data if isinstance(blob, pygit2.Blob) else None


def untrusted(
    run: Run, url: str, repo: pygit2.Repository, trusted: frozenset[str], item: Pending
) -> str | None:
    """Why the verdict at the submission's verdict ref on the intake is not one a trusted
    key signed (None: it is, or this host trusts no key and so cannot tell)."""
    if not trusted:
        return None
    ref = verdict_ref(item.task_id, item.sid)
    proc = run(["fetch", "--quiet", "--no-tags", url, ref])
    if proc.returncode != 0:
        raise InfrastructureError(f"cannot read {ref} on the intake: {git.last_line(proc.stderr)}")
    fetched = git.run_git(["rev-parse", "--verify", "-q", "FETCH_HEAD"], git_dir=repo.path)
    oid = fetched.stdout.decode().strip()
    kind, size = repo.odb.read_header(oid)
    if kind != pygit2.enums.ObjectType.COMMIT or size > VERDICT_COMMIT_BYTES:
        return f"it is not a commit of at most {VERDICT_COMMIT_BYTES} bytes"
    commit = repo.get(oid)
    assert isinstance(commit, pygit2.Commit)
    kind, size = repo.odb.read_header(commit.tree_id)
    if size > VERDICT_TREE_BYTES:  # measured before it is read: a verdict's has 2 or 3 names
        return f"its tree is over {VERDICT_TREE_BYTES} bytes"
    tree = commit.tree
    for name in (VERDICT_FILE, REJECTION_FILE):
        document = _blob(repo, tree, name, VERDICT_BYTES)
        if document is not None:
            return signature_problem(
                trusted, _blob(repo, tree, SIGNATURE_FILE, VERDICT_SIGNATURE_BYTES),
                task=item.task_id, submission=item.sid, name=name, document=document,
            )  # fmt: skip
    return "it holds no verdict document"


def replace(
    run: Run, url: str, key: bytes | None, item: Pending, seen: str, commit: str,
    source: str | None,
) -> None:  # fmt: skip
    """Publish `commit` at the verdict ref over the untrusted `seen`, and delete the submission ref
    when it is still the one answered — one atomic push, leased on both values."""
    target = verdict_ref(item.task_id, item.sid)
    updates: list[tuple[str | None, str | None, str]] = [(seen, commit, target)]
    args = [f"--force-with-lease={target}:{seen}", f"+{commit}:{target}"]
    name = submit_ref(item.task_id, item.sid)
    if source == item.commit:
        updates.append((source, None, name))
        args += [f"--force-with-lease={name}:{source}", f":{name}"]
    sign = push_signature(key, updates)
    proc = run(["push", "--atomic", "--porcelain", "--no-verify", *sign, url, *args])
    if proc.returncode != 0:
        raise InfrastructureError(
            f"cannot replace the untrusted verdict of {item.sid}: {git.server_said(proc.stderr)}"
        )
