"""Every Python snippet of the README and docs/ runs, as written, in the setting it names.

A snippet is a ```python block preceded by `<!-- snippet: SETTING -->`; the settings are
built here with real repositories. A block without a setting fails this test, so no
snippet can go unexecuted.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from integrator.records.prepare import prepare
from tests.factories import task_file
from tests.gitutil import commit_files, git, make_repo

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_BLOCK = re.compile(
    r"(?:<!-- snippet: (?P<setting>[\w-]+) -->\n)?```python\n(?P<code>.*?)```", re.S
)


def _canonical_repository(folder: Path) -> None:
    """A prepared repository (the main checkout, kept in step with main) with a branch
    `agent` changing billing/."""
    make_repo(folder)
    base = commit_files(folder, {"billing/a.py": "a = 1\n", "docs/i.md": "# i\n"}, "base")
    git("reset", "-q", "--hard", cwd=folder)
    prepare(folder, target="main", update_checkout=True)
    commit_files(
        folder, {"billing/a.py": "a = 2\n"}, "billing", parent=base, ref="refs/heads/agent"
    )


def _fleet_repository(folder: Path) -> None:
    """A prepared main checkout with three task files in tasks/ (two overlap)."""
    _canonical_repository(folder)
    tasks = folder / "tasks"
    tasks.mkdir()
    (tasks / "A.md").write_text(task_file("A", ["billing/**"]))
    (tasks / "B.md").write_text(task_file("B", ["billing/x/**"]))
    (tasks / "C.md").write_text(task_file("C"))


SETTINGS: dict[str, Callable[[Path], None]] = {
    "canonical-repository": _canonical_repository,
    "fleet-repository": _fleet_repository,
}


def _snippets() -> list[tuple[str, str | None, str]]:
    found = []
    for document in DOCUMENTS:
        text = document.read_text("utf-8")
        for n, match in enumerate(_BLOCK.finditer(text), 1):
            found.append((f"{document.name}#{n}", match.group("setting"), match.group("code")))
    return found


@pytest.mark.parametrize(("where", "setting", "code"), _snippets(), ids=lambda v: str(v)[:40])
def test_snippet_runs(where: str, setting: str | None, code: str, tmp_path: Path) -> None:
    """The snippet exits 0 in a fresh interpreter, in the setting its marker names."""
    assert setting in SETTINGS, f"{where}: mark the block with <!-- snippet: SETTING -->"
    folder = tmp_path / "work"
    SETTINGS[setting](folder)
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=folder, capture_output=True, check=False, timeout=120
    )
    assert proc.returncode == 0, f"{where} failed:\n{proc.stderr.decode()}"


def test_there_are_snippets_to_run() -> None:
    """The README and the fleet guide each carry at least one executed snippet."""
    names = {where.split("#")[0] for where, _, _ in _snippets()}
    assert {"README.md", "fleet.md"} <= names
