"""What a drain hands around: the engine it drives, submissions ready for a batch, and
decided ones waiting for their batch to be committed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from integrator.documents.verdict import Verdict
from integrator.store.spool import folder_for


class Engine(Protocol):
    """What the daemon needs of `integrator.landing.engine.Integrator`."""

    def integrate(self, contract_data: bytes, candidate: str) -> Verdict: ...
    def integrate_many(self, items: Sequence[tuple[bytes, str]]) -> list[Verdict]: ...
    def reload_policy(self) -> None: ...
    def candidate_problem(self, candidate: str) -> str | None: ...


@dataclass(frozen=True, kw_only=True)
class Ready:
    """A claimed, readable submission waiting for its batch's `integrate_many`."""

    sid: str
    contract: bytes
    candidate: str
    raw: bytes
    started: float
    bundle: bool
    urgent: bool = False


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """One decided submission, waiting for its batch to be committed."""

    sid: str
    verdict: Verdict | None  # None: rejected as malformed, see `reason`
    reason: str | None
    raw: bytes
    latency: float
    bundle: bool

    @property
    def folder(self) -> str:
        return folder_for(self.verdict.decision if self.verdict is not None else None)
