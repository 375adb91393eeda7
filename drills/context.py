"""What a drill function receives: its folder, its size, its checks and its processes."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from drills.procs import end
from drills.records import Check
from drills.repo import environment


class Recorded(Protocol):
    """A world a drill built (see `drills.harness.World`): it leaves records behind."""

    root: Path

    def snapshot(self) -> None: ...
    def evidence(self, *extra: Path | str) -> list[str]: ...


class Context:
    """What a drill function receives: its output folder, size, checks and processes."""

    def __init__(self, name: str, folder: Path, *, full: bool) -> None:
        self.name = name
        self.dir = folder.resolve()  # git and integrator run with other working folders
        self.full = full
        self.checks: list[Check] = []
        self.notes: list[str] = []
        self.worlds: list[Recorded] = []  # each World adds itself
        self.procs: list[subprocess.Popen[bytes]] = []
        self.dir.mkdir(parents=True, exist_ok=True)

    def expect(
        self,
        label: str,
        ok: bool,
        *,
        expected: str,
        actual: str,
        evidence: Sequence[Path | str] = (),
    ) -> bool:
        self.checks.append(Check(label, bool(ok), expected, actual, [str(p) for p in evidence]))
        return bool(ok)

    def equal(
        self, label: str, expected: object, actual: object, evidence: Sequence[Path | str] = ()
    ) -> bool:
        return self.expect(
            label, expected == actual, expected=str(expected), actual=str(actual), evidence=evidence
        )

    def spawn(
        self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, log: Path | None = None
    ) -> subprocess.Popen[bytes]:
        """Start a process we own (it is ended, by pid, when the drill finishes)."""
        out: Any = log.open("ab") if log is not None else subprocess.PIPE
        proc = subprocess.Popen(
            list(argv),
            stdout=out,
            stderr=subprocess.STDOUT if log is not None else subprocess.PIPE,
            env=environment(env),
        )
        if log is not None:
            out.close()
        self.procs.append(proc)
        return proc

    def cleanup(self) -> None:
        for proc in self.procs:
            end(proc)
        for world in self.worlds:
            world.snapshot()
