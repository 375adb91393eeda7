"""`python -m bench.replay` on a small history of the shapes git's own has: a merge of a topic
branch, a rename, names with spaces and wildcard characters, a lockfile and a gitlink (each
touching a resource). Every commit is claimed path by path and lands; the queue ends on the
history's tree."""

from __future__ import annotations

import json
from pathlib import Path

from bench import replay
from tests.gitutil import git, make_repo


def _history(path: Path) -> Path:
    repo = make_repo(path)
    (repo / "src").mkdir()
    (repo / "src" / "a.py").write_text("a = 1\n")
    (repo / "README").write_text("hello\n")
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "root", cwd=repo)
    (repo / "src" / "a b [1]*.txt").write_text("odd name\n")
    (repo / "uv.lock").write_text("lock\n")
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "odd names and a lockfile", cwd=repo)
    git("checkout", "-qb", "topic", cwd=repo)
    git("mv", "src/a.py", "src/renamed.py", cwd=repo)
    git("commit", "-qm", "rename on a topic", cwd=repo)
    (repo / "docs").mkdir()
    (repo / "docs" / "x.md").write_text("x\n")
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "docs on the topic", cwd=repo)
    git("checkout", "-q", "main", cwd=repo)
    (repo / "README").write_text("hello again\n")
    git("commit", "-qam", "edit on main", cwd=repo)
    git("merge", "-q", "--no-ff", "-m", "merge topic", "topic", cwd=repo)
    blob = git("rev-parse", "HEAD", cwd=repo)
    git("update-index", "--add", "--cacheinfo", f"160000,{blob},vendor/lib", cwd=repo)
    git("commit", "-qm", "a gitlink", cwd=repo)
    return repo


def test_every_commit_of_a_history_is_claimed_path_by_path_and_lands(tmp_path: Path) -> None:
    source = _history(tmp_path / "source")
    out = tmp_path / "out"
    assert replay.main(["--source", str(source), "--all", "--out", str(out)]) == 0
    result = json.loads((out / "replay.json").read_text())
    assert result["commits"] == result["accepted"] == result["landings"] == 4
    assert (
        result["queue_tree"] == result["last_tree"] == git("rev-parse", "HEAD^{tree}", cwd=source)
    )
    outcomes = [json.loads(line) for line in (out / "replay.jsonl").read_text().splitlines()]
    assert [o["paths"] for o in outcomes] == [2, 1, 3, 1]  # the merge: its topic, both ends
    assert [o["resources"] for o in outcomes] == [1, 0, 0, 1]  # lockfile:uv.lock, submodule
