"""The landing's proof of queue head → merged tree reads only what the gate did not prove.

Where the queue head's folder is still the base's and the merged folder is the candidate's,
the gate walked that very pair: the head → merged walk and the collision check skip it.
Everywhere else (the queue changed the folder since the base, or the merge wrote something
the candidate did not) the landing reads and judges again.
"""

from __future__ import annotations

from pathlib import Path

import pygit2

from integrator.documents.verdict import Code, Decision
from integrator.fence.diff import find_collisions
from integrator.fence.trees import Leaf, TreeReader, changed_leaves
from integrator.records.claims import Claims, IssueRequest
from tests.canon import make_canon
from tests.gitutil import commit_files, make_repo


def _trees(tmp_path: Path) -> tuple[pygit2.Repository, bytes, bytes, bytes]:
    """A base, and a candidate that edits a/x and b/y: (repo, base, candidate, a's new id)."""
    path = make_repo(tmp_path / "r")
    files = {f"{d}/{n}": f"{d}{n}\n" for d in ("a", "b", "c") for n in ("x", "y", "z")}
    base = commit_files(path, files, "base", ref="refs/heads/main")
    cand = commit_files(path, {"a/x": "new\n", "b/y": "new\n"}, "cand", parent=base, ref=None)
    repo = pygit2.Repository(str(path))
    base_tree = repo[base].peel(pygit2.Commit).tree
    cand_tree = repo[cand].peel(pygit2.Commit).tree
    return repo, base_tree.id.raw, cand_tree.id.raw, cand_tree["a"].id.raw


def _path(old: Leaf | None, new: Leaf | None) -> str:
    leaf = old or new
    assert leaf is not None
    return leaf.path


def test_pruned_folder_is_neither_walked_nor_read(tmp_path: Path) -> None:
    repo, base, cand, a_new = _trees(tmp_path)
    reader = TreeReader(repo)
    every = [_path(o, n) for o, n in changed_leaves(reader, base, cand)]
    assert every == ["a/x", "b/y"]

    fresh = TreeReader(repo)
    skipped: list[str] = []

    def prune(path: str, old: bytes, new: bytes) -> bool:
        if new == a_new:
            skipped.append(path)
            return True
        return False

    rest = [_path(o, n) for o, n in changed_leaves(fresh, base, cand, prune=prune)]
    assert rest == ["b/y"]
    assert skipped == ["a"]
    assert a_new not in fresh.cache  # the candidate's folder a was never parsed


def test_collision_check_reads_only_folders_that_differ_from_the_checked_tree(
    tmp_path: Path,
) -> None:
    path = make_repo(tmp_path / "r")
    base = commit_files(path, {"d/one": "1\n", "e/two": "2\n"}, "base", ref="refs/heads/main")
    # The candidate adds d/New; the "merged" tree also has e/TWO beside e/two and d/new
    # beside d/New: only the folder that differs from the candidate's (d) is read again.
    cand = commit_files(path, {"d/New": "n\n"}, "cand", parent=base, ref=None)
    merged = commit_files(path, {"d/new": "q\n"}, "queue", parent=cand, ref=None)
    repo = pygit2.Repository(str(path))
    cand_tree = repo[cand].peel(pygit2.Commit).tree
    merged_tree = repo[merged].peel(pygit2.Commit).tree
    found = find_collisions(
        TreeReader(repo), merged_tree.id.raw, ["d/New"], checked=cand_tree.id.raw
    )
    assert [(c.kind, c.path, c.other) for c in found] == [("case", "d/New", "d/new")]
    # Checked against itself, nothing is read below the root and nothing is found.
    reader = TreeReader(repo)
    same = find_collisions(reader, cand_tree.id.raw, ["d/New"], checked=cand_tree.id.raw)
    assert same == []
    assert cand_tree["d"].id.raw not in reader.cache


def test_name_the_queue_added_since_the_base_still_collides_at_landing(tmp_path: Path) -> None:
    """Claims on docs/README and (forced shared: the planner would refuse the overlap)
    docs/readme on one base: each candidate passes the gate alone, but merged onto the
    queue head the second is one file with the first on a case-insensitive checkout:
    CASE_COLLISION, nothing lands."""
    canon = make_canon(tmp_path)
    base = canon.ref("refs/integrator/queue/main")
    first = canon.issue("upper", ["docs/README"])
    with canon.open() as canonical:
        request = IssueRequest(task_id="lower", paths=("docs/readme",))
        second = Claims(canonical).issue(request, force_shared=True)
    upper = canon.commit({"docs/README": "upper\n"})
    lower = canon.commit({"docs/readme": "lower\n"}, parent=base)
    assert canon.check(second, lower).decision is Decision.ACCEPTED  # alone, it is fine
    assert canon.integrate(first, upper).decision is Decision.ACCEPTED
    head = canon.ref("refs/integrator/queue/main")
    verdict = canon.integrate(second, lower)
    assert verdict.decision is Decision.FENCED
    assert [(v.code, v.path) for v in verdict.violations] == [(Code.CASE_COLLISION, "docs/readme")]
    assert canon.ref("refs/integrator/queue/main") == head


def test_candidate_folder_the_queue_also_changed_is_proven_again(tmp_path: Path) -> None:
    """The queue changed billing/ since the base (another file there): the merged folder
    is neither the base's nor the candidate's, so the landing walks it and lands only
    because every leaf it wrote is the candidate's or the queue head's own."""
    canon = make_canon(tmp_path)
    base = canon.ref("refs/integrator/queue/main")
    tax = canon.issue("tax", ["billing/tax.py"])
    invoice = canon.issue("invoice", ["billing/invoice.py"])
    c1 = canon.commit({"billing/tax.py": "tax = 2\n"})
    c2 = canon.commit({"billing/invoice.py": "invoice = 2\n"}, parent=base)
    assert canon.integrate(tax, c1).decision is Decision.ACCEPTED
    verdict = canon.integrate(invoice, c2)
    assert verdict.decision is Decision.ACCEPTED, verdict.violations
    assert canon.tree_of("main") == canon.tree_of(verdict.staging_commit or "")
