"""What a Candidate page costs as a candidate grows: read, shaped and rendered, counted.

A candidate that adds N files outside its contract is held with N violations, one per
file. Building its page (the one tree diff, the file rows, the template) is counted in
Python lines run, which do not depend on the machine's speed or load: a page cost that
grew with files × violations (every file checked against every violation, twice) made
4,000 files cost about 16 times 1,000 files; now it grows linearly and the rows rendered
stop at PAGE_FILES. The figures, with wall-clock times beside them, are printed
(`pytest -s`); only the counts are asserted.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

import pygit2
import pytest

from integrator.documents.submission import Submission
from integrator.documents.verdict import Code, Decision, Verdict, Violation
from integrator.limits import PAGE_FILES
from integrator.records.canonical import Canonical
from integrator.records.prepare import prepare
from integrator.review.actions import Review
from integrator.store.spool import Spool
from integrator.web import sources
from integrator.web.app import Backend, Site, WebConfig
from tests.factories import contract_doc
from tests.gitutil import GIT_ENV, commit_files, declare_bare, make_repo

SID = "20260601T120000000000Z-00000001"


def add_files(path: Path, base: str, names: list[str]) -> str:
    """A commit on `base` adding a small file at each of `names` (pygit2: no process per
    file, so a test can make thousands)."""
    repo = pygit2.Repository(str(path))
    index = pygit2.Index()
    index.read_tree(repo[base].peel(pygit2.Commit).tree)
    for n, name in enumerate(names):
        blob = repo.create_blob(f"line {n}\n".encode())
        index.add(pygit2.IndexEntry(name, blob, pygit2.enums.FileMode.BLOB))
    tree = index.write_tree(repo)
    who = pygit2.Signature("agent-a", "agent-a@example.org", 1_780_000_000, 0)
    return str(repo.create_commit(None, who, who, "many files", tree, [pygit2.Oid(hex=base)]))


def held_candidate(root: Path, files: int) -> tuple[Path, Spool]:
    """A repository and a spool holding one candidate that adds `files` files outside its
    contract (`src/**`), fenced with one PATH_NOT_OWNED per file."""
    repo = declare_bare(make_repo(root / "canonical"))
    base = commit_files(repo, {"src/a.py": "a = 1\n"}, "base", ref="refs/heads/main")
    prepare(repo, target="main")
    added = [f"out/{n // 100:03d}/f{n:05d}.txt" for n in range(files)]
    candidate = add_files(repo, base, added)
    doc = contract_doc(baseCommit=base)
    violations = [
        Violation(code=Code.PATH_NOT_OWNED, path=path, detail="not matched by any allowed pattern")
        for path in added
    ]
    verdict = Verdict(decision=Decision.FENCED, violations=violations, task_id="task-1",
                      attempt_id="attempt-1", generation=1, base=base)  # fmt: skip
    submission = Submission.model_validate(
        {"schema": "integrator.submission.v1", "contract": doc, "candidate": candidate,
         "submitter": {"user": "agent-a", "host": "ws"}, "submittedAt": datetime.now(UTC)}
    )  # fmt: skip
    spool = Spool(root / "spool").ensure()
    folder = spool.folder("fenced") / SID
    folder.mkdir()
    (folder / "submission.json").write_text(submission.to_json())
    (folder / "verdict.json").write_text(verdict.to_json())
    return repo, spool


def counted(work: Callable[[], Any]) -> tuple[int, float]:
    """(Python lines `work` ran, in every function it called; seconds it took untraced)."""
    lines = 0

    def tracer(frame: FrameType, event: str, arg: object) -> Any:
        nonlocal lines
        if event == "line":
            lines += 1
        return tracer

    sys.settrace(tracer)
    try:
        work()
    finally:
        sys.settrace(None)
    started = time.perf_counter()
    work()
    return lines, time.perf_counter() - started


def page_cost(root: Path, files: int) -> tuple[int, float, int]:
    """(lines run, seconds, rows rendered) to read, shape and render the Candidate page."""
    repo, spool = held_candidate(root, files)
    site = Site(WebConfig(None, "rm"), Backend(None, None, None))  # type: ignore[arg-type]
    template = site.env.get_template("candidate.html")
    out: list[str] = []

    def build() -> None:
        with Canonical(repo) as canonical:
            view = sources.candidate_page(Review(spool, canonical), SID)
        out[:] = [template.render(
            c=view, csrf="", authenticated=False, read_only=True, actor="rm", path="/", title="t",
        )]  # fmt: skip

    lines, seconds = counted(build)
    rows = out[0].count('<tr class="violating">')
    return lines, seconds, rows


def test_a_candidate_page_costs_in_proportion_to_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """4,000 changed files with 4,000 violations cost at most about 4 times 1,000 of each
    (linear, not files × violations), and the page lists PAGE_FILES of them."""
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)
    small = page_cost(tmp_path / "small", 1000)
    large = page_cost(tmp_path / "large", 4000)
    print(
        f"\ncandidate page, 1,000 files + 1,000 violations: {small[0]:,} lines run, "
        f"{small[1] * 1000:.0f} ms, {small[2]:,} rows"
        f"\ncandidate page, 4,000 files + 4,000 violations: {large[0]:,} lines run, "
        f"{large[1] * 1000:.0f} ms, {large[2]:,} rows"
        f"\nratio 4,000 / 1,000: {large[0] / small[0]:.2f} in lines, "
        f"{large[1] / small[1]:.2f} in time"
    )
    assert small[2] == 1000 and large[2] == PAGE_FILES
    assert large[0] < 4.2 * small[0]
