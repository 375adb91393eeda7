"""The module caches of glob sets, glob checks and parsed contracts are bounded by what they
hold (patterns, characters, bytes), not by a count; `Shared` keeps its sum right when the
daemon's threads fill it at once."""

from __future__ import annotations

import json
import threading

from integrator import paths
from integrator.caches import Shared
from integrator.documents import contract
from tests.factories import contract_doc


def test_shared_keeps_its_sum_under_threads() -> None:
    cache: Shared[int, int] = Shared(500, cost=lambda v: v)

    def fill(seed: int) -> None:
        for i in range(3000):
            key = (i * 7 + seed) % 97
            if cache.get(key) is None:
                cache.put(key, key % 13 + 1)

    threads = [threading.Thread(target=fill, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    kept = [cache.get(k) for k in range(97)]
    assert cache.held == sum(v for v in kept if v is not None) <= 500


def test_compiled_glob_sets_are_bounded_by_their_patterns() -> None:
    """Sets of 1,000 globs each, well past the budget: what is kept stays within it (a
    count of 4,096 sets would have kept four million patterns), and a set used again is
    the same object."""
    first = paths._compile(("keep/**",))
    assert paths._compile(("keep/**",)) is first
    for n in range(2 * paths.COMPILED_PATTERNS // 1000):
        paths._compile(tuple(f"t{n}/d{j}/**" for j in range(1000)))
        assert paths._COMPILED.held <= paths.COMPILED_PATTERNS
    assert len(paths._COMPILED) <= paths.COMPILED_PATTERNS // 1000 + 1


def test_glob_checks_are_bounded_by_their_characters() -> None:
    long = "x" * 10_000
    for n in range(2 * paths.CHECKED_CHARS // 10_000):
        assert paths.glob_problem(f"{n}{long}/**") is None
        assert paths._CHECKED.held <= paths.CHECKED_CHARS
    assert paths.glob_problem("") == "empty pattern"


def test_parsed_contracts_are_bounded_by_their_bytes() -> None:
    """Distinct documents of ~30 KB each (whitespace after the JSON), past the budget: the
    kept bytes stay within it; the same bytes parse to the same object."""
    data = json.dumps(contract_doc()).encode()
    assert contract.parse_contract(data) is contract.parse_contract(data)
    for n in range(2 * contract.PARSED_BYTES // 30_000):
        body = json.dumps(contract_doc(taskId=f"task-{n}")).encode() + b" " * 30_000
        assert contract.parse_contract(body).task_id == f"task-{n}"
        assert contract._PARSED.held <= contract.PARSED_BYTES
    assert len(contract._PARSED) <= contract.PARSED_BYTES // 30_000 + 1
