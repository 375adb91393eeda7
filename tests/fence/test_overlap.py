"""Overlap between claims costs what the claims name, not their product: contracts that name
thousands of paths one by one are checked against each other through an index."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from integrator.fence import overlap
from integrator.fence.overlap import Overlap, find_overlaps, patterns_overlap

_COMPONENTS = st.sampled_from(["a", "A", "b", "src", "*", "**", "x?", "[ab]", "a.md", "é"])


@st.composite
def _pattern(draw: st.DrawFn) -> str:
    body = "/".join(draw(st.lists(_COMPONENTS, min_size=1, max_size=4)))
    return draw(st.sampled_from(["", "/"])) + body + draw(st.sampled_from(["", "/", "/**"]))


@settings(max_examples=300, deadline=None)
@given(mine=st.lists(_pattern(), max_size=6), theirs=st.lists(_pattern(), max_size=6))
def test_the_index_finds_exactly_the_pairs_the_rule_admits(
    mine: list[str], theirs: list[str]
) -> None:
    """Every pair `patterns_overlap` admits, in the order of both lists (duplicates kept)."""
    pairwise = [Overlap("path", a, b) for a in mine for b in theirs if patterns_overlap(a, b)]
    assert find_overlaps(mine, [], theirs, []) == pairwise


def test_two_claims_named_path_by_path_are_not_compared_pair_by_pair(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two contracts of n literal paths each: each pattern's prefix is read once (2n), not
    once per pair (2n², which for n = 2,000 took 31 s at every issue, reclaim and expand
    while the other claim was live)."""
    n = 300
    calls: list[str] = []
    real = overlap.literal_prefix  # type: ignore[attr-defined]

    def counting(pattern: str) -> str:
        calls.append(pattern)
        return real(pattern)

    monkeypatch.setattr(overlap, "literal_prefix", counting)
    mine = [f"/pkg/a/module_{i:04d}.py" for i in range(n)]
    theirs = [f"/pkg/b/module_{i:04d}.py" for i in range(n)] + ["/pkg/a/module_0007.py"]
    found = find_overlaps(mine, [], theirs, [])
    assert found == [Overlap("path", "/pkg/a/module_0007.py", "/pkg/a/module_0007.py")]
    assert len(calls) <= 2 * n + 1


def test_a_folder_and_an_unanchored_pattern_still_overlap_every_path_below() -> None:
    """What the index answers for the patterns that overlap many: a folder claim against
    paths below it, and an unanchored name (root prefix) against everything."""
    paths = [f"/src/m{i}.py" for i in range(5)] + ["/docs/a.md"]
    assert [o.mine for o in find_overlaps(paths, [], ["src/**"], [])] == paths[:5]
    assert [o.theirs for o in find_overlaps(["README"], [], paths, [])] == paths
