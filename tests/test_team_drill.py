"""The team drill's reading of the channels (drills/team_checks.py), without running it."""

from __future__ import annotations

from drills.team_checks import _history_state, final_state


def test_a_channel_answer_is_its_landing_state_else_its_decision() -> None:
    """A status document is reduced to the landing's state when it landed, else to the
    verdict's decision, else REJECTED for a rejection; with the exit code when given."""
    landed = {"verdict": {"decision": "ACCEPTED"}, "landing": {"state": "reverted"}}
    assert final_state(landed, 1) == "reverted/1"
    assert final_state({"verdict": {"decision": "FENCED"}}, 1) == "FENCED/1"
    assert final_state({"submission": "x", "reason": "malformed"}, 2) == "REJECTED/2"
    assert final_state({}, 4) == "none/4"


def test_a_registry_says_what_its_newest_deciding_row_says() -> None:
    """History's word is its newest decision or review row that decides: an approval's
    landing, an ejection's hold (ejected); a rejection's row decides nothing new."""
    decided = {"kind": "decision", "decision": "FENCED"}
    approved = {"kind": "review", "action": "approve", "decision": "ACCEPTED",
                "landing": {"state": "promoted"}}  # fmt: skip
    rejected = {"kind": "review", "action": "reject"}
    landed = {"kind": "decision", "decision": "ACCEPTED", "landing": {"state": "ejected"}}
    ejected = {"kind": "review", "action": "eject", "decision": "FENCED"}
    assert _history_state([decided, approved]) == "promoted"
    assert _history_state([decided, rejected]) == "FENCED"
    assert _history_state([landed, ejected, {"kind": "validation"}]) == "ejected"
    assert _history_state([{"kind": "promotion"}]) is None
