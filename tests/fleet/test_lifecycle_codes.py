"""The exit codes docs/lifecycle.md promises, as every channel computes them: a verdict's
code read together with where its landing is now (`fleet.submit.lifecycle_code`)."""

from __future__ import annotations

import pytest

from integrator.fleet.submit import SETTLED, lifecycle_code

ACCEPTED, FENCED, REJECTED, REVIEW = 0, 1, 2, 3


@pytest.mark.parametrize(
    ("code", "state", "until", "expected"),
    [
        (ACCEPTED, None, "decided", 0),  # no queue to look in: the verdict's own code
        (ACCEPTED, "queued", "decided", 0),  # landed on the queue
        (ACCEPTED, "promoted", "decided", 0),
        (ACCEPTED, "gone", "decided", 0),  # the table's "no longer on the queue": 0 …
        (ACCEPTED, "gone", "promoted", 1),  # … and 1 with --until promoted
        (ACCEPTED, "queued", "promoted", 1),  # (4 comes from the wait's deadline, not here)
        (ACCEPTED, "promoted", "promoted", 0),  # on the target: the only 0 of --until
        (ACCEPTED, None, "promoted", 1),
        (ACCEPTED, "reverted", "decided", 1),  # its change is not on the target
        (ACCEPTED, "ejected", "decided", 1),  # ejected before the verdict was published again
        (FENCED, "ejected", "decided", 1),
        (FENCED, "ejected", "promoted", 1),
        (REVIEW, None, "promoted", 3),
        (REJECTED, None, "promoted", 2),
    ],
)
def test_the_code_of_a_verdict_with_its_landing(
    code: int, state: str | None, until: str, expected: int
) -> None:
    where: dict[str, object] | None = (
        None if state is None else {"landing": "a" * 40, "state": state}
    )
    assert lifecycle_code(code, where, until) == expected


def test_waiting_ends_on_every_state_but_queued() -> None:
    assert set(SETTLED) == {"promoted", "ejected", "reverted", "gone"}
