"""JUnit XML, for the CI systems that read only test reports.

The document is valid under both schemas CI tools hold JUnit to: the Jenkins xUnit
plugin's `junit-10.xsd` and the Apache Ant schema (windyroad `JUnit.xsd`, the strictest
common one), with nothing lost, since where Ant is stricter the information has another
place:

- `<testsuites>` carries no attributes (Ant allows none; its counts are the one suite's);
  the suite has `package` and `id`, which Ant requires of a suite inside `testsuites`.
- The suite has `timestamp` (when the report was written, UTC, without a zone as Ant
  demands), `hostname` (`localhost` when unknown, as Ant prescribes), `time` 0 (nothing is
  timed), `skipped`, and `properties` first, `system-out` (the verdict's identity) and an
  empty `system-err` last, in the order Ant fixes.
- One testcase per violation with at most one `<failure>` (enforced; type FENCED or
  REVIEW) or `<skipped>` (observed) in it, `time` 0. A path has no attribute of its own
  (neither schema allows `file` on a testcase): it is in the testcase name
  (`CODE subject`) and, exactly, in the failure text.
- An accepted verdict has one passing testcase `ACCEPTED`; a non-accepted one without an
  enforced violation gets a failing testcase `decision` so it never reads as passed.
"""

from __future__ import annotations

import socket
from datetime import UTC
from xml.etree import ElementTree as ET

from integrator.clock import Clock, utcnow
from integrator.documents.verdict import CODE_SUMMARY, REVIEW_CODES, Decision, Verdict
from integrator.escape import xml_safe
from integrator.report.common import message, needs_fallback_failure
from integrator.report.hints import hint

JUNIT_SUITE = "integrator.gate"
JUNIT_PACKAGE = "integrator"


def _properties(verdict: Verdict) -> list[tuple[str, str]]:
    fields = [
        ("decision", verdict.decision.value),
        ("candidate", verdict.candidate),
        ("base", verdict.base),
        ("task", verdict.task_id),
        ("attempt", verdict.attempt_id),
        ("generation", None if verdict.generation is None else str(verdict.generation)),
        ("contractDigest", verdict.contract_digest),
        ("policyDigest", verdict.policy_digest),
        ("static", None if verdict.static is None else str(verdict.static).lower()),
    ]
    return [(name, value) for name, value in fields if value is not None]


def _hostname() -> str:
    try:
        return socket.gethostname() or "localhost"
    except OSError:
        return "localhost"


def render_junit(verdict: Verdict, *, clock: Clock = utcnow, hostname: str | None = None) -> str:
    """JUnit XML: suite `integrator.gate`, a failing case per enforced violation (type FENCED
    or REVIEW), a skipped case per observed one, and one passing case when accepted.

    The one input besides the verdict is when and where the report is written (`clock`,
    `hostname`; the machine's by default), which Ant's schema requires."""
    written = clock().astimezone(UTC).replace(tzinfo=None, microsecond=0)
    suite = ET.Element(
        "testsuite",
        name=JUNIT_SUITE,
        package=JUNIT_PACKAGE,
        id="0",
        timestamp=written.isoformat(),
        hostname=xml_safe(hostname or _hostname()),
        time="0",
    )
    props = ET.SubElement(suite, "properties")
    for name, value in _properties(verdict):
        ET.SubElement(props, "property", name=name, value=xml_safe(value))
    failures = skipped = 0
    for v in verdict.violations:
        case = ET.SubElement(
            suite,
            "testcase",
            name=xml_safe(f"{v.code.value} {v.subject}"),
            classname=JUNIT_SUITE,
            time="0",
        )
        lines = [CODE_SUMMARY[v.code]]
        if v.path is not None:
            lines.append(f"path: {v.path}")
        lines += [message(v), f"next: {hint(v.code, verdict.task_id)}"]
        if v.enforced:
            failures += 1
            kind = "REVIEW" if v.code in REVIEW_CODES else "FENCED"
            element = ET.SubElement(case, "failure", type=kind, message=xml_safe(message(v)))
        else:
            skipped += 1
            element = ET.SubElement(
                case, "skipped", message=xml_safe(f"observe mode: {message(v)}")
            )
        element.text = xml_safe("\n".join(lines))
    if verdict.decision is Decision.ACCEPTED:
        ET.SubElement(suite, "testcase", name="ACCEPTED", classname=JUNIT_SUITE, time="0")
    elif needs_fallback_failure(verdict):
        failures += 1
        case = ET.SubElement(suite, "testcase", name="decision", classname=JUNIT_SUITE, time="0")
        ET.SubElement(
            case,
            "failure",
            type=verdict.decision.value,
            message=f"decision {verdict.decision.value} without an enforced violation",
        )
    out = ET.SubElement(suite, "system-out")
    out.text = xml_safe(" ".join(f"{name} {value}" for name, value in _properties(verdict)))
    ET.SubElement(suite, "system-err").text = ""
    counts = {
        "tests": str(len(suite.findall("testcase"))),
        "failures": str(failures),
        "errors": "0",
        "skipped": str(skipped),
    }
    for key, value in counts.items():
        suite.set(key, value)
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode")
