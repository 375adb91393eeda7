"""Bundles: candidates from clones that do not share the canonical object store.

`integrator submit --bundle` packs the candidate (minus what its base already has) into the
submission; the daemon copies the bundle into a folder of its own, verifies the copy and
fetches it into `refs/integrator/quarantine/<submission>/`, fsck'ing every object, and
nothing reaches a real ref unless the candidate lands.

A bundle is the submitter's: its ref names and its pack can make git fail with any message
they like. So a failed import is classified by probing this host (free space, a writable
object store), never by reading git's message: a healthy host means the bundle is bad.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from integrator import refnames
from integrator.errors import InfrastructureError, UsageError
from integrator.limits import BUNDLE_HEADER_BYTES, MAX_BUNDLE_REFS
from integrator.paths import escape_undecodable
from integrator.plumbing import git, transaction

if TYPE_CHECKING:
    import pygit2


# A bundle's ref names are spelled by its submitter and end up in git's messages and in
# our refspecs: only plain names are accepted.
_REF_NAME = re.compile(r"^(?:HEAD|refs/(?:[A-Za-z0-9._-]+/)*[A-Za-z0-9._-]+)$")
_OID = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")


def create_bundle(repo_path: Path, candidate: str, base: str | None, out: Path) -> None:
    """Write a bundle of `candidate` (minus what `base` already has) to `out`.

    `git bundle` only packs named refs, so the candidate gets a short-lived ref under
    refs/integrator/outgoing/ in the submitting clone, written and removed through git.py.
    """
    ref = f"{refnames.OUTGOING}{out.parent.name}"
    args = ["bundle", "create", "-q", str(out), ref]
    # A git process, not libgit2: submit runs after every task and must start light.
    if base and base != candidate and _OID.match(base) and _has_commit(repo_path, base):
        args.append(f"^{base}")
    with transaction.RefUpdater(repo_path) as updater:
        updater.apply([transaction.update(ref, candidate, None)])
        try:
            git.run_git(args, cwd=repo_path)
        finally:
            updater.apply([transaction.delete(ref, candidate)])


def _has_commit(repo_path: Path, oid: str) -> bool:
    probe = git.run_git(["cat-file", "-e", f"{oid}^{{commit}}"], cwd=repo_path, check=False)
    return probe.returncode == 0


def bundle_refs(path: Path) -> list[tuple[str, str]]:
    """(oid, refname) pairs of a v2/v3 bundle header; UsageError when it is not one."""
    with open(path, "rb") as fh:
        head = fh.read(BUNDLE_HEADER_BYTES)
    end = head.find(b"\n\n")
    lines = head[:end].decode("utf-8", "replace").split("\n") if end > 0 else []
    if not lines or lines[0] not in ("# v2 git bundle", "# v3 git bundle"):
        raise UsageError("the bundle has no git bundle v2/v3 header")
    refs = []
    for line in lines[1:]:
        if line.startswith(("-", "@")):
            continue  # prerequisites and v3 capabilities
        oid, _, name = line.partition(" ")
        if not _OID.match(oid):
            raise UsageError(f"the bundle header has an unreadable line {line[:80]!r}")
        if not _REF_NAME.match(name) or ".." in name or name.endswith((".lock", ".")):
            raise UsageError(f"the bundle names a ref that is not a plain ref name: {name[:80]!r}")
        refs.append((oid, name))
    if not refs:
        raise UsageError("the bundle holds no refs")
    if len(refs) > MAX_BUNDLE_REFS:
        raise UsageError(f"the bundle holds {len(refs)} refs, more than {MAX_BUNDLE_REFS}")
    return refs


def quarantine_prefix(sid: str) -> str:
    return f"{refnames.QUARANTINE}{sid}/"


def import_bundle(
    repo: pygit2.Repository, sid: str, bundle: Path, candidate: str, max_bytes: int
) -> None:
    """Import a submission's bundle under refs/integrator/quarantine/<sid>/.

    Nothing here touches a real ref; the daemon deletes the quarantine refs when it files
    the submission. A bad bundle is a UsageError (the submission is rejected); a failing
    fetch of a bundle that verified is an InfrastructureError (retried later).
    """
    cwd = repo.path
    size = os.lstat(bundle).st_size
    if size > max_bytes:
        raise UsageError(f"the bundle is {size} bytes, more than the limit of {max_bytes}")
    refs = bundle_refs(bundle)
    verified = git.run_git(["bundle", "verify", "--quiet", str(bundle)], cwd=cwd, check=False)
    if verified.returncode != 0:
        trouble = git.host_trouble(repo, size)
        if trouble is not None:
            raise InfrastructureError(f"importing the bundle failed: {trouble}")
        why = escape_undecodable(verified.stderr.decode("utf-8", "replace").strip())
        summary = "; ".join(why.splitlines()[-2:])[:300]
        raise UsageError(f"the bundle does not verify against the repository: {summary}")
    prefix = quarantine_prefix(sid)
    specs = [f"+{name}:{prefix}{i}" for i, (_, name) in enumerate(refs)]
    # fsck every object on the way in: a fenced candidate stays reachable (its held ref),
    # and an object git fsck rejects would then break every clone that checks transfers.
    fetch = ["-c", "fetch.fsckObjects=true", "fetch", "--quiet", "--no-tags",
             "--no-write-fetch-head", "--no-auto-maintenance"]  # fmt: skip
    proc = git.run_git([*fetch, str(bundle), *specs], cwd=cwd, check=False)
    if proc.returncode != 0:
        trouble = git.host_trouble(repo, size)
        if trouble is not None:
            raise InfrastructureError(f"importing the bundle failed: {trouble}")
        # `bundle verify` checks the header and prerequisites, not the pack: on a healthy
        # host, a pack that does not unpack (or fails fsck) is the submission's fault.
        message = escape_undecodable(proc.stderr.decode("utf-8", "replace").strip())
        summary = "; ".join(message.splitlines()[-2:])[:300] or f"exit {proc.returncode}"
        raise UsageError(f"the bundle's objects could not be imported: {summary}")
    if not git.has_object(repo, candidate):
        raise UsageError(f"the bundle does not contain the candidate {candidate}")
