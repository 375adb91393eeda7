"""The text report: for the person who must act (decision, violations, what to do next)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from integrator.documents.verdict import REVIEW_CODES, Decision, Verdict
from integrator.escape import visible
from integrator.fence.diff import Change, Status
from integrator.paths import quote_path
from integrator.report.common import distinct_codes, identity, message, short
from integrator.report.hints import hint

# A huge candidate should not bury the verdict; the full list is in the JSON form.
CHANGES_SHOWN = 50

_RESET = "\x1b[0m"
_STYLE = {
    "red": "\x1b[1;31m",
    "yellow": "\x1b[33m",
    "green": "\x1b[1;32m",
    "dim": "\x1b[2m",
    "bold": "\x1b[1m",
}
_DECISION_STYLE = {Decision.ACCEPTED: "green", Decision.FENCED: "red", Decision.REVIEW: "yellow"}


def render_text(verdict: Verdict, *, changes: Sequence[Change] = (), color: bool = False) -> str:
    """A report for the person who must act: decision, violations, resources, next steps."""

    def paint(text: str, style: str) -> str:
        return f"{_STYLE[style]}{text}{_RESET}" if color else text

    head = [paint(verdict.decision.value, _DECISION_STYLE[verdict.decision])]
    head += [f"{name} {visible(value)}" for name, value in identity(verdict)]
    lines = ["  ".join(head)]
    if verdict.staging_commit:
        lines.append(
            f"landed as staging commit {short(verdict.staging_commit)}"
            + (" (recovered)" if verdict.recovered else "")
        )
    lines += _violation_lines(verdict, paint)
    if verdict.decision is Decision.ACCEPTED and not verdict.staging_commit:
        # The one-shot gate does not merge: what lands is proven again when it lands.
        lines.append(
            "not merged yet: landing (integrate, serve) checks the merge onto the queue "
            "head again, and can still fence it"
        )
    if verdict.resources:
        lines.append("resources:")
        width = max(len(r.determination.value) for r in verdict.resources)
        for r in verdict.resources:
            where = f"  ({', '.join(visible(p) for p in r.paths)})" if r.paths else ""
            lines.append(f"  {r.determination.value.ljust(width)}  {visible(r.resource)}{where}")
    if changes:
        lines.append(f"changes ({len(changes)}):")
        lines += [f"  {_change_line(c)}" for c in changes[:CHANGES_SHOWN]]
        if len(changes) > CHANGES_SHOWN:
            lines.append(f"  ... and {len(changes) - CHANGES_SHOWN} more")
    codes = distinct_codes(verdict)
    if codes:
        lines.append(paint("next:", "bold"))
        for code, enforced in codes:
            note = "" if enforced else " (observe only, not blocking yet)"
            lines.append(f"  {code.value}: {hint(code, verdict.task_id)}{note}")
    return "\n".join(lines)


def _violation_lines(verdict: Verdict, paint: Callable[[str, str], str]) -> list[str]:
    if not verdict.violations:
        return ["no violations"]
    labels = [v.code.value + ("" if v.enforced else " (observe)") for v in verdict.violations]
    width = max(len(label) for label in labels)
    lines = ["violations:"]
    for v, label in zip(verdict.violations, labels, strict=True):
        if not v.enforced:
            style = "dim"
        elif v.code in REVIEW_CODES:
            style = "yellow"
        else:
            style = "red"
        # The subject column already names a resource unless a path took its place.
        text = message(v) if v.path else v.detail
        detail = visible(text, keep_newlines=True).replace("\n", "\n    ")
        lines.append(f"  {paint(label.ljust(width), style)}  {visible(v.subject)}  {detail}")
    return lines


def _mode(mode: int | None) -> str:
    return "-" if mode is None else f"{mode:06o}"


def _change_line(change: Change) -> str:
    status = change.status.value
    if change.status is Status.RENAMED and change.similarity is not None:
        status += f"{change.similarity:03d}"
    # Changes come from git as they are: written like the verdict's paths (`quote_path`).
    if change.old_path and change.new_path and change.old_path != change.new_path:
        where = f"{visible(quote_path(change.old_path))} -> {visible(quote_path(change.new_path))}"
    else:
        where = visible(quote_path(change.path))
    if change.old_mode is not None and change.new_mode is not None:
        modes = (
            f"{_mode(change.old_mode)} -> {_mode(change.new_mode)}"
            if change.mode_changed
            else _mode(change.new_mode)
        )
    else:
        modes = _mode(change.new_mode if change.new_mode is not None else change.old_mode)
    return f"{status:<4} {where}  {modes}"
