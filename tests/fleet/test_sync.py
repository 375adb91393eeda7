"""`integrator sync`: a contract based on the unpromoted queue head becomes reachable in a
plain clone; a base the server does not serve is exit 2, said plainly."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.gitutil import commit_files, git, make_repo
from tests.gitutil import run_integrator_raw as cli


def test_sync_fetches_the_queue_head_a_contract_is_based_on(tmp_path: Path) -> None:
    server = make_repo(tmp_path / "server.git", bare=True)
    work = make_repo(tmp_path / "work")
    main = commit_files(work, {"a.txt": "1\n"}, "on main")
    queued = commit_files(work, {"a.txt": "2\n"}, "landed, not promoted yet")
    git("push", "-q", str(server), f"{main}:refs/heads/main", cwd=work)
    git("push", "-q", str(server), f"{queued}:refs/integrator/queue/main", cwd=work)
    clone = tmp_path / "clone"
    git("clone", "-q", "--no-local", str(server), str(clone), cwd=tmp_path)  # objects by protocol
    assert git("cat-file", "-t", main, cwd=clone) == "commit"
    contract = tmp_path / "c.json"
    contract.write_text(json.dumps({"baseCommit": queued}))
    lacking = subprocess.run(
        ["git", "cat-file", "-e", f"{queued}^{{commit}}"], cwd=clone, check=False
    )
    assert lacking.returncode != 0  # a plain clone lacks the base
    done = cli("sync", "--contract", str(contract), "--repo", str(clone), "--json")
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout)["reachable"] is True
    assert git("cat-file", "-t", queued, cwd=clone) == "commit"
    contract.write_text(json.dumps({"baseCommit": "ab" * 20}))
    gone = cli("sync", "--contract", str(contract), "--repo", str(clone))
    assert gone.returncode == 2
    assert b"still missing" in gone.stderr
    dash = cli(
        "sync", "--contract", str(contract), "--repo", str(clone), "--remote=--upload-pack=x"
    )
    assert dash.returncode == 2 and b"not a remote" in dash.stderr
