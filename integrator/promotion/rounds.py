"""What one round of a promoter did (the promoter's and the scoped round's common answer)."""

from __future__ import annotations

from dataclasses import dataclass, field

RECENT = 20  # final results per scope the failure rate and the window are drawn from


@dataclass
class Round:
    """What one round did; `progress` is False when there was nothing it could do now."""

    action: str  # "idle", "promote", "eject", "reorder", "validate", "request", "wait", …
    progress: bool
    detail: dict[str, object] = field(default_factory=dict)
