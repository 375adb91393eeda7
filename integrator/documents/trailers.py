"""The staging commit's message: a summary line, then trailers naming what landed.

Recovery and audit find a landing by these trailers (the candidate above all), so their
names are a stable interface.
"""

from __future__ import annotations

TRAILER_CANDIDATE = "Integrator-Candidate"
TRAILER_REVERTS = "Integrator-Reverts"  # a revert commit: the staging commit it undoes
TRAILER_PREFIX = "Integrator-"


def staging_message(
    summary: str,
    *,
    candidate: str,
    task_id: str,
    attempt_id: str,
    generation: int,
    contract_digest: str,
    policy_digest: str,
    base: str,
) -> str:
    """The message of the staging commit that lands `candidate`."""
    return (
        f"{summary}\n\n"
        f"Landed by integrator for task {task_id}.\n\n"
        f"{TRAILER_CANDIDATE}: {candidate}\n"
        f"Integrator-Task: {task_id}\n"
        f"Integrator-Attempt: {attempt_id}\n"
        f"Integrator-Generation: {generation}\n"
        f"Integrator-Contract-Digest: {contract_digest}\n"
        f"Integrator-Policy-Digest: {policy_digest}\n"
        f"Integrator-Base: {base}\n"
    )


def trailers(message: str) -> dict[str, str]:
    """The `Integrator-*` trailers of a commit message: its last paragraph only.

    Every writer puts its trailers last, after a blank line; what comes before is text
    someone else chose — a candidate's summary line, a reviewer's reason — and a line
    there spelled like a trailer (`Integrator-Landing: <another landing>`) must never name
    anything. Lines are split as git splits them (on newline only); within the block the
    last value of each key wins.
    """
    lines = message.rstrip("\n").split("\n")
    blank = [i for i, line in enumerate(lines) if not line.strip()]
    if not blank:
        return {}  # one paragraph: a summary at most, no trailer block
    out: dict[str, str] = {}
    for line in lines[blank[-1] + 1 :]:
        key, sep, value = line.partition(": ")
        if sep and key.startswith(TRAILER_PREFIX):
            out[key] = value.strip()
    return out
