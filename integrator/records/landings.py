"""Where a landing is now: the reader every claim-to-landing mapping goes through.

A consumed claim names the staging commit its landing made. A queue rebuild (after an
ejection) re-merges later landings onto the last good head: their new staging commits
carry `Integrator-Replaces: <the commit replaced>` and `Integrator-Landing: <the staging
commit the claim names>`, so a landing keeps one name however often it is rebuilt. An
ejected landing has its record at `refs/integrator/ejected/<target>/<that name>`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pygit2

from integrator.documents.promotion import EjectionRecord
from integrator.documents.trailers import TRAILER_CANDIDATE, TRAILER_REVERTS, trailers
from integrator.escape import visible
from integrator.records import validations
from integrator.records.canonical import Canonical
from integrator.records.claims import REVERT_TASK_PREFIX

TRAILER_LANDING = "Integrator-Landing"
TRAILER_TASK = "Integrator-Task"
State = Literal["queued", "promoted", "ejected", "reverted", "gone"]
_WALK = 100_000  # queue commits read back while looking for a rebuilt landing
_REVERT_WALK = 10_000  # queue commits since a landing read back while looking for its revert


@dataclass(frozen=True)
class Whereabouts:
    """A landing's state: on the queue (maybe rebuilt as `commit`), promoted, or ejected."""

    landing: str
    state: State
    commit: str | None = None  # the queue commit holding it now
    tree: str | None = None
    ejection: EjectionRecord | None = None
    reverted_by: str | None = None  # the queue commit that landed its revert

    @property
    def rebuilt(self) -> bool:
        return self.commit is not None and self.commit != self.landing

    def wire(self) -> dict[str, object]:
        out: dict[str, object] = {"landing": self.landing, "state": self.state}
        if self.commit is not None:
            out["stagingCommit"] = self.commit
        if self.tree is not None:
            out["tree"] = self.tree
        if self.ejection is not None:
            out["ejection"] = self.ejection.ejected.wire()
        if self.reverted_by is not None:
            out["revertedBy"] = self.reverted_by
        return out


def _commit(repo: pygit2.Repository, oid: str) -> pygit2.Commit | None:
    try:
        obj = repo[oid]
    except (KeyError, ValueError):
        return None
    return obj if isinstance(obj, pygit2.Commit) else None


def _contains(repo: pygit2.Repository, tip: str | None, oid: str) -> bool:
    if tip is None:
        return False
    if tip == oid:
        return True
    try:
        return bool(repo.descendant_of(pygit2.Oid(hex=tip), pygit2.Oid(hex=oid)))
    except (KeyError, ValueError, pygit2.GitError):
        return False


def replacement(canonical: Canonical, landing: str, queue: str) -> pygit2.Commit | None:
    """The commit on the queue's first-parent chain that carries `landing` (rebuilt), or
    None. Walks back from the queue head to where the landing's own history joins it; a
    repository without the landing's own commit (an agent's clone: the landing left the
    queue before it was ever fetched) reads back up to the walk's bound instead."""
    repo = canonical.repo
    start = _commit(repo, queue)
    if start is None:
        return None
    joined = None
    if _commit(repo, landing) is not None:
        try:
            joined = repo.merge_base(pygit2.Oid(hex=landing), start.id)
        except (KeyError, ValueError, pygit2.GitError):
            joined = None
    stop = str(joined) if joined is not None else None
    commit: pygit2.Commit | None = start
    for _ in range(_WALK):
        if commit is None or str(commit.id) == stop:
            return None
        if trailers(commit.message).get(TRAILER_LANDING) == landing:
            return commit
        parents = commit.parent_ids
        commit = _commit(repo, str(parents[0])) if parents else None
    return None


def locate(canonical: Canonical, landing: str, *, reverts: Reverts | None = None) -> Whereabouts:
    """Where the landing its claim names `landing` is now (a rebuilt copy of it, as a
    recovered verdict may name, stands for the landing it copies). `reverts`, when given,
    answers `reverted_by` from one read of the queue (many landings: `Finder`)."""
    repo = canonical.repo
    named = _commit(repo, landing)
    if named is not None:
        landing = landing_name(named)
    queue = canonical.ref(canonical.queue_ref)
    target = canonical.ref(canonical.target_ref)
    found: pygit2.Commit | None = None
    if _contains(repo, queue, landing):
        found = _commit(repo, landing)
    if found is None:
        ejection = validations.read_ejection(canonical, canonical.target, landing)
        if ejection is not None:
            return Whereabouts(landing, "ejected", ejection=ejection)
        if queue is not None:
            found = replacement(canonical, landing, queue)
    if found is None:
        return Whereabouts(landing, "gone")
    oid = str(found.id)
    names = {landing, oid}
    if reverts is not None:
        undone = reverts.reverted_by(found, names)
    else:
        undone = reverted_by(canonical, queue, found, names)
    if undone is not None:
        return Whereabouts(landing, "reverted", oid, str(found.tree_id), reverted_by=undone)
    state: State = "promoted" if _contains(repo, target, oid) else "queued"
    return Whereabouts(landing, state, oid, str(found.tree_id))


def _reverts(repo: pygit2.Repository, commit: pygit2.Commit) -> str | None:
    """What the queue commit `commit` reverts, or None: its own `Integrator-Reverts` trailer
    (a revert's landing carries it), else its candidate's (landings made before the staging
    commit carried it; needs the candidate's objects, which only the landing host has).
    Only a landing of the revert's own task counts (`revert-<reverted[:12]>`, issued by
    `integrator revert`): an agent's candidate that merely says it reverts another landing
    never marks that landing reverted."""
    found = trailers(commit.message)
    name = found.get(TRAILER_REVERTS)
    if name is None:
        candidate = found.get(TRAILER_CANDIDATE)
        undoes = _commit(repo, candidate) if candidate else None
        name = trailers(undoes.message).get(TRAILER_REVERTS) if undoes is not None else None
    if name is None or found.get(TRAILER_TASK) != REVERT_TASK_PREFIX + name[:12]:
        return None
    return name


def reverted_by(
    canonical: Canonical, queue: str | None, landed: pygit2.Commit, names: set[str]
) -> str | None:
    """The queue commit since `landed` that landed a revert of one of `names` (the
    landing's name or its queue commit), or None. Reads the queue back to `landed`."""
    repo = canonical.repo
    commit = _commit(repo, queue) if queue is not None else None
    for _ in range(_REVERT_WALK):
        if commit is None or commit.id == landed.id:
            return None
        if _reverts(repo, commit) in names:
            return str(commit.id)
        parents = commit.parent_ids
        commit = _commit(repo, str(parents[0])) if parents else None
    return None


class Reverts:
    """`reverted_by` for many landings of one queue: the queue's first parents read back
    once (as far as `reverted_by` reads), each revert on it indexed by what it reverts."""

    def __init__(self, canonical: Canonical, queue: str | None) -> None:
        repo = canonical.repo
        self._chain: list[str] = []  # queue commits, newest first
        self._reverts: dict[str, list[int]] = {}  # reverted name → positions on the chain
        commit = _commit(repo, queue) if queue is not None else None
        while commit is not None and len(self._chain) < _REVERT_WALK:
            name = _reverts(repo, commit)
            if name:
                self._reverts.setdefault(name, []).append(len(self._chain))
            self._chain.append(str(commit.id))
            parents = commit.parent_ids
            commit = _commit(repo, str(parents[0])) if parents else None
        self._position = {oid: i for i, oid in enumerate(self._chain)}

    def reverted_by(self, landed: pygit2.Commit, names: set[str]) -> str | None:
        """What `reverted_by(canonical, queue, landed, names)` answers, from the index."""
        above = self._position.get(str(landed.id), len(self._chain))
        found = [i for name in names for i in self._reverts.get(name, ()) if i < above]
        return self._chain[min(found)] if found else None


class Finder:
    """`locate` for many landings of one repository (`integrator history`, the review
    pages): the queue is read for reverts once, not once per landing."""

    def __init__(self, canonical: Canonical) -> None:
        self.canonical = canonical
        self._reverts: Reverts | None = None
        self._found: dict[str, Whereabouts] = {}

    def locate(self, staging: str) -> Whereabouts:
        found = self._found.get(staging)
        if found is None:
            if self._reverts is None:
                canonical = self.canonical
                self._reverts = Reverts(canonical, canonical.ref(canonical.queue_ref))
            found = self._found[staging] = locate(self.canonical, staging, reverts=self._reverts)
        return found

    def wire(self, staging: str | None) -> dict[str, object] | None:
        """`locate(staging).wire()`, None without a staging commit or a queue to look in."""
        if staging is None or self.canonical.ref(self.canonical.queue_ref) is None:
            return None
        return self.locate(staging).wire()


class Fetched(Canonical):
    """A repository holding another's refs under `prefix` (what an agent fetched from the
    canonical server into its clone): `ref("refs/X")` reads `prefix + "X"`, and only the
    names in `fetched` (what the last fetch brought: nothing older is believed)."""

    def __init__(self, path: Path, prefix: str, target: str, fetched: set[str]) -> None:
        super().__init__(path)
        self._prefix = prefix
        self._target = target
        self._fetched = fetched

    @property
    def target(self) -> str:
        return self._target

    def ref(self, name: str) -> str | None:
        local = self._prefix + name.removeprefix("refs/")
        if local not in self._fetched and not any(
            local.startswith(wild) for wild in self._fetched if wild.endswith("/")
        ):
            return None
        return super().ref(local)


def landing_name(commit: pygit2.Commit) -> str:
    """The name a queue commit's landing goes by (the staging commit its claim names)."""
    return trailers(commit.message).get(TRAILER_LANDING, str(commit.id))


def whereabouts(repo: Path, staging: str) -> dict[str, object] | None:
    """`locate` for a reader outside the daemon (`integrator status`): None when `repo`
    holds no queue to look in."""
    from integrator.errors import IntegratorError

    try:
        with Canonical(repo) as canonical:
            if canonical.ref(canonical.queue_ref) is None:
                return None
            return locate(canonical, staging).wire()
    except IntegratorError:
        return None


def ejection_of(where: dict[str, object]) -> tuple[str, str]:
    """An ejected landing's code and why (the ejection record's own words), else `-`."""
    ejection = where.get("ejection")
    if not isinstance(ejection, dict):
        return "-", "-"
    return str(ejection.get("code") or "-"), str(ejection.get("detail") or "-")


def summary(where: dict[str, object]) -> str:
    """A landing's state in a few words, for a list (`integrator history`, the pages)."""
    state = str(where["state"])
    if state == "ejected":
        return f"ejected ({ejection_of(where)[0]})"
    if state == "reverted":
        return f"reverted by {str(where.get('revertedBy'))[:12]}"
    if state == "gone":
        return "no longer on the queue"
    return state


def describe(where: dict[str, object]) -> str:
    """One line for a person: where a landing is now."""
    state, commit, landing = where["state"], where.get("stagingCommit"), where["landing"]
    if state == "ejected":
        code, detail = ejection_of(where)
        first = detail.splitlines()[0] if detail.strip() else "-"
        return (
            f"landing: ejected from the queue ({code}: {visible(first[:200])}); the claim names "
            f"{str(landing)[:12]}"
        )
    if state == "gone":
        return f"landing: {str(landing)[:12]} is no longer on the queue"
    if state == "reverted":
        return (
            f"landing: reverted (by {str(where.get('revertedBy'))[:12]}); it is not on the target"
        )
    how = f"as {str(commit)[:12]}" + (
        f" (rebuilt; the claim names {str(landing)[:12]})" if commit != landing else ""
    )
    return f"landing: {state} {how}"
