"""JUnit XML, for the CI systems that read only test reports."""

from __future__ import annotations

from xml.etree import ElementTree as ET

from integrator.documents.verdict import CODE_SUMMARY, REVIEW_CODES, Decision, Verdict
from integrator.report.common import identity, message, needs_fallback_failure
from integrator.report.escape import xml_safe
from integrator.report.hints import hint

JUNIT_SUITE = "integrator.gate"


def render_junit(verdict: Verdict) -> str:
    """JUnit XML: suite `integrator.gate`, a failing case per enforced violation (type FENCED
    or REVIEW), a skipped case per observed one, and one passing case when accepted."""
    suite = ET.Element("testsuite", name=JUNIT_SUITE)
    props = ET.SubElement(suite, "properties")
    for name, value in [("decision", verdict.decision.value), *identity(verdict)]:
        ET.SubElement(props, "property", name=name, value=xml_safe(value))
    failures = skipped = 0
    for v in verdict.violations:
        case = ET.SubElement(
            suite, "testcase", classname=JUNIT_SUITE, name=xml_safe(f"{v.code.value} {v.subject}")
        )
        if v.path is not None:
            case.set("file", xml_safe(v.path))
        body = f"{CODE_SUMMARY[v.code]}\n{message(v)}\nnext: {hint(v.code, verdict.task_id)}"
        if v.enforced:
            failures += 1
            kind = "REVIEW" if v.code in REVIEW_CODES else "FENCED"
            element = ET.SubElement(case, "failure", type=kind, message=xml_safe(message(v)))
        else:
            skipped += 1
            element = ET.SubElement(
                case, "skipped", message=xml_safe(f"observe mode: {message(v)}")
            )
        element.text = xml_safe(body)
    if verdict.decision is Decision.ACCEPTED:
        ET.SubElement(suite, "testcase", classname=JUNIT_SUITE, name="ACCEPTED")
    elif needs_fallback_failure(verdict):
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
