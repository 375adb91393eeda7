"""Which branch the server hook protects: the repository's integrator settings, never the
HEAD a git server gave a new repository (gitolite's is `master`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.gitutil import commit_files, git, make_repo
from tests.gitutil import run_integrator as integrator


def _server(tmp_path: Path) -> tuple[Path, Path]:
    """A bare repository whose HEAD names `master`, as gitolite makes them, with `main`."""
    server = make_repo(tmp_path / "srv.git", bare=True)
    git("symbolic-ref", "HEAD", "refs/heads/master", cwd=server)
    work = make_repo(tmp_path / "work")
    commit_files(work, {"a.txt": "1\n"}, "one")
    git("push", "-q", str(server), "HEAD:refs/heads/main", cwd=work)
    commit_files(work, {"a.txt": "2\n"}, "two")
    return server, work


def _push(work: Path, server: Path, refspec: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "push", "--porcelain", f"file://{server}", refspec],
        cwd=work, capture_output=True, text=True, check=False,
    )  # fmt: skip


def test_install_refuses_to_guess_the_target_from_head(tmp_path: Path) -> None:
    """No integrator.target, no queue: install names what to give and writes nothing."""
    server, work = _server(tmp_path)
    proc = integrator("server-hook", "install", "--repo", str(server), "--allow", "i", cwd=work)
    assert proc.returncode == 2, proc
    assert "give --target BRANCH" in proc.stderr and "HEAD (master)" in proc.stderr
    assert not (server / "hooks" / "pre-receive").exists()
    assert "integrator.target" not in git("config", "--list", "--local", cwd=server)


def test_install_learns_the_target_from_the_queue(tmp_path: Path) -> None:
    """A repository `integrator init` prepared has refs/integrator/queue/<target>: install
    records that branch, and an anonymous push to it is refused."""
    server, work = _server(tmp_path)
    git("update-ref", "refs/integrator/queue/main", "refs/heads/main", cwd=server)
    proc = integrator("server-hook", "install", "--repo", str(server), "--allow", "i", cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert git("config", "--get-all", "integrator.target", cwd=server) == "main"
    refused = _push(work, server, "HEAD:refs/heads/main")
    assert refused.returncode == 1 and "only integrators may update the target" in refused.stderr


def test_a_queue_protects_its_branch_whatever_the_config_says(tmp_path: Path) -> None:
    """A hook installed with --target master before `init` chose main still guards main
    once the queue for main exists."""
    server, work = _server(tmp_path)
    args = ("server-hook", "install", "--repo", str(server), "--allow", "i", "--target", "master")
    assert integrator(*args, cwd=work).returncode == 0
    assert _push(work, server, "HEAD:refs/heads/feature").returncode == 0
    git("update-ref", "refs/integrator/queue/main", "refs/heads/main", cwd=server)
    refused = _push(work, server, "HEAD:refs/heads/main")
    assert refused.returncode == 1 and "only integrators may update the target" in refused.stderr
    assert _push(work, server, "HEAD:refs/heads/master").returncode == 1
