"""Rendering a verdict for the people and tools that read it: text, JSON, CI formats.

Everything here is a pure function of the verdict (and, for text, the recomputed changes),
except `append_github_summary`, the one step that writes a file. Paths in violations are
data from the candidate, so every format escapes them by its own rules: a path may hold
`,` `:` `%`, newlines or terminal control characters (UNSAFE_PATH reports exactly those).
"""

from __future__ import annotations

import hashlib
import json
import string
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from urllib.parse import quote
from xml.etree import ElementTree as ET

from integrator import __version__
from integrator.documents.verdict import (
    CODE_SUMMARY,
    REVIEW_CODES,
    Code,
    Decision,
    Verdict,
    Violation,
)
from integrator.errors import UsageError
from integrator.fence.diff import Change, Status
from integrator.report.hints import hint

FORMATS: tuple[str, ...] = ("text", "json", "github", "sarif", "junit", "codequality")

SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
FINGERPRINT_KEY = "integrator/v1"
JUNIT_SUITE = "integrator.gate"
SHORT_OID = 12
# A huge candidate should not bury the verdict; the full list is in the JSON form.
CHANGES_SHOWN = 50


def fingerprint(violation: Violation) -> str:
    """SHA-256 hex of (code, path, resource): the same problem keeps it across candidates."""
    key = json.dumps(
        [violation.code.value, violation.path, violation.resource],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def render(
    verdict: Verdict,
    fmt: str,
    *,
    changes: Sequence[Change] = (),
    color: bool = False,
) -> str:
    """Render `verdict` in `fmt` (one of FORMATS); only text uses `changes` and `color`."""
    if fmt == "text":
        return render_text(verdict, changes=changes, color=color)
    renderer = _RENDERERS.get(fmt)
    if renderer is None:
        raise UsageError(f"unknown output format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return renderer(verdict)


# --- shared pieces ------------------------------------------------------------------------


def _short(oid: str | None) -> str:
    return oid[:SHORT_OID] if oid else "-"


def _visible(text: str, *, keep_newlines: bool = False) -> str:
    """`text` with control and format characters spelled out, so a path cannot drive a
    terminal (ANSI escapes) or hide itself (bidirectional overrides)."""
    out: list[str] = []
    for ch in text:
        if ch == "\n" and keep_newlines:
            out.append(ch)
        elif unicodedata.category(ch) in ("Cc", "Cf", "Cs"):
            cp = ord(ch)
            out.append(f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}")
        else:
            out.append(ch)
    return "".join(out)


def _message(violation: Violation) -> str:
    """The detail, naming the resource when there is one (the path goes in the location)."""
    if violation.resource:
        return f"{violation.detail} (resource {violation.resource})"
    return violation.detail


def _identity(verdict: Verdict) -> list[tuple[str, str]]:
    return [
        ("candidate", _short(verdict.candidate)),
        ("task", verdict.task_id or "-"),
        ("attempt", verdict.attempt_id or "-"),
        ("generation", "-" if verdict.generation is None else str(verdict.generation)),
    ]


def _distinct_codes(verdict: Verdict) -> list[tuple[Code, bool]]:
    """Codes in order of first appearance, each with whether any of its violations enforces."""
    seen: dict[Code, bool] = {}
    for v in verdict.violations:
        seen[v.code] = seen.get(v.code, False) or v.enforced
    return list(seen.items())


def _needs_fallback_failure(verdict: Verdict) -> bool:
    # A non-accepted verdict must read as failed even if it carries no enforced violation.
    return verdict.decision is not Decision.ACCEPTED and not any(
        v.enforced for v in verdict.violations
    )


# --- text ---------------------------------------------------------------------------------

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
    head += [f"{name} {_visible(value)}" for name, value in _identity(verdict)]
    lines = ["  ".join(head)]
    if verdict.staging_commit:
        lines.append(
            f"landed as staging commit {_short(verdict.staging_commit)}"
            + (" (recovered)" if verdict.recovered else "")
        )

    if verdict.violations:
        labels = [v.code.value + ("" if v.enforced else " (observe)") for v in verdict.violations]
        width = max(len(label) for label in labels)
        lines.append("violations:")
        for v, label in zip(verdict.violations, labels, strict=True):
            if not v.enforced:
                style = "dim"
            elif v.code in REVIEW_CODES:
                style = "yellow"
            else:
                style = "red"
            # The subject column already names a resource unless a path took its place.
            text = _message(v) if v.path else v.detail
            detail = _visible(text, keep_newlines=True).replace("\n", "\n    ")
            lines.append(f"  {paint(label.ljust(width), style)}  {_visible(v.subject)}  {detail}")
    else:
        lines.append("no violations")
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
            where = f"  ({', '.join(_visible(p) for p in r.paths)})" if r.paths else ""
            lines.append(f"  {r.determination.value.ljust(width)}  {_visible(r.resource)}{where}")

    if changes:
        lines.append(f"changes ({len(changes)}):")
        lines += [f"  {_change_line(c)}" for c in changes[:CHANGES_SHOWN]]
        if len(changes) > CHANGES_SHOWN:
            lines.append(f"  ... and {len(changes) - CHANGES_SHOWN} more")

    codes = _distinct_codes(verdict)
    if codes:
        lines.append(paint("next:", "bold"))
        for code, enforced in codes:
            note = "" if enforced else " (observe only, not blocking yet)"
            lines.append(f"  {code.value}: {hint(code, verdict.task_id)}{note}")
    return "\n".join(lines)


def _mode(mode: int | None) -> str:
    return "-" if mode is None else f"{mode:06o}"


def _change_line(change: Change) -> str:
    status = change.status.value
    if change.status is Status.RENAMED and change.similarity is not None:
        status += f"{change.similarity:03d}"
    if change.old_path and change.new_path and change.old_path != change.new_path:
        where = f"{_visible(change.old_path)} -> {_visible(change.new_path)}"
    else:
        where = _visible(change.path)
    if change.old_mode is not None and change.new_mode is not None:
        modes = (
            f"{_mode(change.old_mode)} -> {_mode(change.new_mode)}"
            if change.mode_changed
            else _mode(change.new_mode)
        )
    else:
        modes = _mode(change.new_mode if change.new_mode is not None else change.old_mode)
    return f"{status:<4} {where}  {modes}"


# --- json ---------------------------------------------------------------------------------


def render_json(verdict: Verdict) -> str:
    """Exactly the verdict model's JSON form (camelCase), the stable machine interface."""
    return verdict.to_json()


# --- GitHub Actions -----------------------------------------------------------------------


def _gh_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_property(text: str) -> str:
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


def _gh_command(command: str, message: str, **props: str | None) -> str:
    given = [f"{key}={_gh_property(value)}" for key, value in props.items() if value is not None]
    sep = " " if given else ""
    return f"::{command}{sep}{','.join(given)}::{_gh_data(message)}"


def render_github(verdict: Verdict) -> str:
    """GitHub workflow commands: `::error` per enforced violation, `::warning` per observed
    one, `::notice` when accepted.

    Enforced violations come first because a step shows only about ten annotations.
    """
    ordered = sorted(verdict.violations, key=lambda v: not v.enforced)
    lines = [
        _gh_command(
            "error" if v.enforced else "warning",
            _message(v) if v.enforced else f"[observe] {_message(v)}",
            file=v.path,
            title=v.code.value,
        )
        for v in ordered
    ]
    summary = " ".join(f"{name} {value}" for name, value in _identity(verdict))
    if verdict.decision is Decision.ACCEPTED:
        lines.append(_gh_command("notice", f"ACCEPTED {summary}", title="integrator"))
    elif _needs_fallback_failure(verdict):
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
        f"\\{ch}" if ch in _MD_PUNCTUATION else ch for ch in _visible(text, keep_newlines=True)
    )
    return escaped.replace("\n", "<br>")


def github_step_summary(verdict: Verdict) -> str:
    """A Markdown job summary: decision, a table of violations, resources and next steps."""
    ident = ", ".join(f"{name} {_md(value)}" for name, value in _identity(verdict))
    lines = [f"### integrator gate: {verdict.decision.value}", "", f"{ident}", ""]
    if verdict.violations:
        lines += ["| Code | Path or resource | Detail | Mode |", "| --- | --- | --- | --- |"]
        lines += [
            f"| {v.code.value} | {_md(v.subject)} | {_md(_message(v))} | {v.mode} |"
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
    codes = _distinct_codes(verdict)
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
    with open(target, "a", encoding="utf-8", errors="surrogateescape") as fh:
        fh.write(github_step_summary(verdict) + "\n")
    return True


# --- SARIF 2.1.0 --------------------------------------------------------------------------


def _uri(path: str) -> str:
    # A SARIF uri is a URI reference: `%`, `:` (scheme look-alike), spaces and non-ASCII
    # must be percent-encoded. surrogateescape restores undecodable bytes of git paths.
    return quote(path, safe="/", errors="surrogateescape")


def render_sarif(verdict: Verdict) -> str:
    """SARIF 2.1.0: one rule per code present, one result per violation."""
    codes = [code for code, _ in _distinct_codes(verdict)]
    index = {code: i for i, code in enumerate(codes)}
    rules = [
        {
            "id": code.value,
            "name": code.value,
            "shortDescription": {"text": CODE_SUMMARY[code]},
            "help": {"text": hint(code)},
            "defaultConfiguration": {"level": "error"},
            "properties": {"decides": "REVIEW" if code in REVIEW_CODES else "FENCED"},
        }
        for code in codes
    ]
    results: list[dict[str, object]] = []
    for v in verdict.violations:
        result: dict[str, object] = {
            "ruleId": v.code.value,
            "ruleIndex": index[v.code],
            "level": "error" if v.enforced else "warning",
            "message": {"text": _message(v)},
            "partialFingerprints": {FINGERPRINT_KEY: fingerprint(v)},
            "properties": {"mode": v.mode},
        }
        location: dict[str, object] = {}
        if v.path is not None:
            location["physicalLocation"] = {
                "artifactLocation": {"uri": _uri(v.path), "uriBaseId": "%SRCROOT%"}
            }
        if v.resource is not None:
            location["logicalLocations"] = [{"name": v.resource, "kind": "resource"}]
        if location:
            result["locations"] = [location]
        results.append(result)
    run_properties = {
        key: value
        for key, value in (
            ("decision", verdict.decision.value),
            ("candidate", verdict.candidate),
            ("taskId", verdict.task_id),
            ("attemptId", verdict.attempt_id),
            ("generation", verdict.generation),
        )
        if value is not None
    }
    document = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "integrator",
                        "version": __version__,
                        "rules": rules,
                    }
                },
                "results": results,
                "properties": run_properties,
            }
        ],
    }
    return json.dumps(document, indent=2, ensure_ascii=False)


# --- JUnit XML ----------------------------------------------------------------------------


def _xml_safe(text: str) -> str:
    """`text` with the characters XML 1.0 cannot carry spelled out (ElementTree would write
    them raw and produce a document no parser accepts)."""
    out: list[str] = []
    for ch in text:
        cp = ord(ch)
        allowed = (
            ch in "\t\n\r"
            or 0x20 <= cp <= 0xD7FF
            or 0xE000 <= cp <= 0xFFFD
            or 0x10000 <= cp <= 0x10FFFF
        )
        out.append(ch if allowed else (f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}"))
    return "".join(out)


def render_junit(verdict: Verdict) -> str:
    """JUnit XML: suite `integrator.gate`, a failing case per enforced violation (type FENCED
    or REVIEW), a skipped case per observed one, and one passing case when accepted."""
    suite = ET.Element("testsuite", name=JUNIT_SUITE)
    props = ET.SubElement(suite, "properties")
    for name, value in [("decision", verdict.decision.value), *_identity(verdict)]:
        ET.SubElement(props, "property", name=name, value=_xml_safe(value))
    failures = skipped = 0
    for v in verdict.violations:
        case = ET.SubElement(
            suite, "testcase", classname=JUNIT_SUITE, name=_xml_safe(f"{v.code.value} {v.subject}")
        )
        if v.path is not None:
            case.set("file", _xml_safe(v.path))
        body = f"{CODE_SUMMARY[v.code]}\n{_message(v)}\nnext: {hint(v.code, verdict.task_id)}"
        if v.enforced:
            failures += 1
            kind = "REVIEW" if v.code in REVIEW_CODES else "FENCED"
            element = ET.SubElement(case, "failure", type=kind, message=_xml_safe(_message(v)))
        else:
            skipped += 1
            element = ET.SubElement(
                case, "skipped", message=_xml_safe(f"observe mode: {_message(v)}")
            )
        element.text = _xml_safe(body)
    if verdict.decision is Decision.ACCEPTED:
        ET.SubElement(suite, "testcase", classname=JUNIT_SUITE, name="ACCEPTED")
    elif _needs_fallback_failure(verdict):
        failures += 1
        case = ET.SubElement(suite, "testcase", classname=JUNIT_SUITE, name="decision")
        ET.SubElement(
            case,
            "failure",
            type=verdict.decision.value,
            message=f"decision {verdict.decision.value} without an enforced violation",
        )
    tests = len(suite.findall("testcase"))
    counts = {
        "tests": str(tests),
        "failures": str(failures),
        "errors": "0",
        "skipped": str(skipped),
    }
    for key, value in counts.items():
        suite.set(key, value)
    root = ET.Element("testsuites", {"name": "integrator", **counts})
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode")


# --- GitLab Code Quality ------------------------------------------------------------------


def _severity(violation: Violation) -> str:
    if not violation.enforced:
        return "info"
    return "major" if violation.code in REVIEW_CODES else "blocker"


def render_codequality(verdict: Verdict) -> str:
    """GitLab Code Quality: a JSON array with one issue per violation."""
    issues = [
        {
            "description": f"{v.code.value}: {_message(v)}",
            "check_name": v.code.value,
            "fingerprint": fingerprint(v),
            "severity": _severity(v),
            "location": {"path": v.path if v.path is not None else ".", "lines": {"begin": 1}},
        }
        for v in verdict.violations
    ]
    return json.dumps(issues, indent=2, ensure_ascii=False)


_RENDERERS: dict[str, Callable[[Verdict], str]] = {
    "json": render_json,
    "github": render_github,
    "sarif": render_sarif,
    "junit": render_junit,
    "codequality": render_codequality,
}
