"""A daemon's write probe has a ref of its own: hosts sharing a hostname (containers, a
test bench, the team drill's three hosts) must not push one ref with leases against each
other, or one host's probe fails on another's and reads as "the server refuses writes"."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from integrator import refnames
from integrator.daemon.probe import HostProbe
from integrator.records.canonical import Canonical
from tests.gitutil import commit_files, declare_bare, make_repo
from tests.gitutil import run_integrator_raw as cli


def _mirror(path: Path) -> Path:
    declare_bare(make_repo(path))
    commit_files(path, {"README": "x\n"})
    done = cli("init", "--repo", str(path))
    assert done.returncode == 0, done.stderr.decode()
    return path


def _valid_ref(name: str) -> bool:
    proc = subprocess.run(["git", "check-ref-format", name], capture_output=True, check=False)
    return proc.returncode == 0


@pytest.mark.parametrize("hostname", ["build-7", "a.b..c", "x.lock", "ünï côde", "", "-" * 80])
def test_each_mirror_probes_its_own_valid_ref(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hostname: str
) -> None:
    monkeypatch.setattr("socket.gethostname", lambda: hostname)
    a, b = _mirror(tmp_path / "host-a.git"), _mirror(tmp_path / "host-b.git")
    names = []
    for path in (a, b, a):
        with Canonical(path) as canonical:
            names.append(HostProbe.of(canonical).host)
    assert names[0] != names[1], names  # two mirrors on one machine: two refs
    assert names[0] == names[2], names  # the same mirror: the same ref every time
    for host in names:
        assert _valid_ref(f"{refnames.PROBE}{host}"), host
        assert "/" not in host and len(host) <= 64 + 9
