"""Named fault points for drills and crash tests.

`INTEGRATOR_FAULT=<action>:<point>[,<action>:<point>…]` makes the process act on itself
when it reaches a point: `kill` sends SIGKILL (a crash at exactly that step), `stop` sends
SIGSTOP (a pause another process can exploit, resumed with SIGCONT). Points:

- `after-check`: the candidate passed the gate, nothing written yet;
- `before-transaction`: staging and consumed-claim commits written, no ref touched;
- `after-prepare`: the ref transaction is prepared (refs locked), not committed;
- `after-checkout`: the same, and a work tree kept in step with the target already
  updated to the new commit;
- `after-commit`: the ref transaction committed, nothing reported yet;
- `after-push`: (remote mode) the server applied an atomic push, the mirror not yet moved;
- `before-publish`: (intake) a verdict is filed in the spool, not yet published;
- `before-hold`: a batch's FENCED and REVIEW candidates decided, their held records
  written, no held ref moved yet;
- `before-claim-transaction`: a claim operation read the claims and wrote its commits,
  no ref moved yet;
- `archive-before-transaction`: `integrator refs archive` wrote a batch's archive commits,
  no ref touched (neither the archive ref nor the records it folds in);
- `after-validation`: (promoter) a validation command finished, its result not recorded;
- `mid-bisection`: (promoter) the same, for a head validated to bisect a failed batch;
- `before-promote`: (promoter) the promotion record written, the target not moved yet;
- `before-rebuild`: (promoter) the rebuilt queue and the ejection records written, no
  ref moved yet;
- `after-rebuild`: (promoter) the queue rebuilt and the ejections recorded, nothing
  reported yet.

Unset (the normal case), a point costs one dictionary lookup.
"""

from __future__ import annotations

import contextlib
import os
import signal

FAULT_ENV = "INTEGRATOR_FAULT"
POINTS = (
    "after-check",
    "before-transaction",
    "after-prepare",
    "after-checkout",
    "after-commit",
    "after-push",
    "before-publish",
    "before-hold",
    "before-claim-transaction",
    "archive-before-transaction",
    "after-validation",
    "mid-bisection",
    "before-promote",
    "before-rebuild",
    "after-rebuild",
)
_ACTIONS = {"kill": signal.SIGKILL, "stop": signal.SIGSTOP}


def _parse(text: str) -> dict[str, signal.Signals]:
    out: dict[str, signal.Signals] = {}
    for item in text.split(","):
        action, _, point = item.strip().partition(":")
        if action in _ACTIONS and point in POINTS:
            out[point] = _ACTIONS[action]
    return out


_armed = _parse(os.environ.get(FAULT_ENV, ""))


# Child processes (the long-lived `git update-ref --stdin`) die with us on `kill`, as they
# would when a service manager kills the whole control group: a git child left alive
# would see end of input and abort a prepared transaction, hiding the crash.
children: set[int] = set()


def point(name: str) -> None:
    """Act on the fault armed for `name`, if any."""
    sig = _armed.get(name)
    if sig is None:
        return
    if sig == signal.SIGKILL:
        for pid in list(children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    os.kill(os.getpid(), sig)
