"""Literal paths are matched through a set: a contract naming 100,000 paths one by one costs
O(n) to build and O(1) per path matched. Counted, not timed (`python -m bench.literals`
prints the timings and the same counts)."""

from __future__ import annotations

import pytest

from bench.literals import count_calls, literal_paths
from integrator.paths import PathMatcher


def test_a_hundred_thousand_literal_paths_compile_to_a_set(monkeypatch: pytest.MonkeyPatch) -> None:
    """No regex and no prefix scan: pathspec is never asked for a translation, and every
    anchored literal lands in the set a lookup answers from."""
    import pathspec

    def refuse(*_: object, **__: object) -> object:
        raise AssertionError("a literal path was translated to a regex")

    monkeypatch.setattr(pathspec.PathSpec, "from_lines", refuse)
    globs = literal_paths(100_000)
    matcher = PathMatcher.of(globs)
    compiled = matcher._allow
    assert compiled.regex is None and compiled.starts == () and compiled.prefixes == ()
    assert len(compiled.literals) == 100_000
    assert matcher.covers("pkg/part_0999/module_099999.py")
    assert not matcher.covers("pkg/part_0999/module_099999.pyc")


def test_matching_a_path_makes_the_same_calls_whatever_the_contract_names() -> None:
    """Matching 200 paths (100 named, 100 not) makes as many function calls against 1,000
    literal paths as against 100,000: each lookup is O(1). A folder pattern and a wildcard
    beside them change that by a constant, not by n."""
    small = PathMatcher.of([*literal_paths(1_000), "/docs/**", "*.md"])
    large = PathMatcher.of([*literal_paths(100_000), "/docs/**", "*.md"])
    probes = literal_paths(100) + [f"other/{i}.py" for i in range(100)]
    probes = [p.lstrip("/") for p in probes]
    counts = []
    for matcher in (small, large):
        matcher.covers(probes[0])  # compiled lazily (bytes forms): not part of the count
        counts.append(count_calls(lambda m=matcher: [m.covers(p) for p in probes]))  # type: ignore[misc]
    assert counts[0] == counts[1]
    assert all(large.covers(p) for p in probes[:100])


def test_building_costs_the_same_calls_per_path() -> None:
    """Building the matcher: the same function calls per path at 1,000 and 100,000."""
    per_path = []
    for n in (1_000, 100_000):
        globs = (*literal_paths(n), f"/fresh/{n}")  # never a cache hit
        per_path.append(count_calls(lambda g=globs: PathMatcher(g)) / n)  # type: ignore[misc]
    assert per_path[0] == pytest.approx(per_path[1], rel=0.01)
