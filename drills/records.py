"""What a drill step leaves behind: a command's result, a contract file, a verdict, a check."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Result:
    argv: tuple[str, ...]
    code: int
    out: str
    err: str
    seconds: float

    def json(self) -> Any:
        return json.loads(self.out)


@dataclass(frozen=True)
class Contract:
    """A contract file the coordinator wrote, and what it says."""

    path: Path
    doc: dict[str, Any]

    @property
    def task(self) -> str:
        return str(self.doc["taskId"])

    @property
    def generation(self) -> int:
        return int(self.doc["ownershipGeneration"])


@dataclass(frozen=True)
class Decision:
    """One `integrate`/`gate` run: its exit status, its verdict, and where it is kept."""

    code: int
    verdict: dict[str, Any]
    file: Path

    @property
    def decision(self) -> str:
        return str(self.verdict.get("decision", f"no verdict (exit {self.code})"))

    @property
    def codes(self) -> list[str]:
        return [str(v["code"]) for v in self.verdict.get("violations", [])]


@dataclass
class Check:
    label: str
    ok: bool
    expected: str
    actual: str
    evidence: list[str] = field(default_factory=list)
