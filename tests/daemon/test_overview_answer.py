"""`integrator status` asks the daemon serving the spool (integrator/daemon/answer.py): real
daemons, real signals (SIGSTOP, SIGKILL), real sockets. The command must say the same
thing whether the daemon answered or it read for itself, and never take an answer it cannot
trust or wait on one that does not come."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from integrator.daemon.answer import REQUEST, SOCKET_NAME, OverviewServer, ask
from integrator.daemon.overview import document, gather
from integrator.daemon.overview_text import now
from integrator.limits import OVERVIEW_ANSWER_BYTES
from tests.daemon_world import Served, World, wait_until
from tests.gitutil import run_integrator


def _status(world: World, *extra: str) -> dict[str, Any]:
    done = run_integrator("status", "--spool", str(world.spool.root), "--json", *extra)
    assert done.returncode == 0, done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def _serving(world: World) -> Served:
    served = world.serve("--no-watch")
    served.wait_event("daemon.ready")
    wait_until((world.spool.root / SOCKET_NAME).exists, what="the overview socket")
    return served


def _comparable(doc: dict[str, Any]) -> dict[str, Any]:
    """The document without who answered and the seconds left (counted at each reading)."""
    claims = [{k: v for k, v in c.items() if k != "leaseSecondsLeft"} for c in doc["claims"]]
    return {**doc, "answeredBy": None, "claims": claims}


def test_a_running_daemon_answers_with_the_document_the_command_would_read(
    world: World,
) -> None:
    """With a daemon serving the spool, `status` prints the daemon's answer (it says which
    pid answered), and that answer is the document the command reads when no daemon runs:
    same queue, counts, held, claims and decisions; the text is the same too."""
    world.submit("t1")
    world.candidate("t2")  # a claim left live
    served = _serving(world)
    served.wait_event("decision")
    asked = _status(world)
    assert asked["answeredBy"] == {"daemon": served.proc.pid}
    text_asked = run_integrator("status", "--spool", str(world.spool.root)).stdout
    served.signal(signal.SIGTERM)
    assert served.wait() == 0
    assert not (world.spool.root / SOCKET_NAME).exists()  # the daemon took its socket away
    read = _status(world)
    assert read["answeredBy"] is None
    assert _comparable(asked) == _comparable(read)
    assert [c["taskId"] for c in read["claims"]] == ["t2"]
    assert read["counts"]["accepted"] == 1
    assert run_integrator("status", "--spool", str(world.spool.root)).stdout == text_asked


def test_a_stopped_daemon_costs_the_command_its_timeout_and_no_answer(world: World) -> None:
    """A daemon that is SIGSTOPped accepts the connection (the kernel does) but never
    answers: `status` gives up after its timeout and reads for itself."""
    served = _serving(world)
    os.kill(served.proc.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        doc = _status(world)
        took = time.monotonic() - started
    finally:
        os.kill(served.proc.pid, signal.SIGCONT)
    assert doc["answeredBy"] is None
    assert took < 30  # ASK_TIMEOUT (2 s) and the command's own reading, not forever


def test_a_killed_daemon_leaves_a_dead_socket_that_the_next_replaces(world: World) -> None:
    """SIGKILL leaves the socket file: `status` is refused at connect and reads for itself;
    the next daemon on the spool replaces the dead socket and answers."""
    first = _serving(world)
    first.signal(signal.SIGKILL)
    first.wait()
    assert stat.S_ISSOCK(os.lstat(world.spool.root / SOCKET_NAME).st_mode)
    assert _status(world)["answeredBy"] is None
    second = _serving(world)
    wait_until(
        lambda: _status(world)["answeredBy"] == {"daemon": second.proc.pid},
        what="the second daemon's answer",
    )


@pytest.mark.parametrize("planted", ["file", "folder", "link"])
def test_something_planted_under_the_socket_s_name_is_left_alone(
    world: World, planted: str
) -> None:
    """A file, a folder or a link where the socket would be: the daemon says so, serves
    the spool without answering `status`, and leaves the thing as it was; `status` reads
    for itself."""
    path = world.spool.root / SOCKET_NAME
    target = world.tmp / "elsewhere"
    target.write_text("keep")
    if planted == "file":
        path.write_text("planted")
    elif planted == "folder":
        path.mkdir()
    else:
        path.symlink_to(target)
    before = os.lstat(path)
    served = world.serve("--no-watch")
    served.wait_event("overview.unavailable")
    served.wait_event("daemon.ready")
    assert _status(world)["answeredBy"] is None
    served.signal(signal.SIGTERM)
    assert served.wait() == 0
    after = os.lstat(path)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
    assert target.read_text() == "keep"


def _server(root: Path, answer: bytes) -> OverviewServer:
    server = OverviewServer(root, lambda: answer)
    assert server.start()
    return server


def test_an_answer_for_another_repository_or_not_a_document_is_not_taken(
    tmp_path: Path,
) -> None:
    """`ask` takes only an overview document for the repository it asked about."""
    root = tmp_path / "spool"
    root.mkdir()
    repo = tmp_path / "repo"
    repo.mkdir()
    answers: list[tuple[bytes, bool]] = [
        (json.dumps({"repo": str(repo), "problems": []}).encode(), True),
        (json.dumps({"repo": str(tmp_path / "other")}).encode(), False),
        (b"[1, 2, 3]", False),
        (b'{"repo": 5}', False),
        (b"not json", False),
        (b"", False),
    ]
    for answer, taken in answers:
        server = _server(root, answer)
        try:
            assert (ask(root, repo) is not None) is taken, answer
        finally:
            server.stop()


def test_an_answer_over_the_limit_is_not_read_to_its_end(tmp_path: Path) -> None:
    """An answer longer than OVERVIEW_ANSWER_BYTES is dropped once the limit is passed."""
    root = tmp_path / "spool"
    root.mkdir()
    big = b'{"repo": "' + b"x" * (OVERVIEW_ANSWER_BYTES + 10) + b'"}'
    server = _server(root, big)
    try:
        assert ask(root, None) is None
    finally:
        server.stop()


def test_a_spool_path_longer_than_a_socket_address_still_answers(tmp_path: Path) -> None:
    """A Unix socket's address holds 107 bytes; a deeper spool binds and connects through
    its folder's descriptor."""
    root = tmp_path / ("d" * 60) / ("e" * 60) / "spool"
    root.mkdir(parents=True)
    assert len(os.fsencode(root / SOCKET_NAME)) > 108
    server = _server(root, json.dumps({"repo": str(tmp_path)}).encode())
    try:
        assert ask(root, tmp_path) == {"repo": str(tmp_path)}
        assert stat.S_IMODE(os.lstat(root / SOCKET_NAME).st_mode) == 0o600
    finally:
        server.stop()
    assert not (root / SOCKET_NAME).exists()
    assert [p.name for p in root.iterdir()] == []  # no private folder left behind


def test_a_request_that_is_not_the_one_request_gets_nothing(tmp_path: Path) -> None:
    """The server answers exactly `overview\\n`; anything else is closed unanswered, and
    the server goes on answering."""
    root = tmp_path / "spool"
    root.mkdir()
    server = _server(root, json.dumps({"repo": str(tmp_path)}).encode())
    try:
        for request in (b"GET / HTTP/1.0\r\n\r\n", b"overview", b"x" * 100, b""):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(5)
                sock.connect(str(root / SOCKET_NAME))
                sock.sendall(request)
                sock.shutdown(socket.SHUT_WR)
                try:
                    got = sock.recv(100)
                except ConnectionResetError:  # closed with the request's rest unread
                    got = b""
                assert got == b""
        assert server.answered == 0
        assert ask(root, tmp_path) is not None and server.answered == 1
        assert REQUEST == b"overview\n"
    finally:
        server.stop()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs a spool owned by another user")
def test_an_answer_from_a_process_that_is_not_the_spool_owner_s_is_not_taken(
    tmp_path: Path,
) -> None:
    """The kernel's word on who answered (SO_PEERCRED) must be the spool folder's owner: a
    root daemon's socket in a spool owned by another user is not asked."""
    root = tmp_path / "spool"
    root.mkdir()
    server = _server(root, json.dumps({"repo": str(tmp_path)}).encode())
    try:
        assert ask(root, tmp_path) is not None
        os.chown(root, 12345, 12345)
        assert ask(root, tmp_path) is None
    finally:
        os.chown(root, 0, 0)
        server.stop()


def test_the_daemon_s_answer_is_the_in_process_document(world: World) -> None:
    """What the daemon sends is `document(gather(...))`, the function the command runs."""
    world.submit("t1")
    served = _serving(world)
    served.wait_event("decision")
    asked = _status(world)
    mine = document(gather(world.spool.repo_path(), world.spool), now())
    assert _comparable(asked) == _comparable(json.loads(json.dumps(mine, default=str)))
