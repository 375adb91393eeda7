"""The proof of what a landing lands: queue head → merged tree, not base → candidate.

When the queue moved since the candidate's base, the merged tree can differ from the
candidate's own entries (an edit git carried along a rename made on the queue, a symlink
moved with a new target, a content merge): those writes go through the diff checks again,
semantic resources both sides touched are a conflict, and names the queue added may collide
with the candidate's. Folders the gate already proved are not read again.
"""

from __future__ import annotations

from integrator.documents.verdict import Code, Violation
from integrator.fence.checks import check_diff
from integrator.fence.diff import TooManyChanges, find_collisions, recompute
from integrator.fence.trees import MalformedTree, Prune, changed_leaves
from integrator.landing.context import Head, LandingContext
from integrator.landing.evaluation import Complete
from integrator.landing.merge import resources_touched_since_base


def merge_violations(
    ctx: LandingContext, ev: Complete, head: Head, merged: bytes
) -> list[Violation]:
    """What the merged tree adds to the gate's verdict when the queue moved since the base:
    writes the merge made that the candidate did not, semantic resources both sides
    touched, and names that collide with what the queue added."""
    base, diff, policy = ev.base, ev.diff, ev.policy
    problems = _merge_effects(ctx, ev, head, merged)
    shared = set(policy.policy.shared.resources)
    touched = [r.resource for r in ev.resources if r.resource not in shared]
    touched_since = (
        resources_touched_since_base(
            ctx.repo, policy.policy, base.tree, head.tree_object(ctx), touched
        )
        if touched
        else {}
    )
    for resource, paths in touched_since.items():
        problems.append(
            Violation(
                code=Code.RESOURCE_CONFLICT,
                resource=resource,
                detail=f"the queue changed {', '.join(paths)} ({resource}) since base; "
                "both sides touched it",
            )
        )
    # The gate found the candidate's tree free of collisions: only folders the merge made
    # differ from the candidate's are read again.
    checked = ev.candidate.tree_id.raw
    for collision in find_collisions(ctx.trees, merged, diff.added_paths, checked=checked):
        code = Code.CASE_COLLISION if collision.kind == "case" else Code.UNICODE_COLLISION
        problems.append(
            Violation(
                code=code,
                path=collision.path,
                detail=f"{collision.path!r} collides with {collision.other!r} on the queue head",
            )
        )
    return problems


def _merge_effects(ctx: LandingContext, ev: Complete, head: Head, merged: bytes) -> list[Violation]:
    """What lands is queue head → merged tree, not base → candidate: prove the difference.

    Where the merge wrote exactly the candidate's entries, the gate has proven them. Any
    other write — an edit git carried along a rename made on the queue since the base, a
    symlink moved with a new target, a content merge — sends the whole landing through
    the diff checks again, from the queue head.
    """
    contract, diff, policy = ev.contract, ev.diff, ev.policy
    expected: dict[str, tuple[int | None, str | None] | None] = {}
    for change in diff.changes:
        if change.old_path is not None:
            expected.setdefault(change.old_path, None)
        if change.new_path is not None:
            expected[change.new_path] = (change.new_mode, change.new_oid)
    for before, after in changed_leaves(ctx.trees, head.tree, merged, prune=_gate_proved(ctx, ev)):
        leaf = after or before
        assert leaf is not None
        actual = (after.mode, str(after.oid)) if after is not None else None
        if leaf.path not in expected or expected[leaf.path] != actual:
            break
    else:
        return []
    try:
        landed = recompute(
            ctx.repo,
            head.tree,
            merged,
            rename_limit=policy.policy.integration.rename_limit,
            reader=ctx.trees,
            patch_limit=contract.max_patch_bytes,
        )
    except (MalformedTree, TooManyChanges) as err:
        return [Violation(code=Code.UNSAFE_PATH, detail=f"the merged tree: {err}")]
    violations, _ = check_diff(contract, landed, policy.policy)
    return [
        v.model_copy(
            update={
                "detail": "merged onto the queue head (git carries a change along a rename "
                f"made on the queue since the base): {v.detail}"
            }
        )
        for v in violations
    ]


def _gate_proved(ctx: LandingContext, ev: Complete) -> Prune:
    """Folders whose head → merged difference is the candidate's own, which the gate proved.

    Where the queue head's folder is still the base's and the merged folder is the
    candidate's, every leaf that differs below is one of the gate's recomputed changes
    (the gate walked the same two trees): the walk need not open them again.
    """
    base, cand = ev.base.tree_id.raw, ev.candidate.tree_id.raw
    reader = ctx.trees

    def proved(path: str, old: bytes, new: bytes) -> bool:
        return reader.folder(cand, path) == new and reader.folder(base, path) == old

    return proved
