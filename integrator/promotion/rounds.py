"""What one round of a promoter did (the promoter's and the scoped round's common answer)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

RECENT = 20  # final results per scope the failure rate and the window are drawn from


@dataclass
class Round:
    """What one round did; `progress` is False when there was nothing it could do now."""

    action: str  # "idle", "promote", "eject", "reorder", "validate", "request", "wait",
    # "linger" (a batch waits for more landings: detail "until", seconds since the epoch)
    progress: bool
    detail: dict[str, object] = field(default_factory=dict)


def lingering(holds: Mapping[str | None, float]) -> Round:
    """The round that waits for fuller batches: until the first hold ends (`holds`, by
    scope, None for the whole queue, in seconds since the epoch)."""
    until = min(holds.values())
    return Round(
        "linger",
        False,
        {
            "until": until,
            "at": datetime.fromtimestamp(until, UTC).isoformat(timespec="seconds"),
            "scopes": sorted(s or "" for s in holds),
        },
    )
