"""Which expansion requests the policy grants without the coordinator (`[expansion]
auto_grant`), read on the safe side.

An added glob may touch `source` always (no category line need match what it matches),
and every category one of whose `[categories]` lines it overlaps under the claims'
conservative overlap rule (`integrator.fence.overlap`: a glob without a slash overlaps
everything). An added resource is of its kind's category; a `lockfile:` or `submodule:`
resource, like a CI, migration or codegen one, is never granted automatically (the policy
cannot name those: `integrator.documents.expansion.NEVER_AUTOMATIC`).
"""

from __future__ import annotations

from collections.abc import Sequence

from integrator.documents.expansion import ExpansionRequest
from integrator.documents.policy import Policy, category_of_resource
from integrator.fence.overlap import patterns_overlap

_KIND_CATEGORY = {"lockfile": "lockfiles", "submodule": "submodules"}


def glob_categories(policy: Policy, glob: str) -> set[str]:
    """The categories a path matched by `glob` may be in."""
    found = {"source"}
    for category, lines in policy.categories.model_dump().items():
        if any(patterns_overlap(glob, line) for line in lines):
            found.add(category)
    return found


def resource_category(resource: str) -> str:
    kind = resource.partition(":")[0]
    return _KIND_CATEGORY.get(kind) or category_of_resource(resource).value


def not_automatic(policy: Policy, request: ExpansionRequest) -> str | None:
    """Why `request` waits for the coordinator; None when the policy grants it now."""
    allowed = set(policy.expansion.auto_grant)
    if not allowed:
        return "the policy grants no expansion automatically ([expansion] auto_grant is empty)"
    problems: list[str] = []
    for glob in request.add_paths:
        beyond = glob_categories(policy, glob) - allowed
        if beyond:
            problems.append(f"path {glob!r} may touch {_names(sorted(beyond))}")
    for resource in request.add_resources:
        category = resource_category(resource)
        if category not in allowed:
            problems.append(f"resource {resource} is {category}")
    if not problems:
        return None
    return (
        "; ".join(problems)
        + f", and the policy grants only {_names(sorted(allowed))} automatically"
    )


def _names(names: Sequence[str]) -> str:
    return ", ".join(names)
