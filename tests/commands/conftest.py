"""A served spool for the commands' tests: real processes all the way."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gitutil import git, run_integrator


@pytest.fixture
def served(tmp_path: Path) -> dict[str, Path]:
    """A canonical bare repository with two claims; t1's candidate accepted, t2's fenced
    (it writes outside its contract), both through a spool and `serve --once`."""
    src = tmp_path / "src"
    git("init", "-q", "-b", "main", str(src), cwd=tmp_path)
    git("commit", "-q", "--allow-empty", "-m", "base", cwd=src)
    canon = tmp_path / "canon.git"
    git("clone", "-q", "--bare", str(src), str(canon), cwd=tmp_path)
    assert run_integrator("init", "--repo", str(canon)).returncode == 0
    agent = tmp_path / "agent"
    git("clone", "-q", str(canon), str(agent), cwd=tmp_path)
    base = git("rev-parse", "HEAD", cwd=agent).strip()
    for task, path, holder in (("t1", "src/**", "alice"), ("t2", "doc/**", "bob")):
        done = run_integrator(
            "contract", "issue", "--repo", str(canon), "--task", task, "--path", path,
            "--holder", holder, "--base", base, "-o", str(tmp_path / f"{task}.json"),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    spool = tmp_path / "spool"
    for task, name in (("t1", "src/a"), ("t2", "src/b")):
        (agent / name).parent.mkdir(exist_ok=True)
        (agent / name).write_text(task)
        git("add", name, cwd=agent)
        git("commit", "-q", "-m", task, cwd=agent)
        sub = run_integrator(
            "submit", "--spool", str(spool), "--create", "--contract",
            str(tmp_path / f"{task}.json"), "--candidate", "HEAD", "--repo", str(agent),
            "--bundle",
        )  # fmt: skip
        assert sub.returncode == 0, sub.stderr
        git("reset", "-q", "--hard", base, cwd=agent)
        serve = run_integrator("serve", "--repo", str(canon), "--spool", str(spool), "--once")
        assert serve.returncode == 0, serve.stderr
    return {"canon": canon, "spool": spool, "agent": agent, "root": tmp_path}
