"""The shadow: every recorded submission decided a second time and compared with what happened.

Under another policy (`integrator shadow --policy NEW.toml`), or by another integrator
version run as a process (`--command "…"`, one `integrator.shadow-request.v1` on its
standard input, its verdict read from standard output; `integrator shadow --decide -` is
that process for this version). Each submission is decided on the very inputs it had —
its contract, its candidate, the queue head it was merged onto, the live claim as it stood
— so one disagreement never cascades into the decisions after it, as two integrators
running side by side on one queue would see it. No ref moves; merges happen in memory and
in a scratch repository.

What happened: for a held submission, the verdict in its record; for a landing, the facts
the landing wrote (it landed, with this tree) and, since a landing's verdict is not kept
in git, its codes and determinations derived again under the policy its staging commit
names. `serve --shadow-policy FILE` runs the same comparison on every batch the daemon
decides, against the verdicts it just reached, and logs each mismatch.
"""

from __future__ import annotations

import contextlib
import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import structlog
from pydantic import ValidationError

from integrator.documents.policy import PolicyState, read_policy_file
from integrator.documents.verdict import Decision, Verdict
from integrator.errors import InfrastructureError, IntegratorError, UsageError
from integrator.escape import visible
from integrator.landing.outcomes import Ready
from integrator.limits import SHADOW_REQUEST_BYTES, VERDICT_BYTES
from integrator.records.canonical import Canonical
from integrator.records.scratch import scratch
from integrator.rollout.compare import Comparison, Side, differences, side_of
from integrator.rollout.records import Recorded, Records, since_option
from integrator.rollout.replay import Decided, Replayer, ShadowRequest, request_for

COMMAND_TIMEOUT = 120.0  # seconds one decision by another integrator may take


class Decider(Protocol):
    def decide(self, request: ShadowRequest) -> Decided: ...


class CommandDecider:
    """Another integrator as a process: one request on stdin, its verdict on stdout."""

    def __init__(self, command: str, timeout: float = COMMAND_TIMEOUT) -> None:
        try:
            self.argv = shlex.split(command)
        except ValueError as err:  # an unbalanced quote
            raise UsageError(f"--command is not a command line: {err}") from err
        if not self.argv:
            raise UsageError("--command is empty")
        self.timeout = timeout
        self.calls = 0

    def decide(self, request: ShadowRequest) -> Decided:
        self.calls += 1
        try:
            proc = subprocess.run(
                self.argv,
                input=request.to_json().encode(),
                capture_output=True,
                timeout=self.timeout,
                check=False,
            )
        except FileNotFoundError as err:
            raise UsageError(f"--command: {self.argv[0]} not found") from err
        except subprocess.TimeoutExpired as err:
            raise InfrastructureError(
                f"--command took longer than {self.timeout:g} s on {request.key}"
            ) from err
        tail = visible(proc.stderr.decode("utf-8", "replace").strip()[-300:])
        if proc.returncode not in (0, 1, 3) or len(proc.stdout) > VERDICT_BYTES:
            raise InfrastructureError(
                f"--command exited {proc.returncode} on {request.key}: {tail or 'no message'}"
            )
        try:
            return Decided(Verdict.model_validate_json(proc.stdout))
        except ValidationError as err:
            raise InfrastructureError(
                f"--command printed no integrator.verdict.v1 for {request.key}: {tail}"
            ) from err


@dataclass
class ShadowReport:
    compared: list[Comparison] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (key, why)

    @property
    def mismatches(self) -> list[Comparison]:
        return [c for c in self.compared if not c.matches]

    def wire(self) -> dict[str, Any]:
        return {
            "schema": "integrator.shadow-report.v1",
            "compared": len(self.compared),
            "landings": sum(c.kind == "landing" for c in self.compared),
            "held": sum(c.kind == "held" for c in self.compared),
            "mismatches": [c.wire() for c in self.mismatches],
            "skipped": [{"key": k, "why": w} for k, w in self.skipped],
        }


def _recorded_side(record: Recorded, replayer: Replayer) -> Side | str:
    """What happened, as a Side (or why it cannot be known)."""
    if not record.landed:
        assert record.verdict is not None
        return side_of(record.verdict)
    if record.verdict is not None:  # the daemon's verdict, just reached
        return side_of(record.verdict, landed=True, tree=record.tree)
    if record.policy is None:
        return "its staging commit names a policy digest not in the policy history"
    if not record.contract:
        return "no claim commit records its consumption"
    derived = replayer.decide(request_for(record, record.policy, "")).verdict
    found = side_of(derived, landed=True, tree=record.tree)
    return Side(True, record.tree, Decision.ACCEPTED.value, found.codes, found.resources)


def compare_one(
    record: Recorded,
    policy: PolicyState | None,
    replayer: Replayer,
    decider: Decider | None,
    repo: str,
) -> Comparison | str:
    """`record` decided again (under `policy`, else its own) and compared; or why not."""
    recorded = _recorded_side(record, replayer)
    if isinstance(recorded, str):
        return recorded
    target = policy or record.policy
    if target is None:
        return "its verdict names a policy digest not in the policy history; pass --policy"
    decided = (decider or replayer).decide(request_for(record, target, repo))
    shadow = side_of(decided.verdict)
    return Comparison(
        key=record.key,
        kind=record.kind,
        task_id=record.task_id,
        candidate=record.candidate,
        recorded=recorded,
        shadow=shadow,
        differ=tuple(differences(recorded, shadow)),
    )


def run_shadow(
    canonical: Canonical,
    *,
    policy: PolicyState | None = None,
    decider: Decider | None = None,
    since: datetime | None = None,
) -> ShadowReport:
    """Every recorded submission since `since`, decided again and compared."""
    canonical.refresh()
    records = Records(canonical).every(since)
    report = ShadowReport()
    repo = str(canonical.path.resolve())
    with scratch(canonical) as borrowed:
        replayer = Replayer(borrowed)
        for record in records:
            outcome = compare_one(record, policy, replayer, decider, repo)
            if isinstance(outcome, str):
                report.skipped.append((record.key, outcome))
            else:
                report.compared.append(outcome)
    return report


def decide_request(request: ShadowRequest) -> Verdict:
    """Answer one request (`integrator shadow --decide`): the verdict, moving nothing."""
    with Canonical(request.repo) as canonical, scratch(canonical) as borrowed:
        return Replayer(borrowed).decide(request).verdict


def shadow_repository(
    repo: str | Path,
    *,
    policy_file: Path | None = None,
    command: str | None = None,
    since: str | None = None,
) -> ShadowReport:
    """`integrator shadow`: every recorded submission since `since` (a time or a duration)
    decided again under the policy in `policy_file` and/or by the integrator `command`."""
    if policy_file is None and command is None:
        raise UsageError("name what to compare with: --policy FILE and/or --command CMD")
    with Canonical(repo) as canonical:
        policy = None
        if policy_file is not None:
            read, text = read_policy_file(policy_file)
            policy = PolicyState(read, canonical.policy_state().generation, text)
        when = since_option(since, canonical.clock())
        decider = CommandDecider(command) if command else None
        return run_shadow(canonical, policy=policy, decider=decider, since=when)


def answer_request(data: bytes) -> Verdict:
    """The other end of `--command`: one request read (refused past its limit or when it
    is not one), its verdict."""
    if len(data) > SHADOW_REQUEST_BYTES:
        raise UsageError(f"the shadow request is larger than {SHADOW_REQUEST_BYTES >> 20} MiB")
    try:
        request = ShadowRequest.model_validate_json(data)
    except ValidationError as err:
        raise UsageError(f"not an integrator.shadow-request.v1: {err.errors()[0]['msg']}") from err
    return decide_request(request)


class DaemonShadow:
    """`serve --shadow-policy FILE`: each batch the daemon decides, decided again under FILE.

    Every mismatch is logged (`shadow.mismatch`, both sides), each batch summed up
    (`shadow.compared`). It can only log: any trouble of its own is a `shadow.failed`
    event, and the daemon's decisions never wait on it beyond the batch it compares.
    """

    RENEW_AFTER = 1000  # decisions before the scratch repository starts over

    def __init__(self, canonical: Canonical, policy: PolicyState) -> None:
        self.canonical = canonical
        self.policy = policy
        self.log = structlog.get_logger("integrator.shadow")
        self.compared = 0
        self.mismatches = 0
        self._stack = contextlib.ExitStack()
        self._replayer: Replayer | None = None
        self._uses = 0

    def _scratch(self) -> Replayer:
        if self._replayer is None or self._uses >= self.RENEW_AFTER:
            self.close()
            self._replayer = Replayer(self._stack.enter_context(scratch(self.canonical)))
            self._uses = 0
        return self._replayer

    def __call__(self, ready: Sequence[Ready], verdicts: Sequence[Verdict]) -> None:
        try:
            self._compare(ready, verdicts)
        except (IntegratorError, OSError, ValueError, KeyError) as err:
            self.log.warning("shadow.failed", error=f"{type(err).__name__}: {err}")

    def _compare(self, ready: Sequence[Ready], verdicts: Sequence[Verdict]) -> None:
        records = Records(self.canonical)
        heads = [v.queue_head for v in verdicts if v.staging_commit and v.queue_head]
        fallback = heads[0] if heads else self.canonical.ref(self.canonical.queue_ref)
        replayer = self._scratch()
        now = datetime.now(UTC)
        mismatched = 0
        repo = str(self.canonical.path.resolve())
        for item, verdict in zip(ready, verdicts, strict=True):
            if verdict.recovered:
                continue  # an earlier landing answered again: nothing was decided
            landed = verdict.decision is Decision.ACCEPTED and verdict.staging_commit
            record = records.from_verdict(
                "landing" if landed else "held",
                item.sid,
                now,
                item.contract,
                item.candidate,
                verdict,
                state="landed" if landed else "decided",
                head=fallback,
            )
            outcome = compare_one(record, self.policy, replayer, None, repo)
            self._uses += 1
            if isinstance(outcome, str):
                self.log.warning("shadow.skipped", submission=item.sid, why=outcome)
                continue
            self.compared += 1
            if not outcome.matches:
                mismatched += 1
                self.log.warning(
                    "shadow.mismatch", submission=item.sid, task=record.task_id,
                    candidate=item.candidate, differ=list(outcome.differ),
                    recorded=outcome.recorded.wire(), shadow=outcome.shadow.wire(),
                )  # fmt: skip
        self.mismatches += mismatched
        self.log.info(
            "shadow.compared", submissions=len(ready), mismatches=mismatched,
            policy_generation=self.policy.generation, total_mismatches=self.mismatches,
        )  # fmt: skip

    def close(self) -> None:
        self._stack.close()
        self._stack = contextlib.ExitStack()
        self._replayer = None
