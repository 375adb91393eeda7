"""The configuration file and the environment: found where docs/configuration.md says,
unknown tables and keys refused by name, INTEGRATOR_REPO / INTEGRATOR_SPOOL used when the
command line leaves them out. Real processes, real repositories."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from integrator.configfile import discover, git_dir_of
from integrator.errors import ConfigurationError
from tests.gitutil import git, make_repo, run_integrator


@pytest.fixture
def canon(tmp_path: Path) -> Path:
    """An initialized bare canonical repository with one commit."""
    src = tmp_path / "src"
    git("init", "-q", "-b", "main", str(src), cwd=tmp_path)
    git("commit", "-q", "--allow-empty", "-m", "base", cwd=src)
    bare = tmp_path / "canon.git"
    git("clone", "-q", "--bare", str(src), str(bare), cwd=tmp_path)
    assert run_integrator("init", "--repo", str(bare)).returncode == 0
    return bare


def _clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """This environment without any integrator variable, a private XDG folder, and `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INTEGRATOR_")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    env.update(extra)
    return env


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("[serv]\npoll = 1\n", "unknown table [serv]"),
        ("[serve]\npol = 1\n", "unknown setting serve.pol"),
        ("[defaults]\nspol = 'x'\n", "unknown setting defaults.spol"),
        ("poll = 1\n", "unknown table [poll]"),
        ("[serve]\npoll = 'fast'\n", "serve.poll must be of type float"),
    ],
    ids=["table", "serve-key", "defaults-key", "top-level-key", "type"],
)
def test_serve_refuses_a_config_it_does_not_understand(
    canon: Path, tmp_path: Path, text: str, named: str
) -> None:
    """Regression: a misspelled table in `serve --config` was ignored without a word; every
    unknown table or key is now exit 2 naming it, before the daemon starts."""
    config = tmp_path / "bad.toml"
    config.write_text(text)
    done = run_integrator(
        "serve", "--repo", str(canon), "--spool", str(tmp_path / "spool"), "--once",
        "--config", str(config), environ=_clean_env(tmp_path),
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert named in done.stderr and str(config) in done.stderr
    assert not (tmp_path / "spool").exists()


def test_the_repository_s_config_is_found_and_gives_the_spool(canon: Path, tmp_path: Path) -> None:
    """`<git dir>/integrator/config.toml` is read by `serve --repo` without --config: its
    [defaults] spool (relative to the file) is the spool, and `config show` names the file
    and the source of each value."""
    (canon / "integrator").mkdir()
    config = canon / "integrator" / "config.toml"
    config.write_text('[defaults]\nspool = "../../spool"\n\n[serve]\npoll = 0.5\n')
    env = _clean_env(tmp_path)
    done = run_integrator("serve", "--repo", str(canon), "--once", environ=env)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "spool" / "new").is_dir()
    shown = run_integrator("config", "show", "--json", cwd=canon, environ=env)
    doc = json.loads(shown.stdout)
    assert doc["file"] == str(config) and doc["foundBy"] == "the repository"
    assert doc["values"]["defaults.spool"] == {
        "value": str(tmp_path / "spool"), "source": str(config)
    }  # fmt: skip
    assert doc["values"]["serve.poll"] == {"value": 0.5, "source": str(config)}
    assert doc["values"]["serve.batch-size"]["source"] == "default"


def test_the_user_config_is_found_outside_a_repository(tmp_path: Path) -> None:
    """Outside any repository `$XDG_CONFIG_HOME/integrator/config.toml` is the file; a
    variable beats its [defaults]."""
    user = tmp_path / "xdg" / "integrator" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text(f'[defaults]\nrepo = "{tmp_path / "r.git"}"\nspool = "/srv/spool"\n')
    outside = tmp_path / "outside"
    outside.mkdir()
    env = _clean_env(tmp_path, INTEGRATOR_SPOOL=str(tmp_path / "from-env"))
    doc = json.loads(run_integrator("config", "show", "--json", cwd=outside, environ=env).stdout)
    assert doc["file"] == str(user) and doc["foundBy"] == "$XDG_CONFIG_HOME"
    assert doc["values"]["defaults.repo"]["source"] == str(user)
    assert doc["values"]["defaults.spool"] == {
        "value": str(tmp_path / "from-env"), "source": "$INTEGRATOR_SPOOL"
    }  # fmt: skip


def test_environment_variables_stand_for_repo_and_spool(canon: Path, tmp_path: Path) -> None:
    """INTEGRATOR_REPO is `--repo` of `contract issue|list` and `serve`; INTEGRATOR_SPOOL is
    `--spool` of `serve`, `submit` and `status`: a contract issued, a submission made and
    decided, with neither flag on any command line."""
    env = _clean_env(tmp_path, INTEGRATOR_REPO=str(canon), INTEGRATOR_SPOOL=str(tmp_path / "spool"))
    base = git("rev-parse", "HEAD", cwd=canon).strip()
    contract = tmp_path / "c.json"
    issued = run_integrator(
        "contract", "issue", "--task", "t", "--path", "a/**", "--base", base, "-o",
        str(contract), cwd=tmp_path, environ=env,
    )  # fmt: skip
    assert issued.returncode == 0, issued.stderr
    listed = run_integrator("contract", "list", "--live", cwd=tmp_path, environ=env)
    assert listed.stdout.splitlines()[1].split()[0] == "t"
    assert run_integrator("serve", "--once", cwd=tmp_path, environ=env).returncode == 0
    agent = tmp_path / "agent"
    git("clone", "-q", str(canon), str(agent), cwd=tmp_path)
    (agent / "a").mkdir()
    (agent / "a" / "x").write_text("x")
    git("add", "a", cwd=agent)
    git("commit", "-qm", "x", cwd=agent)
    sub = run_integrator(
        "submit", "--contract", str(contract), "--candidate", "HEAD", "--bundle", cwd=agent,
        environ=env,
    )  # fmt: skip
    assert sub.returncode == 0, sub.stderr
    assert run_integrator("serve", "--once", cwd=tmp_path, environ=env).returncode == 0
    status = run_integrator("status", "--submission", sub.stdout.strip(), cwd=tmp_path, environ=env)
    assert status.returncode == 0 and "ACCEPTED" in status.stdout, status.stderr


def test_serve_without_repo_names_every_way_to_give_it(tmp_path: Path) -> None:
    """`serve` with no --repo, no variable and no file: exit 2 saying how to give one."""
    done = run_integrator("serve", "--once", cwd=tmp_path, environ=_clean_env(tmp_path))
    assert done.returncode == 2
    assert "--repo PATH is required" in done.stderr and "$INTEGRATOR_REPO" in done.stderr


def test_a_linked_worktree_reads_the_common_git_dir(tmp_path: Path) -> None:
    """Every worktree of one repository finds the same `<git dir>/integrator/config.toml`."""
    repo = make_repo(tmp_path / "main")
    git("commit", "-q", "--allow-empty", "-m", "base", cwd=repo)
    git("worktree", "add", "-q", str(tmp_path / "wt"), cwd=repo)
    (tmp_path / "wt" / "sub").mkdir()
    assert git_dir_of(tmp_path / "wt" / "sub") == (repo / ".git").resolve()
    (repo / ".git" / "integrator").mkdir()
    (repo / ".git" / "integrator" / "config.toml").write_text("")
    found, how = discover(cwd=tmp_path / "wt", env={})
    assert found == (repo / ".git").resolve() / "integrator" / "config.toml"
    assert how == "the repository"
    assert git_dir_of(tmp_path) is None or git_dir_of(tmp_path) != repo


def test_a_work_tree_file_is_not_read(tmp_path: Path) -> None:
    """A `.integrator.toml` committed in the work tree is not a configuration (it would
    travel with every agent's commit)."""
    repo = make_repo(tmp_path / "main")
    (repo / ".integrator.toml").write_text("[serve]\npoll = 9\n")
    assert discover(cwd=repo, env={"XDG_CONFIG_HOME": str(tmp_path / "none")}) == (
        None, "none found"
    )  # fmt: skip


def test_parse_errors_are_configuration_errors(tmp_path: Path) -> None:
    """Bad TOML is a ConfigurationError naming the file (exit 2), not a traceback."""
    from integrator.configfile import parse

    with pytest.raises(ConfigurationError, match="cannot read configuration"):
        parse(tmp_path / "x.toml", b"[serve\n")
