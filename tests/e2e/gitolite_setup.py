"""The documented gitolite setup (docs/remote.md) on a running `gitolite_server.Gitolite`,
and git and integrator run with one person's key."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.e2e.gitolite_server import Gitolite, doc_block
from tests.gitutil import GIT_ENV, git
from tests.gitutil import run_integrator as integrator


def as_key(server: Gitolite, who: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`git args` with `who`'s ssh key (no check)."""
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=False,
        env={**os.environ, **GIT_ENV, **server.env(who), "GIT_TERMINAL_PROMPT": "0"},
    )  # fmt: skip


def cli(server: Gitolite, who: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return integrator(*args, cwd=cwd, env=server.env(who))


def on_server(server: Gitolite, repo: str, *args: str) -> str:
    """git in the server's repository (named by --git-dir: it belongs to another account)."""
    path = server.home / "repositories" / f"{repo}.git"
    return git("--git-dir", str(path), *args, cwd=path)


def server_refs(server: Gitolite, repo: str, prefix: str = "refs/") -> dict[str, str]:
    out = on_server(server, repo, "for-each-ref", "--format=%(refname) %(objectname)", prefix)
    return dict(line.split(" ", 1) for line in out.splitlines() if line)


def configure(server: Gitolite, work: Path, people: list[str]) -> None:
    """Push the documented gitolite.conf and every key through gitolite-admin, then run the
    documented hook installs on the server as the gitolite account."""
    admin = work / "gitolite-admin"
    done = as_key(server, "admin", "clone", "-q", server.url("gitolite-admin"), str(admin),
                  cwd=work)  # fmt: skip
    assert done.returncode == 0, done.stderr
    (admin / "conf" / "gitolite.conf").write_text(
        doc_block("remote.md", "gitolite.conf (tests/e2e/test_gitolite.py pushes exactly this)")
    )
    for who in people:
        (admin / "keydir" / f"{who}.pub").write_text(
            server.keys[who].with_suffix(".pub").read_text()
        )
    git("add", "-A", cwd=admin)
    git("commit", "-qm", "integrator's repositories and keys", cwd=admin)
    pushed = as_key(server, "admin", "push", "-q", "origin", "HEAD", cwd=admin)
    assert pushed.returncode == 0, pushed.stderr
    head = (server.home / "repositories" / "product.git" / "HEAD").read_text()
    assert head == "ref: refs/heads/master\n"  # the trap the hook must not fall into
    hooks = doc_block(
        "remote.md", "gitolite hooks (tests/e2e/test_gitolite.py runs exactly these lines)"
    )
    server.as_account(hooks)
    for repo in ("product", "product-intake"):
        assert on_server(server, repo, "config", "--get-all", "integrator.target") == "main"
