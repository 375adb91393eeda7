"""Named fault points for drills and crash tests.

`INTEGRATOR_FAULT=<action>:<point>[,<action>:<point>…]` makes the process act on itself
when it reaches a point: `kill` sends SIGKILL (a crash at exactly that step), `stop` sends
SIGSTOP (a pause another process can exploit, resumed with SIGCONT). Points:

- `after-check`: the candidate passed the gate, nothing written yet;
- `before-transaction`: staging and consumed-claim commits written, no ref touched;
- `after-prepare`: the ref transaction is prepared (refs locked), not committed;
- `after-commit`: the ref transaction committed, nothing reported yet.

Unset (the normal case), a point costs one dictionary lookup.
"""

from __future__ import annotations

import os
import signal

FAULT_ENV = "INTEGRATOR_FAULT"
POINTS = ("after-check", "before-transaction", "after-prepare", "after-commit")
_ACTIONS = {"kill": signal.SIGKILL, "stop": signal.SIGSTOP}


def _parse(text: str) -> dict[str, signal.Signals]:
    out: dict[str, signal.Signals] = {}
    for item in text.split(","):
        action, _, point = item.strip().partition(":")
        if action in _ACTIONS and point in POINTS:
            out[point] = _ACTIONS[action]
    return out


_armed = _parse(os.environ.get(FAULT_ENV, ""))


def point(name: str) -> None:
    """Act on the fault armed for `name`, if any."""
    sig = _armed.get(name)
    if sig is not None:
        os.kill(os.getpid(), sig)
