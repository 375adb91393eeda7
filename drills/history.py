"""Reading back what the drills recorded: worlds, verdicts, claims, policies and diffs.

Everything here reads files the drills left and runs `git` processes on the canonical
repositories; nothing asks integrator what it decided. integrator's code is used only to
*name* things (a policy's digest) and to match globs (`PathMatcher`), never to decide.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from drills.repo import POLICY, QUEUE, first_parent_chain, git, message, rev
from integrator.documents.policy import PolicyState, parse_policy
from integrator.documents.trailers import trailers
from integrator.paths import PathMatcher
from integrator.store.spool import SUBMISSION_FILE, VERDICT_FILE, submitted

GITLINK = "160000"


@dataclass(frozen=True)
class Recorded:
    """One decision as recorded: the contract it was made under and the verdict."""

    contract: dict[str, Any]
    verdict: dict[str, Any]
    source: Path

    @property
    def decision(self) -> str:
        return str(self.verdict.get("decision", ""))


@dataclass(frozen=True)
class Change:
    """One entry of `git diff --raw -M`: status, modes, and the path(s) it names."""

    status: str
    old_mode: str
    new_mode: str
    paths: tuple[str, ...]  # one path, or (old, new) for a rename or copy


@dataclass(frozen=True)
class Policy:
    shared: PathMatcher
    rules: tuple[tuple[PathMatcher, str], ...]  # (matcher, resource template)


@dataclass
class World:
    """A world folder left by a drill (see `drills.harness.World`)."""

    root: Path
    meta: dict[str, Any]
    _policies: dict[str, Policy] = field(default_factory=dict)

    @property
    def repo(self) -> Path:
        return Path(self.meta["repo"])

    @property
    def spool(self) -> Path:
        return Path(self.meta["spool"])

    @property
    def drill(self) -> str:
        return str(self.meta["drill"])

    def tagged(self, tag: str) -> bool:
        return tag in self.meta.get("tags", [])

    @cached_property
    def chain(self) -> list[str]:
        """Staging commits on the queue since `integrator init`, oldest first."""
        return first_parent_chain(self.repo, rev(self.repo, QUEUE), self.meta["initialHead"])

    def trailers(self, commit: str) -> dict[str, str]:
        return trailers(message(self.repo, commit))

    @cached_property
    def decisions(self) -> list[Recorded]:
        """Every verdict: filed by the daemon in the spool, or printed by `integrate`/`gate`."""
        out = []
        for folder in ("accepted", "fenced", "review"):
            base = self.spool / folder
            for sub in sorted(base.iterdir()) if base.is_dir() else []:
                verdict_file = sub / VERDICT_FILE
                if not verdict_file.exists():
                    continue
                submission = json.loads((submitted(sub) / SUBMISSION_FILE).read_text())
                verdict = json.loads(verdict_file.read_text())
                out.append(Recorded(submission["contract"], verdict, verdict_file))
        for path in sorted((self.root / "verdicts").glob("*.json")):
            doc = json.loads(path.read_text())
            if doc.get("verdict"):
                out.append(Recorded(doc["contract"], doc["verdict"], path))
        return out

    @cached_property
    def consumed(self) -> dict[str, tuple[str, dict[str, Any], dict[str, Any] | None]]:
        """staging commit → (claim commit, its contract, the claim state before consumption)."""
        out: dict[str, tuple[str, dict[str, Any], dict[str, Any] | None]] = {}
        refs = git("for-each-ref", "--format=%(refname)", "refs/integrator/claims/", cwd=self.repo)
        for ref in refs.split():
            for commit in git("rev-list", ref, cwd=self.repo).split():
                state = json.loads(git("show", f"{commit}:claim.json", cwd=self.repo))
                staging = state.get("stagingCommit")
                if state.get("state") != "consumed" or not staging:
                    continue
                contract = json.loads(git("show", f"{commit}:contract.json", cwd=self.repo))
                parent = rev(self.repo, f"{commit}^")
                before = (
                    json.loads(git("show", f"{parent}:claim.json", cwd=self.repo))
                    if parent
                    else None
                )
                out[staging] = (commit, contract, before)
        return out

    def policy(self, digest: str | None) -> Policy | None:
        """The policy a verdict names by digest, found in the policy ref's history."""
        if not self._policies:
            for commit in git("rev-list", POLICY, cwd=self.repo).split():
                text = git("show", f"{commit}:policy.toml", cwd=self.repo)
                generation = int(git("show", f"{commit}:generation", cwd=self.repo))
                name = PolicyState(parse_policy(text), generation, text).digest
                doc = tomllib.loads(text)
                rules = tuple(
                    (PathMatcher.of(rule["paths"]), str(rule["resource"]))
                    for rule in doc.get("resource", [])
                )
                shared = PathMatcher.of(doc.get("shared", {}).get("paths", []))
                self._policies[name] = Policy(shared, rules)
        return self._policies.get(digest or "")

    def diff(self, base: str, candidate: str, *, renames: bool = True) -> list[Change]:
        """`git diff --raw -z` from base to candidate, renames paired with -M (or not)."""
        flag = "-M" if renames else "--no-renames"
        out = git("diff", "--raw", "-z", "--no-abbrev", flag, base, candidate, cwd=self.repo)
        return list(_parse_raw(out))


def _parse_raw(out: str) -> Iterator[Change]:
    fields = out.split("\0")
    i = 0
    while i < len(fields) and fields[i].startswith(":"):
        meta = fields[i][1:].split()
        status = meta[4]
        count = 2 if status[0] in "RC" else 1
        yield Change(status[0], meta[0], meta[1], tuple(fields[i + 1 : i + 1 + count]))
        i += 1 + count


def load(run_dir: Path) -> list[World]:
    worlds = []
    for meta_file in sorted(run_dir.glob("*/*/world.json")):
        worlds.append(World(meta_file.parent, json.loads(meta_file.read_text())))
    return worlds


def touched_resources(policy: Policy, changes: list[Change]) -> set[str]:
    """Resources a diff touches under the policy's rules, plus `submodule:<path>` for gitlinks."""
    out = set()
    for change in changes:
        for path in change.paths:
            for matcher, template in policy.rules:
                if matcher.covers(path):
                    out.add(template.replace("{path}", path))
        if GITLINK in (change.old_mode, change.new_mode):
            out.add(f"submodule:{change.paths[-1]}")
    return out
