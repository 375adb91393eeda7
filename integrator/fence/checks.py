"""Gate decisions: pure functions from fetched state to violations and verdicts.

Nothing here reads git or the clock: callers pass the parsed contract, the live claim as
read from its ref, the recomputed diff, the policy and `now`. Checks run cheapest first so
a flood of stale submissions costs almost nothing: identity and live claim need no diff.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from integrator import paths
from integrator.documents.categories import Category
from integrator.documents.contract import OwnershipContract
from integrator.documents.policy import Policy, category_of_resource
from integrator.documents.verdict import (
    Code,
    Decision,
    Determination,
    ResourceUse,
    Verdict,
    Violation,
    decide,
)
from integrator.fence.diff import MODE_LINK, Change, RecomputedDiff, Status
from integrator.fence.resources import determine, touched_resources


def symlink_escape(link_path: str, target: bytes) -> str | None:  # noqa: PLR0911 — one return per kind of escape, naming it
    """Why a symlink at `link_path` pointing at `target` escapes, or None.

    Resolution is lexical from the link's folder: absolute targets, targets that climb
    above the repository root, and targets with a `.git` component all escape. So does a
    target that goes down into a folder and then up again (`a/../b`): if `a` is itself a
    symlink, `..` leaves from wherever `a` points, and a chain of links, each harmless
    alone, reaches outside. With `..` only in front, every link climbs from its own real
    folder and then only descends, so links that each stay inside cannot escape together.
    """
    try:
        text = target.decode("utf-8")
    except UnicodeDecodeError:
        return "target is not valid UTF-8"
    if not text:
        return "target is empty"
    if "\x00" in text or "\\" in text:
        return f"target {text!r} holds a NUL or backslash"
    if text.startswith("/") or (len(text) > 1 and text[1] == ":"):
        return f"target {text!r} is absolute"
    stack = link_path.split("/")[:-1]
    descended = False
    for part in text.split("/"):
        if part in ("", "."):
            continue
        if part.rstrip(" .") in ("", "..") and part not in ("..",):
            # Windows drops trailing spaces and dots: '.. ' and '...' are '..' or '.' there.
            return f"target {text!r} has a component {part!r} some checkouts read as '..'"
        if paths.is_dotgit(part):
            return f"target {text!r} points into .git"
        if part == "..":
            if descended:
                return (
                    f"target {text!r} goes down and back up ('..' after a folder name): "
                    "through a symlink that climbs from elsewhere; write it with '..' only "
                    "in front"
                )
            if not stack:
                return f"target {text!r} climbs above the repository root"
            stack.pop()
        else:
            descended = True
            stack.append(part)
    return None


def _mode(policy: Policy, category: Category) -> Literal["enforce", "observe"]:
    return policy.mode_for(category)


def _cover(matcher: paths.PathMatcher, shared: paths.PathMatcher, path: str) -> tuple[bool, str]:
    """Whether the contract (or the policy's shared paths) lets `path` be written, and why."""
    match = matcher.match(path)
    if match.denied_by is not None:
        return False, match.reason
    if match.allowed:
        return True, match.reason
    if shared.covers(path):
        return True, "shared by policy"
    return False, "not matched by any allowed pattern"


def check_diff(
    contract: OwnershipContract, diff: RecomputedDiff, policy: Policy
) -> tuple[list[Violation], list[ResourceUse]]:
    """Prove every changed path, rename end, mode, symlink, submodule and resource."""
    owner = _Owner(contract.matcher(), policy.shared_paths, frozenset(contract.resources))
    out: list[Violation] = []
    for change in diff.changes:
        out.extend(_change_violations(change, diff, owner, policy))
    for collision in diff.collisions:
        code = Code.CASE_COLLISION if collision.kind == "case" else Code.UNICODE_COLLISION
        out.append(
            Violation(
                code=code,
                path=collision.path,
                detail=f"{collision.path!r} collides with {collision.other!r} "
                f"under {'case folding' if collision.kind == 'case' else 'Unicode NFC'}",
            )
        )
    for path in diff.non_nfc:
        out.append(Violation(code=Code.UNSAFE_PATH, path=path, detail="path is not in Unicode NFC"))
    if diff.patch_bytes > contract.max_patch_bytes:
        out.append(
            Violation(
                code=Code.PATCH_TOO_LARGE,
                detail=f"patch is {diff.patch_bytes} bytes, the contract allows "
                f"{contract.max_patch_bytes}",
            )
        )
    uses, resource_violations = _resource_violations(diff, owner, policy, out)
    return [*out, *resource_violations], uses


@dataclass(frozen=True)
class _Owner:
    """What a contract (and the policy's shared paths) lets a change write."""

    matcher: paths.PathMatcher
    shared: paths.PathMatcher
    resources: frozenset[str]

    def cover(self, path: str) -> tuple[bool, str]:
        return _cover(self.matcher, self.shared, path)


def _change_violations(
    change: Change, diff: RecomputedDiff, owner: _Owner, policy: Policy
) -> list[Violation]:
    """Every violation of one change: unsafe names, ownership of each end, symlink escape."""
    out = [
        Violation(code=Code.UNSAFE_PATH, path=written, detail=f"path {problem}")
        for written in change.paths
        if (problem := paths.unsafe_reason(written))
    ]
    if change.touches_gitlink:
        return [*out, *_gitlink_violations(change, owner, policy)]
    mode = _mode(policy, policy.category_of_path(change.path))
    if change.status is Status.RENAMED:
        out.extend(_rename_violations(change, owner, policy))
    else:
        ok, why = owner.cover(change.path)
        if not ok:
            if why.startswith("denied"):
                code = Code.PATH_DENIED
            elif change.mode_changed:
                code = Code.MODE_NOT_OWNED
            else:
                code = Code.PATH_NOT_OWNED
            detail = f"{_verb(change.status)} {change.path}: {why}"
            if change.mode_changed and change.old_mode is not None:
                detail += f" (mode {change.old_mode:06o} → {change.new_mode:06o})"
            out.append(Violation(code=code, path=change.path, detail=detail, mode=mode))
    if change.new_mode == MODE_LINK and change.new_path is not None:
        target = diff.symlink_targets.get(change.new_path, b"")
        escape = symlink_escape(change.new_path, target)
        if escape:
            out.append(Violation(code=Code.SYMLINK_ESCAPE, path=change.new_path, detail=escape))
    return out


def _gitlink_violations(change: Change, owner: _Owner, policy: Policy) -> list[Violation]:
    """Every end where a gitlink was or is needs its path and `submodule:<end>`: moving
    one away deletes that submodule. Each end is enforced or observed by its own
    category: a gitlink moved into an observed folder still needs its old end owned."""
    out: list[Violation] = []
    for link in change.gitlink_ends:
        mode = _mode(policy, policy.category_of_path(link))
        resource = f"submodule:{link}"
        path_ok, why = owner.cover(link)
        missing = []
        if not path_ok:
            missing.append(f"the path ({why})")
        if resource not in owner.resources:
            missing.append(f"the resource {resource}")
        if missing:
            out.append(
                Violation(
                    code=Code.SUBMODULE_NOT_OWNED,
                    path=link,
                    resource=resource,
                    detail=f"submodule {change.old_oid or 'none'} → "
                    f"{change.new_oid or 'none'} needs {' and '.join(missing)}",
                    mode=mode,
                )
            )
    return out


def _rename_violations(change: Change, owner: _Owner, policy: Policy) -> list[Violation]:
    """Both ends of a rename must be owned, each decided in its own category."""
    out: list[Violation] = []
    for label, end in (("old", change.old_path), ("new", change.new_path)):
        if end is None:
            continue
        ok, why = owner.cover(end)
        if not ok:
            out.append(
                Violation(
                    code=Code.RENAME_NOT_OWNED,
                    path=end,
                    detail=f"rename {change.old_path} → {change.new_path}: "
                    f"the {label} end is not owned ({why})",
                    mode=_mode(policy, policy.category_of_path(end)),
                )
            )
    return out


def _resource_violations(
    diff: RecomputedDiff, owner: _Owner, policy: Policy, found: list[Violation]
) -> tuple[list[ResourceUse], list[Violation]]:
    """A determination for every touched resource, and a violation for each not owned or
    unknown (a submodule `found` already names is not named twice)."""
    uses: list[ResourceUse] = []
    out: list[Violation] = []
    named = {v.resource for v in found if v.code is Code.SUBMODULE_NOT_OWNED}
    for touch in touched_resources(policy, diff.changes, diff.reconfigured):
        determination = determine(policy, owner.resources, touch)
        uses.append(
            ResourceUse(
                resource=touch.resource, determination=determination, paths=list(touch.paths)
            )
        )
        if touch.resource in named:
            continue
        rmode = _mode(policy, category_of_resource(touch.resource))
        where = ", ".join(touch.paths)
        if determination is Determination.NOT_OWNED:
            out.append(
                Violation(
                    code=Code.RESOURCE_NOT_OWNED,
                    resource=touch.resource,
                    detail=f"{where} touch {touch.resource}, which the contract does not list",
                    mode=rmode,
                )
            )
        elif determination is Determination.UNKNOWN:
            out.append(
                Violation(
                    code=Code.RESOURCE_UNKNOWN,
                    resource=touch.resource,
                    detail=f"{where} touch {touch.resource}, whose owner cannot be resolved "
                    "statically; review it or expand the claim",
                    mode=rmode,
                )
            )
    return uses, out


def _verb(status: Status) -> str:
    return {
        Status.ADDED: "adds",
        Status.DELETED: "deletes",
        Status.MODIFIED: "modifies",
        Status.RENAMED: "renames",
        Status.TYPECHANGE: "changes the type of",
    }[status]


def recovered_verdict(
    contract: OwnershipContract, candidate: str, tree: str, staging_commit: str
) -> Verdict:
    """ACCEPTED for a candidate that already landed (by an earlier or a concurrent run)."""
    return make_verdict(
        contract,
        [],
        candidate=candidate,
        policy_digest=contract.policy_digest,
        tree=tree,
        staging_commit=staging_commit,
        recovered=True,
    )


def make_verdict(
    contract: OwnershipContract | None,
    violations: Sequence[Violation],
    *,
    candidate: str | None,
    policy_digest: str | None,
    resources: Sequence[ResourceUse] = (),
    diff: RecomputedDiff | None = None,
    decision: Decision | None = None,
    **extra: Any,
) -> Verdict:
    """Assemble a verdict; the decision follows from the violations unless given."""
    fields: dict[str, object] = {
        "decision": decision or decide(violations),
        "violations": list(violations),
        "resources": list(resources),
        "candidate": candidate,
        "policy_digest": policy_digest,
    }
    if contract is not None:
        fields.update(
            base=contract.base_commit,
            task_id=contract.task_id,
            attempt_id=contract.attempt_id,
            generation=contract.ownership_generation,
            contract_digest=contract.digest,
        )
    if diff is not None:
        fields.update(changes=len(diff.changes), patch_bytes=diff.patch_bytes)
    fields.update(extra)
    return Verdict.model_validate(fields)
