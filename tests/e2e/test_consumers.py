"""The real consumers of integrator's machine formats: the SARIF Multitool with every GitHub
code scanning rule on SARIF from the real gate, promtool on a running daemon's /metrics,
systemd-analyze on the unit file in contrib/.

tests/e2e/install-formats.sh fetches the pinned tools into .e2e/formats/ (make e2e runs
it first). A tool that is not there fails its test with the reason the installer recorded,
never skips: a CI run that cannot reach a consumer must not pass as if it had.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import integrator
from integrator.report.formats import render
from tests.gitutil import commit_files, declare_bare, make_repo
from tests.report.test_formats import CASES, Scenario, build_scenario, check_sarif, constructed

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / ".e2e" / "formats"
MULTITOOL = (
    TOOLS / "npm" / "node_modules" / "@microsoft" / "sarif-multitool-linux" / "Sarif.Multitool"
)
GITHUB_RULES = TOOLS / "github-rules.xml"
PROMTOOL = TOOLS / "prometheus" / "usr" / "bin" / "promtool"
UNIT = ROOT / "contrib" / "integrator.service"
UNIT_BINARY = "/opt/integrator/.venv/bin/integrator"

# The one finding accepted: the driver names no informationUri (integrator has no public
# home page to name; SARIF2005 is a warning, GitHub does not read it).
ACCEPTED_WARNINGS = {"SARIF2005"}


def tool(name: str, path: Path | None) -> Path:
    """`path` when it is an executable, else fail saying why (as the installer recorded)."""
    if path is not None and path.is_file() and os.access(path, os.X_OK):
        return path
    recorded = TOOLS / f"{name}.missing"
    reason = (
        recorded.read_text(encoding="utf-8").strip()
        if recorded.is_file()
        else f"{path} is missing; tests/e2e/install-formats.sh installs it (make e2e runs it)"
    )
    pytest.fail(f"{name} is not available on this machine: {reason}", pytrace=False)


def levels(log: dict[str, Any]) -> list[tuple[str, str, str, list[str]]]:
    """(level, rule, file, arguments) for each finding of a Multitool log; a result without
    `level` has its rule's default level, else warning."""
    found = []
    for run in log["runs"]:
        rules = run["tool"]["driver"].get("rules", [])
        for result in run.get("results", []):
            level = result.get("level")
            if level is None and "ruleIndex" in result:
                level = rules[result["ruleIndex"]].get("defaultConfiguration", {}).get("level")
            where = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            arguments = result.get("message", {}).get("arguments", [])
            found.append((level or "warning", result["ruleId"], where, arguments))
    return found


def multitool(files: list[Path], out: Path) -> list[tuple[str, str, str, list[str]]]:
    """Validate `files` with every GitHub rule on; the findings (its exit code is 0 even
    when it reports errors, so the log is what counts)."""
    binary = tool("sarif-multitool", MULTITOOL)
    if not GITHUB_RULES.is_file():
        tool("sarif-multitool", None)
    # The native binary, not the npm wrapper: that one hands the arguments to /bin/sh.
    proc = subprocess.run(
        [str(binary), "validate", *map(str, files), "--config", str(GITHUB_RULES),
         "-o", str(out), "--log", "ForceOverwrite"],
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ERR999" not in proc.stdout, proc.stdout
    return levels(json.loads(out.read_text(encoding="utf-8")))


def sarif_documents(scenario: Scenario, folder: Path) -> list[Path]:
    """SARIF from `python -m integrator gate` for every case (the stale one also with the
    contract on stdin) and from the constructed verdicts."""
    files = []
    for case in CASES:
        for stdin in (False, True) if case == "stale" else (False,):
            run = scenario.gate(case, "sarif", stdin=stdin)
            assert run.returncode in (0, 1, 3), run.stderr.decode("utf-8", "replace")
            text = run.stdout.decode("utf-8")
            check_sarif(text)
            files.append(folder / f"{case}{'-stdin' if stdin else ''}.sarif")
            files[-1].write_text(text, encoding="utf-8")
    for name, verdict in constructed():
        files.append(folder / f"{name}.sarif")
        files[-1].write_text(render(verdict, "sarif"), encoding="utf-8")
    return files


def test_multitool_finds_no_error_in_integrator_sarif(tmp_path: Path) -> None:
    """The SARIF Multitool with all GitHub ingestion rules finds no error (and no warning
    but SARIF2005) in the SARIF of resource-only, claim-level, non-UTF-8 and accepted
    verdicts."""
    scenario = build_scenario(tmp_path / "scenario")
    files = sarif_documents(scenario, tmp_path)
    findings = multitool(files, tmp_path / "validation.sarif")
    errors = [f for f in findings if f[0] == "error"]
    assert errors == [], errors
    others = sorted({rule for level, rule, _, _ in findings if rule not in ACCEPTED_WARNINGS})
    assert others == [], findings


def test_multitool_config_enables_the_github_rules(tmp_path: Path) -> None:
    """A result without a location and a rule without fullDescription or help are reported
    as errors: the exported config really has the GitHub rules on."""
    bad = tmp_path / "noloc.sarif"
    bad.write_text(
        json.dumps(
            {
                "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
                "version": "2.1.0",
                "runs": [
                    {
                        "tool": {
                            "driver": {
                                "name": "x",
                                "rules": [{"id": "X1", "shortDescription": {"text": "x."}}],
                            }
                        },
                        "results": [{"ruleId": "X1", "message": {"text": "m."}}],
                    }
                ],
            }
        ),
        encoding="utf-8",
    )
    findings = multitool([bad], tmp_path / "noloc.val.sarif")
    rules = {rule for level, rule, _, _ in findings if level == "error"}
    assert {"GH1001", "GH2012"} <= rules, findings


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """`integrator serve --http 127.0.0.1:0` on a real spool holding an accepted and a
    fenced submission; stopped by its PID."""
    repo = declare_bare(make_repo(tmp_path / "repo"))
    commit_files(repo, {"src/a.py": "a = 1\n"}, "root")
    integrator.init(repo, target="main")
    contracts = []
    for task, folder in (("ok", "src"), ("bad", "docs")):
        contract = integrator.issue(repo, integrator.IssueRequest(task, (f"{folder}/**",)))
        contracts.append(tmp_path / f"{task}.json")
        contracts[-1].write_text(contract.to_json(), encoding="utf-8")
    ok = commit_files(repo, {"src/a.py": "a = 2\n"}, ref=None)
    bad = commit_files(repo, {"src/b.py": "b = 1\n"}, ref=None)
    spool = tmp_path / "spool"
    for path, candidate in zip(contracts, (ok, bad), strict=True):
        subprocess.run(
            [sys.executable, "-m", "integrator", "submit", "--create", "--spool", str(spool),
             "--contract", str(path), "--candidate", candidate, "--repo", str(repo)],
            check=True, capture_output=True,
        )  # fmt: skip
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "integrator", "serve", "--repo", str(repo),
             "--spool", str(spool), "--http", "127.0.0.1:0", "--poll", "0.2",
             "--log-format", "json"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        yield proc, log
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()


def _events(log: Path, name: str) -> list[dict[str, Any]]:
    out = []
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("event") == name:
            out.append(event)
    return out


def test_promtool_accepts_the_daemons_metrics(
    daemon: tuple[subprocess.Popen[bytes], Path],
) -> None:
    """`promtool check metrics` finds nothing to lint in a real /metrics scrape taken after
    the daemon decided an accepted and a fenced submission."""
    promtool = tool("promtool", PROMTOOL)
    proc, log = daemon
    deadline = time.monotonic() + 60
    while len(_events(log, "decision")) < 2 or not _events(log, "http.listening"):
        assert proc.poll() is None, log.read_text(encoding="utf-8", errors="replace")
        assert time.monotonic() < deadline, log.read_text(encoding="utf-8", errors="replace")
        time.sleep(0.05)
    port = _events(log, "http.listening")[0]["port"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        scrape = response.read()
    text = scrape.decode("utf-8")
    assert 'integrator_decisions_total{code="",decision="ACCEPTED"} 1.0' in text
    assert 'integrator_decisions_total{code="PATH_NOT_OWNED",decision="FENCED"} 1.0' in text
    check = subprocess.run(
        [str(promtool), "check", "metrics"], input=scrape, capture_output=True, check=False
    )
    assert (check.returncode, check.stderr.decode()) == (0, "")


def test_systemd_analyze_verifies_the_unit(tmp_path: Path) -> None:
    """`systemd-analyze verify` accepts contrib/integrator.service with no warning.

    verify insists that ExecStart's binary exists on the verifying machine, so the copy
    verified names this checkout's own `integrator` console script instead of the unit's
    /opt/integrator/.venv/bin/integrator; every other byte is the unit's.
    """
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        tool("systemd-analyze", None)
    assert analyze is not None
    binary = Path(sys.executable).parent / "integrator"
    assert binary.is_file() and os.access(binary, os.X_OK), binary
    text = UNIT.read_text(encoding="utf-8")
    assert text.count(UNIT_BINARY) == 1
    copy = tmp_path / "integrator.service"
    copy.write_text(text.replace(UNIT_BINARY, str(binary)), encoding="utf-8")
    proc = subprocess.run(
        [analyze, "verify", str(copy)], capture_output=True, text=True, check=False, timeout=120
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
