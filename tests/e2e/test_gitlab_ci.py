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
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e import ci_tools
from tests.gitutil import GIT_ENV, git, make_repo
from tests.gitutil import run_integrator as integrator
from tests.promotion_world import PromotionWorld, make_world

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


def pipeline(
    checkout: Path, variables: dict[str, str], *options: str
) -> subprocess.CompletedProcess[str]:
    """Run the pipeline of `checkout` with `variables`; this environment's integrator first
    on PATH (the image's integrator: the template installs one only when there is none)."""
    args = [str(tool()), *options, "--ignore-predefined-vars", ",".join(variables)]
    for name, value in variables.items():
        args += ["--variable", f"{name}={value}"]
    env = {
        **os.environ,
        **GIT_ENV,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
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
    return [
        case.get("name", "") for case in junit.iter("testcase") if case.find("failure") is not None
    ]


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


LANDINGS, CULPRIT = 4, "t2"
ROUNDS = 12  # request, one pipeline per head, promote: the bisection needs several


@pytest.fixture
def world(tmp_path: Path) -> Iterator[PromotionWorld]:
    tool()
    made = make_world(tmp_path, None)
    yield made
    for proc in made.procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_validation_pipelines_report_back_and_the_culprit_is_ejected(world: PromotionWorld) -> None:
    """One validation pipeline per head integrator asks for (as a trigger would start it):
    the suite job checks the queue head out and runs the suite, the report job of the next
    stage records pass or fail; `integrator promote` bisects and ejects the culprit."""
    world.set_policy('mode = "external"\ntimeout = 600\nmax_batch = 4')
    for i in range(LANDINGS):
        world.submit(f"t{i}", broken=f"t{i}" == CULPRIT)
    assert world.serve_once("--no-promote").proc.returncode == 0
    checkout = world.tmp / "project"
    git("clone", "-q", str(world.repo), str(checkout), cwd=world.tmp)
    shutil.copy(TEMPLATE, checkout / ".gitlab-ci.yml")  # untracked: the heads do not carry it
    suite = f"sh ci/check.sh {world.log} {world.lenient}"
    others = sorted(h for t, h in world.heads.items() if t != CULPRIT)
    results: dict[str, str] = {}
    for _ in range(ROUNDS):
        asked = integrator("validation", "request", "--repo", str(world.repo), "--json")
        assert asked.returncode == 0, asked.stderr
        for request in json.loads(asked.stdout):
            head, tree = request["head"], request["tree"]
            done = pipeline(checkout, {
                "INTEGRATOR_VALIDATION_HEAD": head, "INTEGRATOR_VALIDATION_TREE": tree,
                "INTEGRATOR_SUITE": suite, "INTEGRATOR_REPO": str(world.repo),
            }, "--shell-isolation")  # fmt: skip
            output = done.stdout + done.stderr
            assert "integrator-gate" not in output  # not a merge-request pipeline
            passed = "PASS  integrator-suite" in output
            assert passed == (done.returncode == 0), output
            reporter = "integrator-report-pass" if passed else "integrator-report-fail"
            assert f"PASS  {reporter}" in output, output
            results[head] = "pass" if passed else "fail"
        assert world.promote_once().proc.returncode == 0
        if sorted(world.chain("refs/heads/main")) == others:
            break
    assert sorted(world.chain("refs/heads/main")) == others, results
    ejected = git("for-each-ref", "--format=%(refname)", "refs/integrator/ejected/", cwd=world.repo)
    (record,) = ejected.splitlines()
    ejection = json.loads(git("show", f"{record}:ejection.json", cwd=world.repo))
    assert ejection["ejected"]["taskId"] == CULPRIT
    assert "fail" in results.values() and "pass" in results.values()
    world.check_target_moves()  # every value main took is a tree the suite passed
