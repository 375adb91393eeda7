"""`python -m bench.literals`: what claiming path by path costs, at 10,000 and 100,000 paths.

A contract that names its paths one by one (`/pkg/module_00001.py`, …) is matched through a
set, and checked for overlap with another live claim through an index of prefixes: both
should cost O(n). This prints, for each size, the time to build the matcher, to match
every named path and as many unnamed ones, and to check overlap against another claim of
the same size, the function calls each makes per path, and the ratios between the sizes:
linear work takes 10x the time and makes the same calls per path (n log n: about 12.5x,
n²: 100x and 10x the calls). Timings are CPU-time medians of `--rounds` runs, not a
pass/fail gate; tests/base/test_literal_paths.py pins the structure that makes them linear.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable, Sequence

from integrator.fence.overlap import find_overlaps
from integrator.paths import PathMatcher

SIZES = (10_000, 100_000)


def literal_paths(n: int, folder: str = "pkg") -> list[str]:
    """n anchored literal globs spread over folders of 100 files, as path by path claims are."""
    return [f"/{folder}/part_{i // 100:04d}/module_{i:06d}.py" for i in range(n)]


def _median(run: Callable[[], object], rounds: int) -> float:
    """The median CPU time of `rounds` runs (process time: a loaded machine's waits are not
    counted), the garbage collector paused during each: its full collections walk the
    whole heap, which grows with n — Python's cost, not the matcher's."""
    samples = []
    for _ in range(rounds):
        gc.collect()
        gc.disable()
        try:
            started = time.process_time()
            run()
            samples.append(time.process_time() - started)
        finally:
            gc.enable()
    return statistics.median(samples)


def count_calls(run: Callable[[], object]) -> int:
    """Function calls (Python and C) `run` makes: the count a machine's load cannot move."""
    count = 0

    def profile(_frame: object, event: str, _arg: object) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(profile)
    try:
        run()
    finally:
        sys.setprofile(None)
    return count


def measure(n: int, rounds: int) -> dict[str, float]:
    """Seconds to build, to match 2n paths (n named, n not) and to check overlap, and the
    function calls each makes per path."""
    mine, theirs = literal_paths(n), literal_paths(n, "lib")
    probes = [p.lstrip("/") for p in mine] + [p.lstrip("/") for p in theirs]

    def build() -> PathMatcher:
        return PathMatcher((*mine, f"/fresh/{time.perf_counter_ns()}"))  # never a cache hit

    matcher = build()

    def match() -> None:
        assert sum(matcher.covers(p) for p in probes) == n

    def overlap() -> None:
        assert find_overlaps(mine, [], theirs, []) == []

    runs = {"build": build, "match": match, "overlap": overlap}
    figures = {name: _median(run, rounds) for name, run in runs.items()}
    figures.update({f"{name} calls/path": count_calls(run) / n for name, run in runs.items()})
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.literals", description=__doc__)
    parser.add_argument("--rounds", type=int, default=3, help="runs per figure (median)")
    args = parser.parse_args(argv)
    figures = {n: measure(n, args.rounds) for n in SIZES}
    small, large = figures[SIZES[0]], figures[SIZES[1]]
    names = list(small)
    print(f"{'literal paths':>14} " + " ".join(f"{k:>18}" for k in names))
    for n, row in figures.items():
        cells = [f"{row[k] * 1000:>15.1f} ms" if "calls" not in k else f"{row[k]:>18.1f}"
                 for k in names]  # fmt: skip
        print(f"{n:>14,} " + " ".join(cells))
    print(f"{'ratio':>14} " + " ".join(f"{large[k] / small[k]:>17.2f}x" for k in names))
    print(f"(linear work: {SIZES[1] // SIZES[0]}x the time, the same calls per path)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
