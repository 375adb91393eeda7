"""A verdict read back from an intake is measured before it is read: a commit or tree
over its limit is not a verdict, however genuine the signature beside it (a writer of an
unguarded intake could otherwise make every daemon load a tree of any size)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pygit2

from integrator.daemon.admission import Pending
from integrator.daemon.intake_verdicts import untrusted
from integrator.documents.verdict_key import SIGNATURE_FILE, new_verdict_key
from integrator.limits import VERDICT_TREE_BYTES
from integrator.plumbing import git as plumbing
from tests.gitutil import git

SID = "20260601T120000123456Z-0a1b2c3d"
DOCUMENT = b'{"decision": "ACCEPTED"}\n'


def _publish(intake: Path, files: dict[str, bytes], ref: str) -> None:
    lines = []
    for name, data in sorted(files.items()):
        blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=intake, input=data,
                              capture_output=True, check=True).stdout.decode().strip()  # fmt: skip
        lines.append(f"100644 blob {blob}\t{name}\n")
    tree = git("mktree", cwd=intake, input="".join(lines).encode())
    git("update-ref", ref, git("commit-tree", tree, "-m", "verdict", cwd=intake), cwd=intake)


def test_a_signed_verdict_in_an_oversized_tree_is_not_read(tmp_path: Path) -> None:
    key = new_verdict_key()
    intake, mirror = tmp_path / "intake.git", tmp_path / "mirror.git"
    for path in (intake, mirror):
        git("init", "-q", "--bare", str(path), cwd=tmp_path)
    signed = {"verdict.json": DOCUMENT,
              SIGNATURE_FILE: key.sign("t0", SID, "verdict.json", DOCUMENT)}  # fmt: skip
    item = Pending("t0", SID, "0" * 40)
    repo = pygit2.Repository(str(mirror))

    def run(args: list[str]) -> plumbing.GitRun:
        return plumbing.run_git(args, git_dir=mirror, check=False)

    def check() -> str | None:
        return untrusted(run, str(intake), repo, frozenset({key.public}), item)

    ref = f"refs/integrator/verdicts/t0/{SID}"
    _publish(intake, signed, ref)
    assert check() is None  # the genuine verdict, as published
    padding = {f"pad-{i:04}": b"" for i in range(VERDICT_TREE_BYTES // 30 + 1)}
    _publish(intake, signed | padding, ref)
    assert check() == f"its tree is over {VERDICT_TREE_BYTES} bytes"
    _publish(intake, {"verdict.json": DOCUMENT}, ref)
    assert check() == "it is not signed (no verdict.sig)"
