from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any
from urllib.parse import unquote
from xml.etree import ElementTree as ET

import pytest

from integrator.documents.verdict import (
    CODE_SUMMARY,
    Code,
    Decision,
    Determination,
    ResourceUse,
    Verdict,
    Violation,
)
from integrator.errors import UsageError
from integrator.escape import write_text
from integrator.fence.diff import MODE_BLOB, MODE_EXEC, Change, Status
from integrator.report.common import fingerprint
from integrator.report.formats import FORMATS, append_github_summary, render
from integrator.report.github import github_step_summary
from integrator.report.hints import HINTS, hint
from integrator.report.sarif import FINGERPRINT_KEY

CANDIDATE = "1a2b3c4d5e6f7a8b9c0d1a2b3c4d5e6f7a8b9c0d"
ODD_PATH = "a,b:c%.txt"


def make_verdict(**overrides: Any) -> Verdict:
    """A fenced verdict with every identity field set; tests override what differs."""
    fields: dict[str, Any] = {
        "decision": Decision.FENCED,
        "violations": [
            Violation(code=Code.PATH_NOT_OWNED, path=ODD_PATH, detail="line1\nline2"),
            Violation(code=Code.STALE_GENERATION, detail="claim is at generation 4, not 3"),
            Violation(code=Code.PATH_NOT_OWNED, path="src/b.py", detail="not in allowedPaths"),
            Violation(
                code=Code.RESOURCE_UNKNOWN, resource="api:billing", detail="owner unresolved"
            ),
            Violation(
                code=Code.MERGE_CONFLICT, path="docs/x.md", detail="conflict", mode="observe"
            ),
        ],
        "resources": [
            ResourceUse(
                resource="api:billing", determination=Determination.UNKNOWN, paths=["api/b.yaml"]
            )
        ],
        "candidate": CANDIDATE,
        "task_id": "T-7",
        "attempt_id": "att-2",
        "generation": 3,
    }
    fields.update(overrides)
    return Verdict(**fields)


def accepted() -> Verdict:
    """An accepted verdict without violations."""
    return make_verdict(decision=Decision.ACCEPTED, violations=[], resources=[])


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("factory", [make_verdict, accepted])
def test_every_format_renders_fenced_and_accepted(fmt: str, factory: Any) -> None:
    """Every format renders both a fenced and an accepted verdict to a non-empty string."""
    assert render(factory(), fmt)


def test_unknown_format_is_a_usage_error() -> None:
    """An unknown format name raises UsageError naming the valid formats."""
    with pytest.raises(UsageError, match="sarif"):
        render(accepted(), "yaml")


def test_every_code_has_a_hint() -> None:
    """Each verdict code, present and future, has a next-step hint."""
    assert set(HINTS) == set(Code)


def test_json_is_exactly_the_model_form() -> None:
    """The json format is the verdict model's own camelCase JSON and round-trips."""
    verdict = make_verdict()
    out = render(verdict, "json")
    assert out == verdict.to_json()
    data = json.loads(out)
    assert data["taskId"] == "T-7"
    assert Verdict.model_validate_json(out) == verdict


def test_text_names_every_code_and_its_hint() -> None:
    """Text output lists every violation code and the hint for each distinct code once."""
    out = render(make_verdict(), "text")
    first = out.splitlines()[0]
    assert first.startswith("FENCED")
    assert CANDIDATE[:12] in first
    assert "task T-7" in first
    assert "attempt att-2" in first
    assert "generation 3" in first
    for code in (
        Code.PATH_NOT_OWNED,
        Code.STALE_GENERATION,
        Code.RESOURCE_UNKNOWN,
        Code.MERGE_CONFLICT,
    ):
        assert code.value in out
        assert out.count(hint(code, "T-7")) == 1
    assert "integrator contract show --task T-7" in out
    assert "integrator contract expand" in out
    assert "rebase onto the queue head and resubmit" in out
    assert "MERGE_CONFLICT (observe)" in out
    assert "UNKNOWN  api:billing  (api/b.yaml)" in out
    assert "api:billing  owner unresolved\n" in out
    assert "\x1b[" not in out


def test_text_keeps_multiline_detail_indented() -> None:
    """A newline in a detail continues on an indented line instead of faking a new row."""
    out = render(make_verdict(), "text")
    assert "line1\n    line2" in out


def test_text_spells_out_control_characters_in_paths() -> None:
    """A path holding an ANSI escape is shown spelled out, never sent to the terminal raw."""
    verdict = make_verdict(
        violations=[Violation(code=Code.UNSAFE_PATH, path="evil\x1b[2J.txt", detail="path bad")]
    )
    out = render(verdict, "text", color=True)
    assert "evil\\x1b[2J.txt" in out
    assert "\x1b[2J" not in out


def test_text_colour_only_when_asked() -> None:
    """ANSI colour appears with color=True and wraps the decision."""
    out = render(make_verdict(), "text", color=True)
    assert out.startswith("\x1b[1;31mFENCED\x1b[0m")


def test_text_lists_changes_compactly() -> None:
    """Given changes, text shows status, both rename ends and mode transitions, one line each."""
    changes = [
        Change(Status.RENAMED, "old.py", "new.py", MODE_BLOB, MODE_BLOB, "a" * 40, "b" * 40, 87),
        Change(Status.MODIFIED, "run.sh", "run.sh", MODE_BLOB, MODE_EXEC, "c" * 40, "d" * 40),
        Change(Status.ADDED, None, "added.txt", None, MODE_BLOB, None, "e" * 40),
    ]
    out = render(accepted(), "text", changes=changes)
    assert "changes (3):" in out
    assert "R087 old.py -> new.py  100644" in out
    assert "M    run.sh  100644 -> 100755" in out
    assert "A    added.txt  100644" in out
    assert "no violations" in out


def test_github_escaping_is_exact() -> None:
    """Properties escape % CR LF : , and messages escape % CR LF, exactly as GitHub decodes."""
    verdict = make_verdict(
        violations=[Violation(code=Code.PATH_NOT_OWNED, path=ODD_PATH, detail="50%\r\nline2: x,y")]
    )
    assert render(verdict, "github") == (
        "::error file=a%2Cb%3Ac%25.txt,title=PATH_NOT_OWNED::50%25%0D%0Aline2: x,y"
    )


def test_github_levels_and_pathless_violations() -> None:
    """Enforced violations are errors (first), observed ones warnings; a resource names the
    path that touched it, and a claim-level violation has no file= unless the contract's."""
    lines = render(make_verdict(), "github").splitlines()
    assert lines[0].startswith("::error file=a%2Cb%3Ac%25.txt,title=PATH_NOT_OWNED::line1%0Aline2")
    assert "::error title=STALE_GENERATION::claim is at generation 4, not 3" in lines
    assert (
        "::error file=api/b.yaml,title=RESOURCE_UNKNOWN::owner unresolved (resource api:billing)"
    ) in lines
    with_contract = render(make_verdict(), "github", contract_path="ci/contract.json")
    assert (
        "::error file=ci/contract.json,title=STALE_GENERATION::claim is at generation 4, not 3"
    ) in with_contract.splitlines()
    assert lines[-1] == "::warning file=docs/x.md,title=MERGE_CONFLICT::[observe] conflict"
    assert not any(line.startswith("::notice") for line in lines)


def test_github_notice_when_accepted() -> None:
    """An accepted verdict yields one notice naming the decision and candidate."""
    out = render(accepted(), "github")
    assert out == (
        "::notice title=integrator::ACCEPTED candidate 1a2b3c4d5e6f task T-7 attempt att-2 "
        "generation 3"
    )


def test_step_summary_is_a_markdown_table_with_escaped_cells() -> None:
    """The summary has a row per violation with | and newlines escaped so the table holds."""
    verdict = make_verdict(
        violations=[Violation(code=Code.PATH_NOT_OWNED, path="a|b.txt", detail="one\ntwo")]
    )
    summary = github_step_summary(verdict)
    assert "### integrator gate: FENCED" in summary
    assert "| Code | Path or resource | Detail | Mode |" in summary
    assert "| PATH_NOT_OWNED | a\\|b\\.txt | one<br>two | enforce |" in summary
    assert (
        "- PATH_NOT_OWNED: ask the coordinator to expand the claim "
        "\\(integrator contract expand\\) or drop the change"
    ) in summary


def test_step_summary_appended_only_when_env_set(tmp_path: Path) -> None:
    """The summary is appended to $GITHUB_STEP_SUMMARY when set and nothing is written otherwise."""
    target = tmp_path / "summary.md"
    target.write_text("earlier step\n", encoding="utf-8")
    assert append_github_summary(make_verdict(), {}) is False
    assert append_github_summary(make_verdict(), {"GITHUB_STEP_SUMMARY": ""}) is False
    assert target.read_text(encoding="utf-8") == "earlier step\n"
    env = {"GITHUB_STEP_SUMMARY": str(target)}
    assert append_github_summary(make_verdict(), env) is True
    assert append_github_summary(accepted(), env) is True
    text = target.read_text(encoding="utf-8")
    assert text.startswith("earlier step\n### integrator gate: FENCED")
    assert "### integrator gate: ACCEPTED" in text


def test_sarif_rules_one_per_code_and_results_reference_them() -> None:
    """SARIF has one rule per distinct code with its summary, and every result's ruleId is a rule."""
    doc = json.loads(render(make_verdict(), "sarif"))
    assert doc["version"] == "2.1.0"
    assert "sarif-schema-2.1.0" in doc["$schema"]
    (run,) = doc["runs"]
    assert run["tool"]["driver"]["name"] == "integrator"
    rules = run["tool"]["driver"]["rules"]
    ids = [rule["id"] for rule in rules]
    assert ids == ["PATH_NOT_OWNED", "STALE_GENERATION", "RESOURCE_UNKNOWN", "MERGE_CONFLICT"]
    for rule in rules:
        assert rule["shortDescription"]["text"] == CODE_SUMMARY[Code(rule["id"])]
    results = run["results"]
    assert len(results) == 5
    for result in results:
        assert result["ruleId"] in ids
        assert ids[result["ruleIndex"]] == result["ruleId"]
        assert FINGERPRINT_KEY in result["partialFingerprints"]
    assert [r["level"] for r in results] == ["error", "error", "error", "error", "warning"]


def test_sarif_locations_are_encoded_uris() -> None:
    """A path becomes a percent-encoded relative URI; a claim-level violation sits at the
    contract file (or the first changed path), a resource-only one at its resource's path."""
    results = json.loads(render(make_verdict(), "sarif"))["runs"][0]["results"]

    def physical(result: dict[str, Any]) -> dict[str, Any]:
        located: dict[str, Any] = result["locations"][0]["physicalLocation"]
        return located

    uri = physical(results[0])["artifactLocation"]["uri"]
    assert uri == "a%2Cb%3Ac%25.txt"
    assert unquote(uri) == ODD_PATH
    assert physical(results[1]) == {
        "artifactLocation": {"uri": "a%2Cb%3Ac%25.txt", "uriBaseId": "%SRCROOT%"},
        "region": {"startLine": 1},
    }
    assert results[1]["properties"]["anchor"] == "changed"
    assert results[3]["locations"] == [
        {
            "physicalLocation": {
                "artifactLocation": {"uri": "api/b.yaml", "uriBaseId": "%SRCROOT%"},
                "region": {"startLine": 1},
            },
            "logicalLocations": [{"name": "api:billing", "kind": "resource"}],
        }
    ]
    at_contract = json.loads(render(make_verdict(), "sarif", contract_path="c t.json"))
    stale = at_contract["runs"][0]["results"][1]
    assert physical(stale)["artifactLocation"]["uri"] == "c%20t.json"
    assert stale["properties"]["anchor"] == "contract"


def test_fingerprints_stable_and_candidate_independent() -> None:
    """Fingerprints repeat across renders and candidates, ignore the detail, and differ by path."""
    one = make_verdict()
    other = make_verdict(
        candidate="f" * 40,
        violations=[
            Violation(code=Code.PATH_NOT_OWNED, path=ODD_PATH, detail="reworded"),
            Violation(code=Code.PATH_NOT_OWNED, path="src/c.py", detail="not in allowedPaths"),
        ],
    )

    def sarif_prints(verdict: Verdict) -> list[str]:
        results = json.loads(render(verdict, "sarif"))["runs"][0]["results"]
        return [r["partialFingerprints"][FINGERPRINT_KEY] for r in results]

    def cq_prints(verdict: Verdict) -> list[str]:
        return [issue["fingerprint"] for issue in json.loads(render(verdict, "codequality"))]

    assert sarif_prints(one) == sarif_prints(one)
    assert cq_prints(one) == cq_prints(one)
    assert sarif_prints(one)[0] == sarif_prints(other)[0] == cq_prints(other)[0]
    assert sarif_prints(other)[0] != sarif_prints(other)[1]
    assert sarif_prints(one)[0] != sarif_prints(one)[2]
    assert len(fingerprint(one.violations[0])) == 64
    assert fingerprint(Violation(code=Code.PATH_DENIED, path=ODD_PATH, detail="x")) != fingerprint(
        one.violations[0]
    )


def test_junit_failures_typed_and_observed_skipped() -> None:
    """JUnit has suite integrator.gate, FENCED/REVIEW failure types and observed cases skipped."""
    root = ET.fromstring(render(make_verdict(), "junit"))
    assert root.attrib == {}
    (suite,) = root.findall("testsuite")
    assert suite.get("name") == "integrator.gate"
    cases = suite.findall("testcase")
    assert len(cases) == 5
    assert suite.get("tests") == "5"
    assert suite.get("failures") == "4"
    assert suite.get("skipped") == "1"
    types = [f.get("type") for f in suite.iter("failure")]
    assert types == ["FENCED", "FENCED", "FENCED", "REVIEW"]
    first = cases[0].find("failure")
    assert first is not None
    assert first.get("message") == "line1\nline2"
    assert f"path: {ODD_PATH}" in (first.text or "")
    assert "file" not in cases[0].attrib
    assert cases[4].find("skipped") is not None


def test_junit_single_passing_case_when_accepted() -> None:
    """An accepted verdict yields exactly one testcase with no failure."""
    root = ET.fromstring(render(accepted(), "junit"))
    cases = list(root.iter("testcase"))
    assert len(cases) == 1
    assert list(cases[0]) == []
    suite = root.find("testsuite")
    assert suite is not None
    assert suite.get("failures") == "0"


def test_junit_survives_control_characters() -> None:
    """A path with characters XML cannot carry still renders a document parsers accept."""
    verdict = make_verdict(
        violations=[Violation(code=Code.UNSAFE_PATH, path="bad\x01\x1b.txt", detail="nul\x00")]
    )
    root = ET.fromstring(render(verdict, "junit"))
    (case,) = root.iter("testcase")
    assert case.get("name") == "UNSAFE_PATH bad\\x01\\x1b.txt"


def test_junit_fails_a_non_accepted_verdict_without_enforced_violations() -> None:
    """A REVIEW verdict whose violations are all observed still reads as failed in JUnit."""
    verdict = make_verdict(
        decision=Decision.REVIEW,
        violations=[Violation(code=Code.MERGE_CONFLICT, detail="x", mode="observe")],
    )
    root = ET.fromstring(render(verdict, "junit"))
    suite = root.find("testsuite")
    assert suite is not None
    assert suite.get("failures") == "1"
    assert [f.get("type") for f in root.iter("failure")] == ["REVIEW"]


def test_codequality_issues() -> None:
    """Code Quality issues carry check_name, severity by mode and kind, and a real path for a
    violation without one (the contract file, else the first changed path)."""
    issues = json.loads(render(make_verdict(), "codequality"))
    assert [i["check_name"] for i in issues] == [
        "PATH_NOT_OWNED",
        "STALE_GENERATION",
        "PATH_NOT_OWNED",
        "RESOURCE_UNKNOWN",
        "MERGE_CONFLICT",
    ]
    assert [i["severity"] for i in issues] == ["blocker", "blocker", "blocker", "major", "info"]
    assert issues[0]["location"] == {"path": ODD_PATH, "lines": {"begin": 1}}
    assert issues[1]["location"]["path"] == ODD_PATH
    assert issues[3]["location"]["path"] == "api/b.yaml"
    placed = json.loads(render(make_verdict(), "codequality", contract_path="c.json"))
    assert placed[1]["location"]["path"] == "c.json"
    assert issues[0]["description"] == "PATH_NOT_OWNED: line1\nline2"
    assert json.loads(render(accepted(), "codequality")) == []


def test_text_says_an_accepted_gate_verdict_is_not_merged_yet() -> None:
    """A gate ACCEPTED (no staging commit) says the landing checks the merge again; a
    landing's verdict does not."""
    gate_text = render(make_verdict(decision=Decision.ACCEPTED, violations=[]), "text")
    assert "not merged yet" in gate_text
    landed = make_verdict(decision=Decision.ACCEPTED, violations=[], staging_commit="b" * 40)
    assert "not merged yet" not in render(landed, "text")


def test_text_writes_changed_paths_like_the_verdict() -> None:
    """A changed path that is not UTF-8 is shown in git's quoted form, as in the verdict."""
    changes = [Change(Status.ADDED, None, "bad\udcff.txt", None, MODE_BLOB, None, "e" * 40)]
    out = render(accepted(), "text", changes=changes)
    assert 'A    "bad\\377.txt"  100644' in out
    out.encode("utf-8")


def test_write_text_never_fails_to_encode() -> None:
    """A character that cannot be encoded is written as a backslash escape, never raised."""
    stream = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
    write_text('{"x": "\udcff"}\n', stream, "utf-8")
    assert stream.buffer.getvalue() == b'{"x": "\\udcff"}\n'
