"""A mirror's fetch from the server, shared by every process of its host."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from integrator.errors import InfrastructureError
from integrator.plumbing import remote
from integrator.plumbing.remote import RemotePush
from tests.gitutil import commit_files, git, make_repo


def _server_and_mirror(tmp_path: Path) -> tuple[Path, Path, str]:
    server = make_repo(tmp_path / "server.git", bare=True)
    seed = make_repo(tmp_path / "seed")
    oid = commit_files(seed, {"a.txt": "a\n"}, "base")
    git("push", "-q", str(server), "HEAD:refs/heads/main", "HEAD:refs/integrator/queue/main",
        cwd=seed)  # fmt: skip
    mirror = make_repo(tmp_path / "mirror.git", bare=True)
    return server, mirror, oid


def test_a_fetch_that_races_another_process_of_the_host_is_run_again(tmp_path: Path) -> None:
    """Regression (found by the team drill): the daemon's drain, its promoter thread and
    `review web` fetch into one mirror; a fetch whose local ref update met another one's
    lock failed as "cannot fetch from the remote: cannot lock ref", which the review page
    answered with 503 and the daemon counted as host trouble. It is now run again."""
    server, mirror, oid = _server_and_mirror(tmp_path)
    lock = mirror / "refs" / "integrator" / "queue" / "main.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("")  # another git of this host is updating the ref right now
    threading.Timer(0.2, lock.unlink).start()
    RemotePush(mirror, f"file://{server}", "main").fetch()
    assert git("rev-parse", "refs/integrator/queue/main", cwd=mirror) == oid


def test_a_fetch_that_keeps_failing_is_the_hosts_trouble(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lock nobody releases (a git killed mid-update) is still an error after the tries;
    a server that does not answer is not tried again."""
    server, mirror, _ = _server_and_mirror(tmp_path)
    lock = mirror / "refs" / "heads" / "main.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("")
    started = time.monotonic()
    with pytest.raises(InfrastructureError, match="cannot fetch from the remote"):
        RemotePush(mirror, f"file://{server}", "main").fetch()
    assert time.monotonic() - started < 10
    calls: list[object] = []
    real = remote._git

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(args)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(remote, "_git", counted)
    with pytest.raises(InfrastructureError, match="cannot fetch from the remote"):
        RemotePush(mirror, f"file://{tmp_path / 'absent.git'}", "main").fetch()
    assert len(calls) == 1
