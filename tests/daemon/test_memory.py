"""Freed memory goes back to the system: the trimmer against glibc's real allocator."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from integrator.daemon.health import Metrics
from integrator.daemon.memory import Trimmer

# A thread allocates 80 MB in 4 kB blocks (past pymalloc: glibc's malloc, in the thread's
# own arena) and frees all but one block in 64, so no arena can shrink from its top.
_FRAGMENT = textwrap.dedent(
    """
    import sys, threading
    from integrator.daemon.memory import Trimmer

    def anon():
        for line in open("/proc/self/status"):
            if line.startswith("RssAnon:"):
                return int(line.split()[1])

    kept = []
    def work():
        blocks = [bytearray(4000) for _ in range(20000)]
        kept.extend(blocks[::64])
    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    before = anon()
    if sys.argv[1] == "trim":
        assert Trimmer().maybe()
    print(before, anon())
    """
)


def _resident(mode: str) -> tuple[int, int]:
    out = subprocess.run(
        [sys.executable, "-c", _FRAGMENT, mode], capture_output=True, text=True, check=True
    ).stdout.split()
    return int(out[0]), int(out[1])


@pytest.mark.skipif(not Trimmer().available, reason="the C library has no malloc_trim")
def test_a_trim_returns_the_freed_pages_of_a_fragmented_arena() -> None:
    kept_before, kept_after = _resident("keep")
    trim_before, trim_after = _resident("trim")
    freed = 20000 * 4000 // 1024 * 63 // 64  # KiB
    # Without the trim glibc keeps what was freed; with it, most of it leaves.
    assert kept_before - kept_after < freed // 4, (kept_before, kept_after)
    assert trim_before - trim_after > freed // 2, (trim_before, trim_after)


def test_trims_are_at_most_one_per_interval() -> None:
    calls: list[float] = []
    now = [100.0]

    def trim() -> int:  # records each call, as a fake must
        calls.append(now[0])
        return 1

    trimmer = Trimmer(10.0, trim=trim, clock=lambda: now[0])
    assert trimmer.maybe()  # the first one at once
    now[0] = 105.0
    assert not trimmer.maybe()
    now[0] = 110.0
    assert trimmer.maybe()
    assert calls == [100.0, 110.0] and trimmer.trims == 2


def test_the_daemon_metrics_carry_its_resident_memory() -> None:
    text = Metrics().render().decode()
    line = next(line for line in text.splitlines() if line.startswith("process_resident"))
    assert float(line.split()[1]) > 1_000_000
