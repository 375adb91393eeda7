"""`Bounded` against a model: the most recently used kept within the budget of cost."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from integrator.caches import Bounded

_OPS = st.lists(
    st.tuples(st.sampled_from(["get", "put"]), st.integers(0, 9), st.integers(0, 30)),
    max_size=200,
)


@settings(max_examples=300, deadline=None)
@given(_OPS, st.integers(1, 60))
def test_bounded_keeps_what_a_least_recently_used_model_keeps(
    ops: list[tuple[str, int, int]], budget: int
) -> None:
    cache: Bounded[int, int] = Bounded(budget, cost=lambda v: v)
    model: list[tuple[int, int]] = []  # (key, value), least recently used first
    for op, key, value in ops:
        held = dict(model)
        if op == "get":
            assert cache.get(key) == held.get(key)
            if key in held:
                model.remove((key, held[key]))
                model.append((key, held[key]))
            continue
        assert cache.put(key, value) == value
        model = [(k, v) for k, v in model if k != key]
        while model and sum(v for _, v in model) + value > budget:
            model.pop(0)
        model.append((key, value))
        assert cache.held == sum(v for _, v in model)
        assert len(cache) == len(model) and all(k in cache for k, _ in model)
        # Within the budget, or one entry costlier than all of it kept alone.
        assert cache.held <= budget or len(cache) == 1


def test_clear_forgets_everything() -> None:
    cache: Bounded[str, bytes] = Bounded(10, cost=len)
    cache.put("a", b"12345")
    cache.clear()
    assert len(cache) == 0 and cache.held == 0 and cache.get("a") is None
