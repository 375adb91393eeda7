"""A scratch repository that reads a canonical repository's objects and keeps its own writes.

Deciding a recorded submission a second time (the shadow) runs the gate and the merge,
and a merge writes objects: rebuilt folders, and whatever `git merge-tree` writes. A
scratch repository borrows every object of the canonical one through
`objects/info/alternates` and keeps what it writes in a temporary folder removed
afterwards, so the canonical repository gains no object and no ref. What decides a merge
comes along: the repository identity, the target, `merge.*` settings and
`info/attributes` (where `merge=union` is read for a bare repository).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from integrator import refnames
from integrator.errors import ConfigurationError
from integrator.plumbing import git
from integrator.records.canonical import Canonical

_COPIED_SECTIONS = ("merge.", "diff.")
MARKER = "scratch-marker"


@contextmanager
def scratch(canonical: Canonical) -> Iterator[Canonical]:
    """A `Canonical` on a throwaway repository sharing `canonical`'s objects."""
    identity = canonical.identity
    if identity is None:
        raise ConfigurationError(
            f"cannot derive the identity of {canonical.path}; set `git config integrator.repoId`"
        )
    source = git.common_dir(canonical.repo)
    with tempfile.TemporaryDirectory(prefix="integrator-scratch-") as tmp:
        path = Path(tmp) / "scratch.git"
        git.run_git(["init", "-q", "--bare", str(path)], cwd=tmp)
        alternates = path / "objects" / "info" / "alternates"
        alternates.write_text(f"{(source / 'objects').resolve()}\n")
        attributes = source / "info" / "attributes"
        if attributes.is_file() and not attributes.is_symlink():
            (path / "info").mkdir(exist_ok=True)
            shutil.copyfile(attributes, path / "info" / "attributes")
        settings = {"integrator.repoId": identity, "integrator.target": canonical.target}
        for entry in canonical.repo.config:
            if entry.name.startswith(_COPIED_SECTIONS) and entry.value is not None:
                settings[entry.name] = str(entry.value)
        for key, value in settings.items():
            git.run_git(["config", key, value], cwd=path)
        # The gate reads a repository without claim refs as a CI clone (CLAIM_UNVERIFIED);
        # one marker ref makes it read this one as a canonical repository. Whoever decides
        # here answers the live-claim stage from the record, never from this ref.
        anchor = canonical.ref(canonical.queue_ref) or canonical.ref(canonical.target_ref)
        if anchor is not None:
            git.run_git(["update-ref", f"{refnames.CLAIMS}{MARKER}", anchor], cwd=path)
        borrowed = Canonical(path, clock=canonical.clock)
        try:
            yield borrowed
        finally:
            borrowed.close()
