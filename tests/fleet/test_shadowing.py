"""integrator runs in folders others wrote — the guard in an agent's worktree, the gate in a
candidate's checkout — and `python -m` puts the current folder first on Python's path. A
file there named like a module must never run as ours."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from integrator.fleet import doctor, hooks
from tests.fleet.test_guard import claude, make_bound
from tests.gitutil import GIT_ENV

# Modules integrator imports after `python -m` has put the current folder on the path.
MODULES = ("json", "typing", "subprocess", "pathlib", "argparse", "dataclasses", "shlex",
           "tempfile", "hashlib", "datetime", "enum", "functools", "contextlib", "signal",
           "struct", "secrets", "unicodedata", "__future__", "pathspec", "pydantic", "pygit2")  # fmt: skip


def _plant(folder: Path, marker: Path, names: tuple[str, ...]) -> None:
    """A module file per name that leaves a trace in `marker` when it is imported."""
    for name in names:
        (folder / f"{name}.py").write_text(
            f"open({str(marker / name)!r}, 'w').close()\nraise SystemExit('shadowed {name}')\n"
        )


@pytest.fixture
def bound(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)
    return make_bound(tmp_path)


def test_python_m_integrator_never_imports_the_worktrees_modules(
    bound: Path, tmp_path: Path
) -> None:
    """`python -m integrator guard` run in a worktree full of module-named files (no -P)
    imports none of them and decides as usual; the same files do shadow a plain script, so
    the trap is real."""
    marker = tmp_path / "hits"
    marker.mkdir()
    _plant(bound, marker, MODULES)
    inside = claude("Write", {"file_path": str(bound / "src/new.py"), "content": "x"}, bound)
    outside = claude("Write", {"file_path": str(bound / "docs/new.md"), "content": "x"}, bound)
    env = {**os.environ, **GIT_ENV}
    for event, denied in ((inside, False), (outside, True)):
        proc = subprocess.run([sys.executable, "-m", "integrator", "guard"], input=event,
                              cwd=bound, capture_output=True, env=env, check=False)  # fmt: skip
        assert proc.returncode == 0, proc.stderr.decode()
        assert (b'"deny"' in proc.stdout) is denied
    assert sorted(p.name for p in marker.iterdir()) == []
    witness = subprocess.run([sys.executable, "-c", "import json"], cwd=bound, env=env,
                             capture_output=True, check=False)  # fmt: skip
    assert witness.returncode == 1 and (marker / "json").exists()  # `-c` puts "" first


def test_the_installed_hook_ignores_a_worktree_package_named_integrator(
    bound: Path, tmp_path: Path
) -> None:
    """A worktree holding its own `integrator/` package cannot replace the guard: the hook
    command the installer writes runs Python with -P. Without -P that package would run."""
    marker = tmp_path / "hits"
    marker.mkdir()
    fake = bound / "integrator"
    fake.mkdir()
    (fake / "__init__.py").write_text(f"open({str(marker / 'fake')!r}, 'w').close()\n")
    (fake / "__main__.py").write_text("raise SystemExit(0)  # 'allow' everything\n")
    outside = claude("Write", {"file_path": str(bound / "docs/new.md"), "content": "x"}, bound)
    env = {**os.environ, **GIT_ENV}
    command = hooks.hook_command(sys.executable)
    assert hooks.hook_python(command) == sys.executable and hooks.hook_safe_path(command)
    proc = subprocess.run(["/bin/sh", "-c", command], input=outside, cwd=bound, env=env,
                          capture_output=True, check=False)  # fmt: skip
    assert (
        proc.returncode == 0
        and json.loads(proc.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"
    )
    assert not (marker / "fake").exists()
    unsafe = command.replace(" -P ", " ", 1)
    subprocess.run(["/bin/sh", "-c", unsafe], input=outside, cwd=bound, env=env,
                   capture_output=True, check=False)  # fmt: skip
    assert (marker / "fake").exists()  # the trap -P closes


def test_doctor_flags_a_hook_without_the_safe_path(bound: Path) -> None:
    """A guard hook written before -P (or edited to drop it) fails doctor's "safe path"
    check; a freshly installed one passes it, for every agent and the Codex shell form."""
    hooks.install(bound)
    env = {"HOME": str(bound.parent / "home"), "PATH": os.environ["PATH"]}
    report = doctor.check_claude(bound, env, sys.executable)
    assert {c.name: c.ok for c in report.checks}["safe path"] is True
    settings = hooks.location("claude", bound).settings
    settings.write_text(settings.read_text().replace(" -P -m integrator", " -m integrator"))
    report = doctor.check_claude(bound, env, sys.executable)
    assert {c.name: c.ok for c in report.checks}["safe path"] is False
    codex = hooks.hook_command(sys.executable, agent="codex")
    assert hooks.hook_safe_path(codex) and hooks.hook_python(codex) == sys.executable
    assert not hooks.hook_safe_path(codex.replace(" -P ", " "))
