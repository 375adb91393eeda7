"""GitHub Actions: workflow commands (annotations) and the Markdown step summary.

An annotation names a file (`file=`) when the violation has a path, when its resource
was touched by a path (the first one), or, for a claim-level violation, when the gate was
given a contract file inside the work tree; otherwise it has no file and shows on the run.
Data is escaped as the runner decodes it (`%`, CR, LF; and `:` `,` in properties), and
other control characters are spelled out (`visible`) so the log cannot be driven by them.
"""

from __future__ import annotations

import string
from collections.abc import Mapping

from integrator.documents.verdict import Decision, Verdict
from integrator.escape import visible
from integrator.report.common import (
    AnchorKind,
    anchor,
    distinct_codes,
    identity,
    message,
    needs_fallback_failure,
)
from integrator.report.hints import hint


def _gh_data(text: str) -> str:
    return visible(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def _gh_property(text: str) -> str:
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


def _gh_command(command: str, message: str, **props: str | None) -> str:
    given = [f"{key}={_gh_property(value)}" for key, value in props.items() if value is not None]
    sep = " " if given else ""
    return f"::{command}{sep}{','.join(given)}::{_gh_data(message)}"


_ANNOTATED = (AnchorKind.PATH, AnchorKind.RESOURCE, AnchorKind.CONTRACT)


def render_github(verdict: Verdict, *, contract_path: str | None = None) -> str:
    """GitHub workflow commands: `::error` per enforced violation, `::warning` per observed
    one, `::notice` when accepted.

    Enforced violations come first because a step shows only about ten annotations.
    """
    ordered = sorted(verdict.violations, key=lambda v: not v.enforced)
    lines = []
    for v in ordered:
        where = anchor(v, verdict, contract_path)
        lines.append(
            _gh_command(
                "error" if v.enforced else "warning",
                message(v) if v.enforced else f"[observe] {message(v)}",
                file=where.path if where.kind in _ANNOTATED else None,
                title=v.code.value,
            )
        )
    summary = " ".join(f"{name} {value}" for name, value in identity(verdict))
    if verdict.decision is Decision.ACCEPTED:
        lines.append(_gh_command("notice", f"ACCEPTED {summary}", title="integrator"))
    elif needs_fallback_failure(verdict):
        lines.append(
            _gh_command("error", f"{verdict.decision.value} {summary}", title="integrator")
        )
    return "\n".join(lines)


_MD_PUNCTUATION = frozenset(string.punctuation)


def _md(text: str) -> str:
    """Escape data for a GitHub Markdown table cell.

    CommonMark lets any ASCII punctuation be backslash-escaped, which also covers `|` (the
    cell separator in GFM tables) and `<` (raw HTML).
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    escaped = "".join(
        f"\\{ch}" if ch in _MD_PUNCTUATION else ch for ch in visible(text, keep_newlines=True)
    )
    return escaped.replace("\n", "<br>")


def github_step_summary(verdict: Verdict) -> str:
    """A Markdown job summary: decision, a table of violations, resources and next steps."""
    ident = ", ".join(f"{name} {_md(value)}" for name, value in identity(verdict))
    lines = [f"### integrator gate: {verdict.decision.value}", "", f"{ident}", ""]
    if verdict.violations:
        lines += ["| Code | Path or resource | Detail | Mode |", "| --- | --- | --- | --- |"]
        lines += [
            f"| {v.code.value} | {_md(v.subject)} | {_md(message(v))} | {v.mode} |"
            for v in verdict.violations
        ]
    else:
        lines.append("No violations.")
    if verdict.resources:
        lines += ["", "| Resource | Determination | Paths |", "| --- | --- | --- |"]
        lines += [
            f"| {_md(r.resource)} | {r.determination.value} | {_md(', '.join(r.paths))} |"
            for r in verdict.resources
        ]
    codes = distinct_codes(verdict)
    if codes:
        lines += ["", "**Next steps**", ""]
        lines += [f"- {code.value}: {_md(hint(code, verdict.task_id))}" for code, _ in codes]
    return "\n".join(lines) + "\n"


def append_github_summary(verdict: Verdict, env: Mapping[str, str]) -> bool:
    """Append the step summary to `$GITHUB_STEP_SUMMARY` if set; return whether it wrote.

    A summary file that cannot be written raises OSError: that is the runner's problem, and
    the caller decides whether it should change the exit code.
    """
    target = env.get("GITHUB_STEP_SUMMARY")
    if not target:
        return False
    with open(target, "a", encoding="utf-8", errors="backslashreplace") as fh:
        fh.write(github_step_summary(verdict) + "\n")
    return True
