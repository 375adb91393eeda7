"""Property: the gate accepts exactly when git's own diff is covered by the contract.

The oracle is `git diff --name-status -M` run as a process: for random trees and random
edits (modifications, additions, deletions, renames with and without edits, exec-bit
flips), the gate's decision is ACCEPTED iff every path git reports — both ends of every
rename included — is allowed and not denied by the contract.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

import pygit2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from integrator.documents.verdict import Decision
from integrator.fence.diff import recompute
from integrator.paths import PathMatcher
from tests.factories import Gate
from tests.gitutil import commit_files, git, make_repo

FOLDERS = ["a", "a/x", "b", "c/y/z"]
NAMES = ["f1.txt", "f2.txt", "f3.py", "g.md"]
PATTERNS = ["a/**", "a/x/**", "b/**", "c/**", "*.md", "a/f1.txt", "c/y/**", "b/*.py"]

_REPO_DIR = Path(tempfile.mkdtemp(prefix="integrator-prop-"))
atexit.register(shutil.rmtree, _REPO_DIR, ignore_errors=True)  # one repo for every example
REPO = make_repo(_REPO_DIR / "repo")
# The examples' commits are unrelated roots and HEAD names none: record an identity.
git("config", "integrator.repoId", "sha256:" + "ab" * 32, cwd=REPO)


def body(seed: int) -> str:
    return "".join(f"line {seed} {i}\n" for i in range(8))


paths_st = st.builds(lambda f, n: f"{f}/{n}", st.sampled_from(FOLDERS), st.sampled_from(NAMES))


@st.composite
def scenario(draw: st.DrawFn) -> tuple[dict[str, object], dict[str, object], list[str], list[str]]:
    base_paths = draw(st.sets(paths_st, min_size=1, max_size=8))
    base: dict[str, object] = {p: body(i) for i, p in enumerate(sorted(base_paths))}
    edits: dict[str, object] = {}
    for path in sorted(base_paths):
        action = draw(st.sampled_from(["keep", "keep", "modify", "delete", "rename", "chmod"]))
        if action == "modify":
            edits[path] = body(100 + len(edits))
        elif action == "delete":
            edits[path] = None
        elif action == "chmod":
            edits[path] = (base[path], "x")
        elif action == "rename":
            target = draw(paths_st)
            if target not in base_paths and target not in edits:
                edits[path] = None
                content = str(base[path])
                if draw(st.booleans()):
                    content += "edited\n"
                edits[target] = content
    for added in draw(st.sets(paths_st, max_size=3)):
        if added not in base_paths and added not in edits:
            edits[added] = body(200)
    allow = draw(st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=3, unique=True))
    deny = draw(st.lists(st.sampled_from(PATTERNS), max_size=1, unique=True))
    return base, edits, allow, deny


def oracle_paths(base: str, cand: str) -> list[str]:
    out = git("diff", "--name-status", "-M", base, cand, cwd=REPO)
    paths: list[str] = []
    for line in out.splitlines():
        fields = line.split("\t")
        paths.extend(fields[1:])
    return paths


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(scenario())
def test_accepted_iff_oracle_paths_covered(
    case: tuple[dict[str, object], dict[str, object], list[str], list[str]],
) -> None:
    """ACCEPTED iff every path of `git diff --name-status -M` is covered (rename ends too)."""
    base_files, edits, allow, deny = case
    base = commit_files(REPO, base_files, "base", parent=None, ref=None)  # type: ignore[arg-type]
    cand = commit_files(REPO, edits, "cand", parent=base, ref=None)  # type: ignore[arg-type]
    reported = oracle_paths(base, cand)
    matcher = PathMatcher.of(allow, deny)
    expected = all(matcher.covers(p) for p in reported)
    verdict = Gate(REPO).run(base, cand, paths=allow, deny=deny)
    assert (verdict.decision is Decision.ACCEPTED) == expected, (reported, verdict.violations)
    assert verdict.changes is not None
    # The recomputed diff names exactly the paths git names (rename pairing aside).
    repo = pygit2.Repository(str(REPO))
    diff = recompute(repo, repo[base].peel(pygit2.Tree), repo[cand].peel(pygit2.Tree))
    assert set(diff.all_paths) == set(reported)
    if not expected:
        flagged = {v.path for v in verdict.violations}
        assert flagged == {p for p in reported if not matcher.covers(p)}
