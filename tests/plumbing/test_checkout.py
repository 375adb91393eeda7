"""Work trees that have a branch checked out: listed, refused, or kept in step with the ref
under the transaction's locks (`integrator.plumbing.checkout`), on real repositories."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from integrator.errors import CheckedOutError, CheckoutDirtyError
from integrator.plumbing import transaction
from integrator.plumbing.checkout import Checkout, KeptCheckouts, checkouts
from integrator.plumbing.git import common_dir, open_repo
from tests.checkout_world import main_checkout, status
from tests.gitutil import commit_files, git, make_repo

MAIN = "refs/heads/main"


def _writer(path: Path, *, keep: bool) -> KeptCheckouts:
    repo = open_repo(path)
    inner = transaction.RefUpdater(repo.path)
    return KeptCheckouts(inner, common_dir(repo), bare=repo.is_bare, keep=keep, repo=path)


def _landing(path: Path, files: dict[str, str | None]) -> tuple[str, str]:
    """(old, new): main's commit and a new commit on it changing `files` (no ref moved)."""
    old = git("rev-parse", MAIN, cwd=path)
    return old, commit_files(path, files, "landing", parent=MAIN, ref=None)


def _locks(path: Path) -> list[Path]:
    return sorted((path / ".git").rglob("*.lock"))


def test_every_work_tree_on_a_branch_is_listed(tmp_path: Path) -> None:
    """The main work tree and linked ones on a branch are listed; a detached one, a bare
    repository's HEAD and a linked work tree whose folder is gone check nothing out."""
    path = main_checkout(tmp_path, keep=None).path
    git("branch", "other", cwd=path)
    git("worktree", "add", "-q", str(tmp_path / "on-other"), "other", cwd=path)
    git("worktree", "add", "-q", "--detach", str(tmp_path / "detached"), cwd=path)
    git("branch", "gone", cwd=path)
    git("worktree", "add", "-q", str(tmp_path / "gone"), "gone", cwd=path)
    shutil.rmtree(tmp_path / "gone")
    found = checkouts(common_dir(open_repo(path)), bare=False)
    assert found == [
        Checkout(MAIN, path.resolve()),
        Checkout("refs/heads/other", (tmp_path / "on-other").resolve()),
    ]
    bare = make_repo(tmp_path / "bare.git", bare=True)
    assert checkouts(bare, bare=True) == []


def test_a_checked_out_branch_is_not_moved_unless_kept(tmp_path: Path) -> None:
    """Not asked to keep it in step, a move of a checked-out branch is refused, naming the
    work tree and the ways out, and nothing moves; other refs still move."""
    path = main_checkout(tmp_path, keep=None).path
    old, new = _landing(path, {"docs/index.md": "# new\n"})
    writer = _writer(path, keep=False)
    with pytest.raises(CheckedOutError) as refused:
        writer.apply([transaction.update(MAIN, new, old)])
    assert str(path) in str(refused.value)
    assert "--update-checkout" in str(refused.value) and "switch --detach" in str(refused.value)
    assert git("rev-parse", MAIN, cwd=path) == old
    writer.apply([transaction.update("refs/heads/elsewhere", new, None)])
    writer.close()


def test_a_kept_checkout_moves_with_the_ref(tmp_path: Path) -> None:
    """Kept in step, the ref's move brings the index and files along (additions, edits,
    deletions), and a local change to a path the move does not touch is carried over."""
    path = main_checkout(tmp_path, keep=None).path
    old, new = _landing(path, {"docs/index.md": "# new\n", "docs/add.md": "a\n", "README.md": None})
    (path / "billing" / "invoice.py").write_text("invoice = 'mine'\n")
    writer = _writer(path, keep=True)
    writer.apply([transaction.update(MAIN, new, old)])
    writer.close()
    assert git("rev-parse", "HEAD", cwd=path) == new
    assert status(path) == "M billing/invoice.py"
    assert (path / "docs" / "index.md").read_text() == "# new\n"
    assert (path / "docs" / "add.md").read_text() == "a\n"
    assert not (path / "README.md").exists()
    assert not (path / ".git" / "integrator-checkout").exists()


@pytest.mark.parametrize("local", ["docs/index.md", "docs/add.md"], ids=["edit", "untracked"])
def test_a_move_that_would_overwrite_a_local_change_aborts(tmp_path: Path, local: str) -> None:
    """A local change to a path the move changes, or an untracked file in its way, refuses
    the update: the transaction aborts (ref unmoved, no lock left), the work tree and index
    are as they were, and the same move goes through once the change is gone."""
    path = main_checkout(tmp_path, keep=None).path
    old, new = _landing(path, {"docs/index.md": "# new\n", "docs/add.md": "a\n"})
    writer = _writer(path, keep=True)
    (path / local).write_text("mine\n")
    before = status(path)
    with pytest.raises(CheckoutDirtyError) as held:
        writer.apply([transaction.update(MAIN, new, old)])
    assert str(path) in str(held.value) and "nothing moved" in str(held.value)
    assert local in str(held.value)
    assert git("rev-parse", MAIN, cwd=path) == old
    assert _locks(path) == []
    assert status(path) == before
    assert (path / local).read_text() == "mine\n"
    if local == "docs/index.md":
        git("checkout", "--", local, cwd=path)
    else:
        (path / local).unlink()
    writer.apply([transaction.update(MAIN, new, old)])
    writer.close()
    assert status(path) == ""


def test_a_file_that_already_holds_what_lands_is_taken_as_it_is(tmp_path: Path) -> None:
    """A shared checkout's own edit, landed: files that already hold exactly the new content
    (an edit, a new untracked file, a deletion) do not stop the move, and are clean after
    it. A move refused for another path puts back the index entries it had taken."""
    path = main_checkout(tmp_path, keep=None).path
    old, new = _landing(path, {"docs/index.md": "# new\n", "docs/add.md": "a\n", "README.md": None})
    (path / "docs" / "index.md").write_text("# new\n")
    (path / "docs" / "add.md").write_text("a\n")
    (path / "README.md").unlink()
    (path / "billing" / "invoice.py").write_text("carried\n")
    writer = _writer(path, keep=True)
    writer.apply([transaction.update(MAIN, new, old)])
    assert status(path) == "M billing/invoice.py"
    other = commit_files(
        path, {"docs/index.md": "# other\n", "billing/invoice.py": "theirs\n"}, "x",
        parent=new, ref=None,
    )  # fmt: skip
    (path / "docs" / "index.md").write_text("# other\n")  # taken, then given back
    with pytest.raises(CheckoutDirtyError):  # it would overwrite the carried edit
        writer.apply([transaction.update(MAIN, other, new)])
    writer.close()
    assert git("diff", "--cached", "--name-only", cwd=path) == ""
    assert status(path) == "M billing/invoice.py\n M docs/index.md".lstrip()
