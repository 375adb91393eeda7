"""Every machine format, as its real consumer reads it.

Verdicts come from the real gate on real repositories (a lockfile's resource-only
RESOURCE_NOT_OWNED, claim-level STALE_GENERATION / LEASE_EXPIRED / CONTRACT_DIGEST_MISMATCH,
a file named with the byte 0xff) plus a few constructed ones, and each rendering is held
to its consumer's own schema: SARIF 2.1.0 (OASIS JSON schema) and GitHub code scanning's
ingestion rules, JUnit XML under the Jenkins xUnit plugin's junit-10.xsd and Ant's
JUnit.xsd and read back by junitparser, GitLab Code Quality under GitLab's
codeclimate.json and its documented extra rules, and the verdict schema in contracts/.

The official schema files are not part of this project: they are looked for in a folder
beside the checkout (SCHEMAS), and the tests that need them skip, saying so, when it is
absent.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote_to_bytes
from xml.etree import ElementTree as ET

import jsonschema
import pytest
import xmlschema
from junitparser import Failure, JUnitXml, Skipped

import integrator
from integrator.documents.verdict import (
    CODE_SUMMARY,
    Code,
    Decision,
    Determination,
    ResourceUse,
    Verdict,
    Violation,
)
from integrator.report.codequality import SEVERITIES
from integrator.report.common import CONTRACT_STANDIN
from integrator.report.formats import FORMATS, contract_in_worktree, render
from integrator.report.junit import render_junit
from integrator.report.sarif import FINGERPRINT_KEY, LINE_HASH_KEY, SRCROOT
from tests.gitutil import commit_files, git, make_repo

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / ".." / "shared" / "vendor" / "formats"
VERDICT_SCHEMA = ROOT / "contracts" / "verdict.v1.schema.json"

BAD_NAME = "src/bad\udcff.txt"  # the byte 0xff, as the file system hands it to Python
BAD_WRITTEN = '"src/bad\\377.txt"'  # the same path as verdicts write it (git's quoting)
BAD_URI = "src/bad%FF.txt"


# -- the consumers' checks ----------------------------------------------------------------


def schema_file(name: str) -> Path | None:
    path = SCHEMAS / name
    return path if path.is_file() else None


def require_schemas() -> None:
    if not SCHEMAS.is_dir():
        pytest.skip(
            f"the official format schemas are not next to this checkout ({SCHEMAS.resolve()} "
            "is absent): they are not part of the project, so these checks cannot run here"
        )


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_URI_CHARS = re.compile(r"^(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/]|%[0-9A-F]{2})+$")


def check_sarif(text: str) -> dict[str, Any]:
    """The SARIF schema (when present) and GitHub code scanning's ingestion rules."""
    doc: dict[str, Any] = json.loads(text)
    path = schema_file("sarif-schema-2.1.0.json")
    if path is not None:
        schema = json.loads(path.read_text("utf-8"))
        jsonschema.validators.validator_for(schema)(schema).validate(doc)
    assert doc["version"] == "2.1.0"
    assert doc["$schema"]
    assert 1 <= len(doc["runs"]) <= 20
    for run in doc["runs"]:
        driver = run["tool"]["driver"]
        assert driver["name"]
        rules = driver["rules"]
        ids = [rule["id"] for rule in rules]
        for rule in rules:
            assert 0 < len(rule["shortDescription"]["text"]) <= 1024
            assert 0 < len(rule["fullDescription"]["text"]) <= 1024
            assert rule["help"]["text"]
            assert rule["help"]["markdown"]
            assert rule.get("name") != rule["id"]
        assert len(run["results"]) <= 25_000
        for result in run["results"]:
            assert result["message"]["text"]
            assert ids[result["ruleIndex"]] == result["ruleId"]
            assert 1 <= len(result["locations"]) <= 10
            physical = result["locations"][0]["physicalLocation"]
            uri = physical["artifactLocation"]["uri"]
            assert _URI_CHARS.match(uri), uri
            assert not _SCHEME.match(uri) and not uri.startswith("/"), uri
            assert physical["artifactLocation"]["uriBaseId"] == SRCROOT
            assert physical["region"]["startLine"] >= 1
            prints = result["partialFingerprints"]
            assert re.fullmatch(r"[0-9a-f]{16}:[1-9][0-9]*", prints[LINE_HASH_KEY])
            assert re.fullmatch(r"[0-9a-f]{64}", prints[FINGERPRINT_KEY])
    return doc


def check_junit(text: str, tmp: Path) -> JUnitXml:
    """Both JUnit schemas (when present), no `file` on a testcase, and junitparser reads it."""
    file = tmp / "report.xml"
    file.write_bytes(text.encode("utf-8"))
    for name in ("jenkins-xunit-junit-10.xsd", "windyroad-JUnit.xsd"):
        path = schema_file(name)
        if path is not None:
            errors = [str(e) for e in xmlschema.XMLSchema(str(path)).iter_errors(str(file))]
            assert errors == [], f"{name}: {errors}"
    root = ET.fromstring(text)
    assert root.tag == "testsuites"
    assert root.attrib == {}
    assert all("file" not in case.attrib for case in root.iter("testcase"))
    report = JUnitXml.fromfile(str(file))
    suites = list(report)
    assert len(suites) == 1
    return report


def check_codequality(text: str) -> list[dict[str, Any]]:
    """GitLab's codeclimate.json for every entry (when present) and its documented rules."""
    assert not text.startswith("\ufeff")
    issues: list[dict[str, Any]] = json.loads(text)
    assert isinstance(issues, list)
    path = schema_file("gitlab-codeclimate.json")
    validator = None
    if path is not None:
        schema = json.loads(path.read_text("utf-8"))
        validator = jsonschema.validators.validator_for(schema)(schema)
    for issue in issues:
        if validator is not None:
            validator.validate(issue)
        assert issue["description"]
        assert issue["check_name"]
        assert issue["fingerprint"]
        assert issue["severity"] in SEVERITIES
        where = issue["location"]["path"]
        assert where and not where.startswith("/") and where != "."
        assert isinstance(issue["location"]["lines"]["begin"], int)
        assert issue["location"]["lines"]["begin"] >= 1
    return issues


def check_json(text: str) -> Verdict:
    """The verdict schema in contracts/ and the model itself."""
    doc = json.loads(text)
    schema = json.loads(VERDICT_SCHEMA.read_text("utf-8"))
    jsonschema.validators.validator_for(schema)(schema).validate(doc)
    return Verdict.model_validate_json(text)


_COMMAND = re.compile(r"^::(error|warning|notice)(?: ([^:]*))?::(.*)$")
_PROPERTY = re.compile(r"^(file|title|line|col|endLine|endColumn)=([^,:]*)$")


def _gh_unescape(text: str) -> str:
    for escaped, raw in (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%")):
        text = text.replace(escaped, raw)
    return text


def check_github(text: str) -> list[tuple[str, dict[str, str], str]]:
    """Every line is one workflow command the runner parses, properties well formed."""
    commands = []
    for line in text.splitlines():
        match = _COMMAND.match(line)
        assert match, line
        props: dict[str, str] = {}
        for item in (match.group(2) or "").split(",") if match.group(2) else []:
            prop = _PROPERTY.match(item)
            assert prop, item
            props[prop.group(1)] = _gh_unescape(prop.group(2))
        assert not any(ord(ch) < 0x20 for ch in line)
        commands.append((match.group(1), props, _gh_unescape(match.group(3))))
    return commands


def check_text(text: str) -> str:
    """No terminal control character but newlines in the text report."""
    assert not any(ord(ch) < 0x20 and ch != "\n" for ch in text)
    return text


def check(fmt: str, text: str, tmp: Path) -> Any:
    """The consumer's check for `fmt`; returns what the consumer read."""
    checks: dict[str, Callable[[str], Any]] = {
        "text": check_text,
        "json": check_json,
        "github": check_github,
        "sarif": check_sarif,
        "junit": lambda t: check_junit(t, tmp),
        "codequality": check_codequality,
    }
    text.encode("utf-8")  # strict: a lone surrogate would fail here
    return checks[fmt](text)


# -- real repositories and real gates ---------------------------------------------------


@dataclass
class Gated:
    """One `python -m integrator gate` run."""

    returncode: int
    stdout: bytes
    stderr: bytes


@dataclass
class Scenario:
    """A prepared repository with contracts issued through the API and candidates."""

    repo: Path
    outside: Path  # a folder outside the work tree
    contracts: dict[str, Path] = field(default_factory=dict)
    candidates: dict[str, str] = field(default_factory=dict)

    def verdict(self, case: str) -> Verdict:
        """The real gate, in process."""
        contract, candidate = CASES[case]
        return integrator.gate(self.repo, self.contracts[contract], self.candidates[candidate])

    def contract_path(self, case: str) -> str | None:
        """What `integrator gate --contract FILE` passes to the renderers for `case`."""
        return contract_in_worktree(str(self.contracts[CASES[case][0]]), str(self.repo))

    def gate(
        self, case: str, fmt: str, *, stdin: bool = False, candidate: str | None = None
    ) -> Gated:
        """The real gate as a process, standard output strict UTF-8."""
        contract, name = CASES[case]
        path = self.contracts[contract]
        argv = [sys.executable, "-m", "integrator", "gate", "--repo", str(self.repo)]
        argv += ["--contract", "-" if stdin else str(path), "--candidate"]
        argv += [candidate or self.candidates[name], "--format", fmt]
        env = {**os.environ, "PYTHONIOENCODING": "utf-8:strict", "NO_COLOR": "1"}
        env.pop("GITHUB_STEP_SUMMARY", None)
        proc = subprocess.run(
            argv,
            input=path.read_bytes() if stdin else None,
            capture_output=True,
            env=env,
            check=False,
            timeout=120,
        )
        return Gated(proc.returncode, proc.stdout, proc.stderr)


# case → (contract, candidate)
CASES: dict[str, tuple[str, str]] = {
    "paths": ("billing", "billing"),  # path, resource-only and non-UTF-8 violations
    "accepted": ("billing", "billing-ok"),
    "stale": ("search-1", "search"),  # STALE_GENERATION
    "digest": ("search-tampered", "search"),  # CONTRACT_DIGEST_MISMATCH, outside the work tree
    "lease": ("lease", "lease"),  # LEASE_EXPIRED
}


def build_scenario(tmp: Path) -> Scenario:
    """One canonical work tree with claims for every case in CASES."""
    repo = make_repo(tmp / "work")
    commit_files(repo, {"README.md": "# r\n", "src/a.py": "a = 1\n"}, "root")
    git("reset", "-q", "--hard", cwd=repo)
    integrator.init(repo, target="main", update_checkout=True)
    s = Scenario(repo, tmp / "elsewhere")
    s.outside.mkdir()

    def keep(name: str, contract: integrator.OwnershipContract, folder: Path) -> None:
        s.contracts[name] = folder / f"{name}.json"
        s.contracts[name].write_text(contract.to_json(), encoding="utf-8")

    billing = integrator.issue(repo, integrator.IssueRequest("billing", ("src/**",)))
    keep("billing", billing, repo)
    s.candidates["billing"] = commit_files(
        repo,
        {
            "src/a.py": "a = 2\n",
            BAD_NAME: "named with 0xff\n",
            "pnpm-lock.yaml": "lockfileVersion: 9\n",
        },
        parent=billing.base_commit,
        ref=None,
    )
    s.candidates["billing-ok"] = commit_files(
        repo, {"src/a.py": "a = 3\n"}, parent=billing.base_commit, ref=None
    )
    keep("search-1", integrator.issue(repo, integrator.IssueRequest("search", ("lib/**",))), repo)
    search = integrator.reclaim(repo, "search", force=True)
    tampered = json.loads(search.to_json())
    tampered["maxPatchBytes"] = 5
    s.contracts["search-tampered"] = s.outside / "search-tampered.json"
    s.contracts["search-tampered"].write_text(json.dumps(tampered), encoding="utf-8")
    s.candidates["search"] = commit_files(
        repo, {"lib/l.py": "l = 1\n"}, parent=search.base_commit, ref=None
    )
    lease = integrator.issue(
        repo, integrator.IssueRequest("lease", ("docs/**",), lease=timedelta(0))
    )
    keep("lease", lease, repo)
    s.candidates["lease"] = commit_files(
        repo, {"docs/d.md": "d\n"}, parent=lease.base_commit, ref=None
    )
    return s


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Scenario:
    """The shared scenario repository (built once per worker)."""
    return build_scenario(tmp_path_factory.mktemp("formats"))


def constructed() -> Iterator[tuple[str, Verdict]]:
    """Verdicts the real gate rarely makes: every code without a path, hostile paths, an
    observed violation, REVIEW without an enforced violation."""
    yield (
        "every-code-pathless",
        Verdict(
            decision=Decision.FENCED,
            violations=[Violation(code=code, detail=CODE_SUMMARY[code]) for code in Code],
            candidate="f" * 40,
            task_id="t",
        ),
    )
    hostile = ["a,b:c%.txt", "sp ace/ü.md", "ctl\x01\x1b[2J.txt", "new\nline.txt", BAD_NAME]
    yield (
        "hostile-paths",
        Verdict(
            decision=Decision.FENCED,
            violations=[
                *(Violation(code=Code.UNSAFE_PATH, path=p, detail="bad\x00 <&>") for p in hostile),
                Violation(code=Code.RESOURCE_NOT_OWNED, resource="lockfile:x", detail="x"),
                Violation(code=Code.MERGE_CONFLICT, path="m.txt", detail="c", mode="observe"),
                Violation(code=Code.PATCH_TOO_LARGE, detail="placed at the first changed path"),
            ],
            resources=[
                ResourceUse(
                    resource="lockfile:x", determination=Determination.NOT_OWNED, paths=[BAD_NAME]
                )
            ],
        ),
    )
    yield (
        "review-observed-only",
        Verdict(
            decision=Decision.REVIEW,
            violations=[
                Violation(code=Code.RESOURCE_UNKNOWN, resource="api:x", detail="?", mode="observe")
            ],
            static=True,
        ),
    )
    yield (
        "candidate-typed-with-0xff",
        Verdict(
            decision=Decision.FENCED,
            violations=[Violation(code=Code.CANDIDATE_MISSING, detail="x\udcff is not here")],
            candidate="x\udcff",
        ),
    )


# -- tests ----------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("case", list(CASES))
def test_real_verdicts_pass_their_consumers_checks(
    scenario: Scenario, case: str, fmt: str, tmp_path: Path
) -> None:
    """Each real verdict, in each format, passes its consumer's schema and rules."""
    require_schemas()
    verdict = scenario.verdict(case)
    text = render(verdict, fmt, contract_path=scenario.contract_path(case))
    check(fmt, text, tmp_path)


def test_real_verdicts_hold_the_cases_they_stand_for(scenario: Scenario) -> None:
    """The scenario's verdicts carry the violations the format tests are about."""
    codes = {
        case: [(v.code, v.path, v.resource) for v in scenario.verdict(case).violations]
        for case in CASES
    }
    assert (Code.RESOURCE_NOT_OWNED, None, "lockfile:pnpm-lock.yaml") in codes["paths"]
    assert (Code.UNSAFE_PATH, BAD_WRITTEN, None) in codes["paths"]
    assert codes["accepted"] == []
    assert codes["stale"] == [(Code.STALE_GENERATION, None, None)]
    assert codes["digest"] == [(Code.CONTRACT_DIGEST_MISMATCH, None, None)]
    assert codes["lease"] == [(Code.LEASE_EXPIRED, None, None)]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("name", "verdict"), list(constructed()))
def test_constructed_verdicts_pass_their_consumers_checks(
    name: str, verdict: Verdict, fmt: str, tmp_path: Path
) -> None:
    """Hostile paths, every code without a path and REVIEW-only verdicts stay valid."""
    require_schemas()
    check(fmt, render(verdict, fmt), tmp_path)


def _locations(doc: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [
        (
            r["ruleId"],
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            r["properties"]["anchor"],
        )
        for r in doc["runs"][0]["results"]
    ]


EXPECTED_BAD_PATH: dict[str, Callable[[Any], bool]] = {
    "text": lambda text: BAD_WRITTEN in text,
    "json": lambda verdict: BAD_WRITTEN in [v.path for v in verdict.violations],
    "github": lambda cmds: any(props.get("file") == BAD_WRITTEN for _, props, _ in cmds),
    "sarif": lambda doc: BAD_URI in [uri for _, uri, _ in _locations(doc)],
    "junit": lambda report: f"UNSAFE_PATH {BAD_WRITTEN}" in [c.name for s in report for c in s],
    "codequality": lambda issues: BAD_WRITTEN in [i["location"]["path"] for i in issues],
}


@pytest.mark.parametrize("fmt", FORMATS)
def test_gate_prints_every_format_under_strict_utf8_stdout(
    scenario: Scenario, fmt: str, tmp_path: Path
) -> None:
    """`python -m integrator gate` on a candidate adding a file named with byte 0xff prints
    a valid UTF-8 document in each format under a strict UTF-8 stdout and exits 1 (FENCED)."""
    run = scenario.gate("paths", fmt)
    assert run.returncode == 1, run.stderr.decode("utf-8", "replace")
    assert run.stderr == b""
    text = run.stdout.decode("utf-8")
    assert "Traceback" not in text
    read = check(fmt, text, tmp_path)
    assert EXPECTED_BAD_PATH[fmt](read)


@pytest.mark.parametrize("fmt", FORMATS)
def test_candidate_typed_with_0xff_still_prints_a_document(
    scenario: Scenario, fmt: str, tmp_path: Path
) -> None:
    """A candidate argument holding byte 0xff is CANDIDATE_MISSING in a valid document
    (the byte spelled `\\377`), never a traceback, under a strict UTF-8 stdout."""
    run = scenario.gate("accepted", fmt, candidate=os.fsdecode(b"x\xff"))
    assert run.returncode == 1, run.stderr.decode("utf-8", "replace")
    text = run.stdout.decode("utf-8")
    check(fmt, text, tmp_path)
    assert "Traceback" not in text
    assert "x\\377" in text or "x\\\\377" in text


def test_sarif_places_claim_level_results_at_the_contract_file(scenario: Scenario) -> None:
    """Through the real CLI, a claim-level result is located at the contract file when it
    lies in the work tree, and at the stand-in name when the contract comes on stdin."""
    in_tree = check_sarif(scenario.gate("stale", "sarif").stdout.decode())
    assert _locations(in_tree) == [("STALE_GENERATION", "search-1.json", "contract")]
    piped = check_sarif(scenario.gate("stale", "sarif", stdin=True).stdout.decode())
    assert _locations(piped) == [("STALE_GENERATION", CONTRACT_STANDIN, "standin")]


def test_sarif_places_resource_and_outside_contract_results(scenario: Scenario) -> None:
    """A resource-only result sits at the path that touched the resource (with the resource
    as a logical location beside it); a contract outside the work tree is not used."""
    paths = json.loads(render(scenario.verdict("paths"), "sarif"))
    located = _locations(paths)
    assert ("RESOURCE_NOT_OWNED", "pnpm-lock.yaml", "resource") in located
    assert ("UNSAFE_PATH", BAD_URI, "path") in located
    (resource,) = [r for r in paths["runs"][0]["results"] if r["ruleId"] == "RESOURCE_NOT_OWNED"]
    assert resource["locations"][0]["logicalLocations"] == [
        {"name": "lockfile:pnpm-lock.yaml", "kind": "resource"}
    ]
    assert scenario.contract_path("digest") is None
    digest = render(scenario.verdict("digest"), "sarif", contract_path=None)
    assert _locations(json.loads(digest)) == [
        ("CONTRACT_DIGEST_MISMATCH", CONTRACT_STANDIN, "standin")
    ]


def test_sarif_uri_percent_encodes_the_raw_bytes(scenario: Scenario) -> None:
    """The uri of the 0xff file decodes to exactly the bytes git stores."""
    doc = json.loads(render(scenario.verdict("paths"), "sarif"))
    uris = [u for _, u, _ in _locations(doc)]
    assert os.fsencode(BAD_NAME) in [unquote_to_bytes(u) for u in uris]


def test_sarif_line_hashes_count_repeats() -> None:
    """Two results with the same fingerprint get `:1` and `:2`, so neither hides the other."""
    twice = Violation(code=Code.UNSAFE_PATH, path="a", detail="one")
    verdict = Verdict(decision=Decision.FENCED, violations=[twice, twice])
    results = json.loads(render(verdict, "sarif"))["runs"][0]["results"]
    hashes = [r["partialFingerprints"][LINE_HASH_KEY] for r in results]
    assert hashes[0].split(":")[0] == hashes[1].split(":")[0]
    assert [h.split(":")[1] for h in hashes] == ["1", "2"]


def test_junit_reads_back_with_every_violation(scenario: Scenario, tmp_path: Path) -> None:
    """junitparser reads one failing case per enforced violation with its type, message and
    the exact path, and the suite's counts and properties."""
    verdict = scenario.verdict("paths")
    when = datetime(2026, 6, 1, 12, 0, 5, 123456, tzinfo=UTC)
    report = check_junit(render_junit(verdict, clock=lambda: when, hostname="ci-7"), tmp_path)
    (suite,) = list(report)
    assert (suite.name, suite.tests, suite.failures, suite.errors, suite.skipped) == (
        "integrator.gate",
        len(verdict.violations),
        len(verdict.violations),
        0,
        0,
    )
    assert suite.timestamp == "2026-06-01T12:00:05"
    assert suite.hostname == "ci-7"
    # junitparser leaves properties() unannotated.
    props = {p.name: p.value for p in suite.properties()}  # type: ignore[no-untyped-call]
    assert props["decision"] == "FENCED"
    assert props["candidate"] == verdict.candidate
    cases = list(suite)
    for case, violation in zip(cases, verdict.violations, strict=True):
        (result,) = case.result
        assert isinstance(result, Failure)
        assert result.type == "FENCED"
        assert result.message == (
            f"{violation.detail} (resource {violation.resource})"
            if violation.resource
            else violation.detail
        )
        if violation.path is not None:
            assert f"path: {violation.path}" in (result.text or "")


def test_junit_observed_violation_is_one_skipped_case(tmp_path: Path) -> None:
    """An observed violation is a skipped case and the suite says how many were skipped."""
    verdict = Verdict(
        decision=Decision.ACCEPTED,
        violations=[Violation(code=Code.MERGE_CONFLICT, path="m", detail="c", mode="observe")],
    )
    report = check_junit(render(verdict, "junit"), tmp_path)
    (suite,) = list(report)
    assert suite.skipped == 1
    assert [type(r) for case in suite for r in case.result] == [Skipped]
    assert [case.name for case in suite] == ["MERGE_CONFLICT m", "ACCEPTED"]


def test_codequality_places_pathless_issues_like_sarif(scenario: Scenario) -> None:
    """Code Quality puts a resource-only issue at the path that touched the resource and a
    claim-level one at the contract file."""
    paths = check_codequality(render(scenario.verdict("paths"), "codequality"))
    by_check = {(i["check_name"], i["location"]["path"]) for i in paths}
    assert ("RESOURCE_NOT_OWNED", "pnpm-lock.yaml") in by_check
    stale = render(scenario.verdict("stale"), "codequality", contract_path="search-1.json")
    assert [i["location"]["path"] for i in check_codequality(stale)] == ["search-1.json"]


def test_contract_path_is_used_only_inside_the_work_tree(tmp_path: Path) -> None:
    """A contract inside the work tree is given relative; stdin, a bare repository, a file
    outside or under .git is not."""
    tree = tmp_path / "tree"
    (tree / ".git").mkdir(parents=True)
    (tree / "c").mkdir()
    assert contract_in_worktree(str(tree / "c" / "x.json"), str(tree)) == "c/x.json"
    assert contract_in_worktree("-", str(tree)) is None
    assert contract_in_worktree(str(tree / "c" / "x.json"), None) is None
    assert contract_in_worktree(str(tmp_path / "x.json"), str(tree)) is None
    assert contract_in_worktree(str(tree / ".git" / "x.json"), str(tree)) is None


def test_unexpected_error_goes_to_stderr_not_into_the_document(
    tmp_path: Path,
) -> None:
    """When the gate hits an unexpected error (a corrupt object), the traceback goes to
    stderr, stdout stays empty, and the exit code is 4."""
    s = build_scenario(tmp_path)
    tree = subprocess.run(
        ["git", "rev-parse", f"{s.candidates['billing-ok']}^{{tree}}"],
        cwd=s.repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    loose = s.repo / ".git" / "objects" / tree[:2] / tree[2:]
    loose.chmod(0o644)
    loose.write_bytes(b"not a zlib stream")
    run = s.gate("accepted", "sarif")
    assert run.returncode == 4
    assert run.stdout == b""
    assert b"Traceback" in run.stderr
    assert b"integrator: unexpected error" in run.stderr
