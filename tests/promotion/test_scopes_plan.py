"""The scoped promoter's pure decisions: which scopes a path belongs to, where the target
may move, when landings are reordered, and what is validated."""

from __future__ import annotations

from integrator.documents.policy import ValidationScope
from integrator.promotion.scopes import Plan, ScopeMap, plan, promotable

A, B = frozenset({"a"}), frozenset({"b"})
NAMES = ("a", "b")


def _plan(members: list[frozenset[str]], results: dict[str, dict[int, bool]]) -> Plan:
    return plan(members, NAMES, results, windows={"a": 8, "b": 8}, concurrency=1, budget=2)


def test_a_path_in_no_scope_belongs_to_every_scope() -> None:
    """A landing's scopes are those its paths match; an unmatched path adds every scope."""
    scopes = ScopeMap(
        [ValidationScope(name="a", paths=["a/**"]), ValidationScope(name="b", paths=["b/**"])]
    )
    assert scopes.of_paths(["a/x.py"]) == A
    assert scopes.of_paths(["a/x.py", "b/y.py"]) == A | B
    assert scopes.of_paths(["README.md"]) == A | B


def test_the_target_moves_only_where_every_touched_scope_passed() -> None:
    """Head 3 (a, b, a) needs a's result at two landings and b's at one; with a known only
    at one, the newest promotable head is 2."""
    members = [A, B, A]
    assert promotable(members, NAMES, {"a": {1: True, 2: True}, "b": {1: True}}) == 3
    assert promotable(members, NAMES, {"a": {1: True}, "b": {1: True}}) == 2
    assert promotable(members, NAMES, {"a": {1: False}, "b": {1: True}}) == 0


def test_first_both_scopes_are_validated_at_the_queue_head() -> None:
    """Nothing known: each scope's batch head, both at the newest queue head."""
    step = _plan([A, B, A, B], {})
    assert step.validate == (("a", 4), ("b", 4))


def test_a_failing_scope_has_the_other_scope_moved_before_its_suspects() -> None:
    """a failed at two landings, b passed: b's landings move before a's suspects."""
    step = _plan([A, B, A, B], {"a": {2: False}, "b": {2: True}})
    assert step.reorder == (1, (2, 4, 1, 3))


def test_after_the_reorder_the_other_scope_is_promoted_and_the_bisection_goes_on() -> None:
    """b's two first, then a's two: b promoted at head 2 while a is still bisected."""
    members = [B, B, A, A]
    step = _plan(members, {"a": {2: False}, "b": {2: True}})
    assert step.promote == 2
    step = _plan(members[2:], {"a": {2: False}})
    assert step.validate == (("a", 1),)


def test_the_culprit_is_ejected_by_its_own_scope() -> None:
    """a passed at one landing and failed at two: its second landing is ejected."""
    step = _plan([A, A, B], {"a": {1: True, 2: False}, "b": {}})
    assert step.promote == 1
    step = _plan([A, B], {"a": {1: False}, "b": {1: True}})
    assert step.eject == (1, "a")
