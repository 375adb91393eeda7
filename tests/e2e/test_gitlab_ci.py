"""contrib/gitlab-ci.yml run for real by gitlab-ci-local (npm, pinned by
tests/e2e/install-ci-tools.sh; its shell executor runs each job in the checkout, and it
validates the file against GitLab's CI schema first). A generated project: a canonical
repository with a live claim for task `billing` (src/**), and a GitLab checkout of it on
branch task/billing. As a merge-request pipeline, the gate job fails on a candidate that
writes outside the contract and passes on one inside, and leaves its Code Quality and JUnit
reports either way. Then the validation pipeline: a queue head integrator asks for is
checked out, its suite run, and the result reported back (pass, then fail for a culprit)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.e2e import ci_tools
from tests.gitutil import GIT_ENV, git, make_repo
from tests.gitutil import run_integrator as integrator

pytestmark = pytest.mark.e2e

TEMPLATE = ci_tools.ROOT / "contrib" / "gitlab-ci.yml"
TASK = "billing"


def tool() -> Path:
    reason = ci_tools.missing("gitlab-ci-local", ci_tools.GITLAB_CI_LOCAL)
    if reason is None and shutil.which("rsync") is None:
        reason = "rsync is not installed (gitlab-ci-local needs it; .ci/debian-packages lists it)"
    if reason:
        pytest.skip(reason)
    return ci_tools.GITLAB_CI_LOCAL


def pipeline(checkout: Path, variables: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run the pipeline of `checkout` with `variables`; this environment's integrator first
    on PATH (the image's integrator: the template installs one only when there is none)."""
    args = [str(tool()), "--ignore-predefined-vars", ",".join(variables)]
    for name, value in variables.items():
        args += ["--variable", f"{name}={value}"]
    env = {**os.environ, **GIT_ENV, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        args, cwd=checkout, env=env, capture_output=True, text=True, check=False, timeout=600
    )


def project(tmp: Path) -> Path:
    """The canonical repository (initialized, the claim of TASK for src/**) and a GitLab
    checkout of it with contrib/gitlab-ci.yml as its .gitlab-ci.yml, on task/billing."""
    seed = make_repo(tmp / "seed")
    (seed / "src").mkdir()
    (seed / "src" / "billing.py").write_text("total = 0\n")
    (seed / "docs").mkdir()
    (seed / "docs" / "index.md").write_text("# Product\n")
    shutil.copy(TEMPLATE, seed / ".gitlab-ci.yml")
    git("add", "-A", cwd=seed)
    git("commit", "-qm", "init", cwd=seed)
    canonical = tmp / "canonical.git"
    git("clone", "-q", "--bare", str(seed), str(canonical), cwd=tmp)
    done = integrator("init", "--repo", str(canonical))
    assert done.returncode == 0, done.stderr
    done = integrator(
        "contract", "issue", "--repo", str(canonical), "--task", TASK, "--path", "src/**",
        "--holder", "agent-7", "--lease", "45m", "-o", str(tmp / "billing.json"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    checkout = tmp / "project"
    git("clone", "-q", str(canonical), str(checkout), cwd=tmp)
    git("checkout", "-q", "-b", f"task/{TASK}", cwd=checkout)
    return checkout


def candidate(checkout: Path, files: dict[str, str], message: str) -> str:
    git("reset", "-q", "--hard", "origin/main", cwd=checkout)
    for name, text in files.items():
        (checkout / name).write_text(text)
    git("add", "-A", "--", *files, cwd=checkout)
    git("commit", "-qm", message, cwd=checkout)
    return git("rev-parse", "HEAD", cwd=checkout)


MERGE_REQUEST = {
    "CI_PIPELINE_SOURCE": "merge_request_event",
    "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME": f"task/{TASK}",
}


def reports(checkout: Path) -> tuple[list[dict[str, object]], ET.Element]:
    quality = json.loads((checkout / "gl-code-quality-report.json").read_text())
    junit = ET.parse(checkout / "integrator-junit.xml").getroot()
    return quality, junit


def failures(junit: ET.Element) -> list[str]:
    return [case.get("name", "") for case in junit.iter("testcase") if case.find("failure") is not None]


def test_gate_job_fails_a_fenced_candidate_and_passes_an_accepted_one(tmp_path: Path) -> None:
    tool()
    checkout = project(tmp_path)

    candidate(checkout, {"src/billing.py": "total = 1\n", "docs/index.md": "# Sneaked\n"}, "fenced")
    fenced = pipeline(checkout, MERGE_REQUEST)
    output = fenced.stdout + fenced.stderr
    assert fenced.returncode != 0, output
    assert "FAIL  integrator-gate" in output and "FENCED" in output, output
    assert "integrator-suite" not in output  # no validation in a merge-request pipeline
    quality, junit = reports(checkout)
    assert [(q["check_name"], q["location"]["path"]) for q in quality] == [  # type: ignore[index]
        ("PATH_NOT_OWNED", "docs/index.md")
    ]
    assert quality[0]["severity"] in {"major", "critical", "blocker"}
    assert any("docs/index.md" in name for name in failures(junit)), ET.tostring(junit)

    for report in ("gl-code-quality-report.json", "integrator-junit.xml"):
        (checkout / report).unlink()
    candidate(checkout, {"src/billing.py": "total = 2\n"}, "accepted")
    accepted = pipeline(checkout, MERGE_REQUEST)
    output = accepted.stdout + accepted.stderr
    assert accepted.returncode == 0, output
    assert "PASS  integrator-gate" in output and "ACCEPTED" in output, output
    quality, junit = reports(checkout)
    assert quality == [] and failures(junit) == [], ET.tostring(junit)


def test_gate_job_refuses_a_branch_that_names_no_task(tmp_path: Path) -> None:
    tool()
    checkout = project(tmp_path)
    candidate(checkout, {"src/billing.py": "total = 1\n"}, "change")
    done = pipeline(checkout, {**MERGE_REQUEST, "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME": "task/a;b"})
    assert done.returncode != 0 and "not task/<task id>" in done.stdout + done.stderr
