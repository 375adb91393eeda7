"""An agent's clone reading where a landing is, while another read of the same clone runs."""

from __future__ import annotations

import threading
from pathlib import Path

from integrator import refnames
from integrator.fleet import server_landing
from integrator.fleet.server_landing import Source
from tests.gitutil import commit_files, git, make_repo

LOCAL_MAIN = refnames.intake_landing("refs/heads/main")


def test_a_read_whose_landing_ref_another_read_moved_meanwhile_is_run_again(
    tmp_path: Path,
) -> None:
    """Regression (found by the team drill): two `status --intake` reads in one clone (or in
    worktrees of one clone) both read a private landing ref, the other one moved it first,
    and this one failed with "cannot lock ref …: is at X but expected Y", exit 4 for a
    settled verdict. The fetch is now run again and reads what the other one wrote.

    The race is made certain: the server's upload-pack only reads the client's wants a
    second after the client read its local refs, and the ref is moved within that second."""
    server = make_repo(tmp_path / "server.git", bare=True)
    seed = make_repo(tmp_path / "seed")
    first = commit_files(seed, {"a.txt": "1\n"}, "one")
    second = commit_files(seed, {"a.txt": "2\n"}, "two")
    git("push", "-q", str(server), "HEAD:refs/heads/main", "HEAD:refs/integrator/queue/main",
        cwd=seed)  # fmt: skip
    clone = make_repo(tmp_path / "clone")
    server_landing.fetch(Source(f"file://{server}", {"main": True}), clone)
    third = commit_files(seed, {"a.txt": "3\n"}, "three")  # objects the clone lacks
    git("push", "-q", str(server), "HEAD:refs/heads/main", cwd=seed)
    slow = f"ext::sh -c (sleep% 1;cat)|git% upload-pack% {server}"
    for key, value in (("protocol.version", "0"), ("protocol.ext.allow", "always"),
                       (f"url.{slow}.insteadOf", "slow://server")):  # fmt: skip
        git("config", key, value, cwd=clone)
    other = threading.Timer(0.4, git, ("update-ref", LOCAL_MAIN, first, second), {"cwd": clone})
    other.start()  # the other read moves the ref while this one waits for its pack
    server_landing.fetch(Source("slow://server", {"main": True}), clone)
    other.join()
    assert git("rev-parse", LOCAL_MAIN, cwd=clone) == third
