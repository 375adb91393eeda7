"""External CI's side of validation (`integrator validation request|report|show`): the
heads the promoter wants validated, a CI run's result recorded against one, and every
queued head's validation records. Only for `mode = "external"`; in `mode = "command"` the
promoter runs the command itself and decides its heads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from integrator.documents.policy import Validation
from integrator.documents.promotion import Status, ValidationResult
from integrator.errors import ConfigurationError, UsageError
from integrator.plumbing import git
from integrator.promotion.bisect import next_step
from integrator.promotion.state import QueueState, read_state
from integrator.promotion.validate import report, request_heads
from integrator.records import validations
from integrator.records.canonical import Canonical


def open_validation(repo: Path) -> tuple[Canonical, Validation]:
    """The canonical repository (refreshed, the caller closes it) and its policy's
    [validation] section."""
    canonical = Canonical(repo)
    canonical.refresh()
    config = canonical.policy_state().policy.validation
    if config is None:
        canonical.close()
        raise ConfigurationError("the policy has no [validation] section (docs/validation.md)")
    return canonical, config


def result_document(result: ValidationResult) -> dict[str, Any]:
    """A validation record as the commands print it."""
    doc = result.wire()
    doc["stagingCommit"] = result.head
    return doc


def requested(canonical: Canonical, config: Validation) -> list[ValidationResult]:
    """Ask for the next heads to validate; every head asked for and not yet decided."""
    if config.mode != "external":
        raise ConfigurationError(
            'validation mode is "command": the promoter runs the command itself'
        )
    state = read_state(canonical)
    step = next_step(
        state.pending, state.final(), max_batch=config.max_batch,
        concurrency=config.concurrency,
    )  # fmt: skip
    request_heads(canonical, state, step.validate, config)
    state = read_state(canonical)
    return [
        tip[1]
        for landing in state.landings
        for tip in [validations.latest(canonical, state.target, landing.staging)]
        if tip is not None and tip[1].status == "requested"
    ]


def record_report(
    canonical: Canonical,
    config: Validation,
    rev: str,
    status: Status,
    *,
    log_url: str | None,
    details: bytes | None,
    reporter: str,
) -> tuple[str, ValidationResult, bool]:
    """Record a CI run's `status` for the head `rev` names: the head, the record that
    stands (an earlier decision wins), and whether one was there already."""
    if config.mode != "external":
        # The promoter's own command decides these heads; a report would be a result
        # the command never produced (over a run in progress, even).
        raise ConfigurationError(
            'validation mode is "command": results come from the promoter\'s command, '
            "not from reports"
        )
    state = read_state(canonical)
    head = _full(canonical, rev)
    result, earlier = report(
        canonical, state, head, status, config, log_url=log_url, details=details,
        reporter=reporter,
    )  # fmt: skip
    return head, result, earlier


def _full(canonical: Canonical, rev: str) -> str:
    try:
        return str(git.resolve_commit(canonical.repo, rev).id)
    except ConfigurationError as err:
        raise UsageError(f"--head {rev}: {err}") from err


def queue_validations(canonical: Canonical) -> tuple[QueueState, list[dict[str, Any]]]:
    """The queue, and each queued head with its validation records, oldest first."""
    state = read_state(canonical)
    config = canonical.policy_state().policy.validation
    scopes: list[str | None] = [s.name for s in config.scope] if config and config.scope else [None]
    rows: list[dict[str, Any]] = []
    for i, landing in enumerate(state.landings, 1):
        for scope in scopes:
            tip = validations.latest(canonical, state.target, landing.staging, scope)
            history = validations.chain(canonical, tip[0]) if tip else []
            row: dict[str, Any] = {
                "index": i,
                "head": landing.staging,
                "taskId": landing.task_id,
                "records": [result_document(r) for _, r in history],
            }
            if scope is not None:
                row["scope"] = scope
            rows.append(row)
    return state, rows
