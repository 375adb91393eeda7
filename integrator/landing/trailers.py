"""The staging commit's message: a summary line, then trailers naming what landed.

Recovery and audit find a landing by these trailers (the candidate above all), so their
names are a stable interface.
"""

from __future__ import annotations

TRAILER_CANDIDATE = "Integrator-Candidate"
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
    """The `Integrator-*` trailers of a commit message (the last value of each wins)."""
    out: dict[str, str] = {}
    for line in message.splitlines():
        key, sep, value = line.partition(": ")
        if sep and key.startswith(TRAILER_PREFIX):
            out[key] = value.strip()
    return out
