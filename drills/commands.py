"""What every drill world does with a command: run it to its end, log it beside the world
(`commands.log`, numbered), and check its exit status."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

from drills.procs import DrillError
from drills.records import Result
from drills.repo import environment

_OUTPUT_LIMIT = 20_000


class CommandLog:
    """A world's command runner; the world sets `commands` (the log file) and `_seq`."""

    commands: Path
    _seq: int

    def _seqname(self, label: str) -> str:
        self._seq += 1
        return f"{self._seq:03d}-{label}"

    def _log(self, result: Result, label: str) -> None:
        with self.commands.open("a", encoding="utf-8") as fh:
            fh.write(f"## {label}  exit {result.code}  {result.seconds * 1000:.0f} ms\n")
            fh.write("$ " + " ".join(result.argv) + "\n")
            if result.out.strip():
                fh.write(result.out[:_OUTPUT_LIMIT].rstrip() + "\n")
            if result.err.strip():
                fh.write("[stderr] " + result.err[:_OUTPUT_LIMIT].rstrip() + "\n")
            fh.write("\n")

    def run(
        self,
        argv: Sequence[str],
        *,
        expect: int | Collection[int] | None = 0,
        env: Mapping[str, str] | None = None,
        label: str = "command",
        timeout: float = 120,
    ) -> Result:
        """Run a process to its end, log it, and check its exit status when `expect` is set."""
        started = time.perf_counter()
        try:
            proc = subprocess.run(
                list(argv), capture_output=True, env=environment(env), timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired as err:
            raise DrillError(
                f"{' '.join(argv)} ran longer than {timeout} s", [self.commands]
            ) from err
        result = Result(
            tuple(argv),
            proc.returncode,
            proc.stdout.decode("utf-8", "replace"),
            proc.stderr.decode("utf-8", "replace"),
            time.perf_counter() - started,
        )
        self._log(result, label)
        wanted = {expect} if isinstance(expect, int) else expect
        if wanted is not None and result.code not in wanted:
            raise DrillError(
                f"`{' '.join(argv[2:5])} …` exited {result.code}, expected "
                f"{sorted(wanted)}: {result.err.strip()[-400:]}",
                [self.commands],
            )
        return result
