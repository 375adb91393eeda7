"""Semantic resources: which resources a change touches, and who may touch them.

A policy rule maps path patterns to a resource (`lockfile:{path}`, `migration-slot:billing`);
a gitlink always touches `submodule:<path>`. Each touched resource is determined:
OWNED (the contract lists it), SHARED (the policy lists it), UNKNOWN (a rule says its owner
cannot be resolved statically) or NOT_OWNED.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from integrator.documents.policy import Policy
from integrator.documents.verdict import Determination

if TYPE_CHECKING:
    from integrator.fence.diff import Change


@dataclass(frozen=True)
class Touch:
    resource: str
    unknown: bool
    paths: tuple[str, ...]


def resources_of_path(policy: Policy, path: str) -> list[tuple[str, bool]]:
    """(resource, unknown) pairs a change to `path` touches through the policy's rules."""
    out: list[tuple[str, bool]] = []
    for rule, matcher in policy.resource_matchers:
        if matcher.covers(path):
            out.append((rule.resource.replace("{path}", path), rule.unknown))
    return out


def touched_resources(
    policy: Policy, changes: Iterable[Change], reconfigured: tuple[str, ...] | None = ()
) -> list[Touch]:
    """Every resource the changes touch, with the paths that touched it, in stable order.

    `reconfigured`: submodules whose `.gitmodules` settings changed (each touches its
    `submodule:<path>`); None when `.gitmodules` could not be read, which touches the
    UNKNOWN resource `submodule:.gitmodules`.
    """
    found: dict[str, tuple[bool, list[str]]] = {}

    def add(resource: str, unknown: bool, path: str) -> None:
        was_unknown, seen = found.setdefault(resource, (unknown, []))
        if path not in seen:
            seen.append(path)
        found[resource] = (was_unknown or unknown, seen)

    for change in changes:
        for path in change.paths:
            for resource, unknown in resources_of_path(policy, path):
                add(resource, unknown, path)
        for end in change.gitlink_ends:  # a moved gitlink touches both submodules
            add(f"submodule:{end}", False, end)
    if reconfigured is None:
        add("submodule:.gitmodules", True, ".gitmodules")
    for path in reconfigured or ():
        add(f"submodule:{path}", False, ".gitmodules")
    return [Touch(r, u, tuple(p)) for r, (u, p) in sorted(found.items())]


def determine(policy: Policy, owned: Iterable[str], touch: Touch) -> Determination:
    if touch.resource in set(owned):
        return Determination.OWNED
    if touch.resource in policy.shared.resources:
        return Determination.SHARED
    if touch.unknown:
        return Determination.UNKNOWN
    return Determination.NOT_OWNED
