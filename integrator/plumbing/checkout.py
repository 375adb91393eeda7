"""Work trees of the canonical repository that have a branch checked out.

A ref moved under a work tree that has it checked out leaves that work tree's index and
files behind: `git status` there shows every landing reverted and staged, and a plain
`git commit` there reverts them. So integrator never moves a checked-out branch unless the
repository asks for its checkouts to be kept in step (`integrator.updateCheckout`, set by
`integrator init --update-checkout`), and then moves each such work tree with the ref, the
way `git merge --ff-only` would move it there: while the ref transaction holds its locks,
before it commits, the index and files go from the old commit to the new one
(`git read-tree -u -m old new`). Local changes to paths the move does not change are
carried over; a file that already holds exactly what lands (an agent's edit in a shared
checkout, landed) is taken as it is. Whatever would be overwritten — a different local
change to a path the move changes, an untracked file in the way — or git's index lock held
by someone else refuses the update, aborts the transaction, and nothing moves.

While an update is under way the work tree's own git folder holds `integrator-checkout`
(ref, old, new): a crash between the update and the ref's commit leaves the work tree on
the new commit and the ref on the old one, and the next move (or `integrator serve` at
start) finds the record and puts the work tree back on the ref (`repair`).

`KeptCheckouts` is the `transaction.RefWriter` that does all this around a local
`RefUpdater`; a transaction that moves no checked-out branch goes straight through.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from integrator import faults
from integrator.errors import CheckedOutError, CheckoutDirtyError, GitError
from integrator.files import atomic_write
from integrator.plumbing.git import last_line, run_git
from integrator.plumbing.transaction import RefOp, RefUpdater

UPDATE_CHECKOUT_CONFIG = "integrator.updateCheckout"
INTENT_FILE = "integrator-checkout"  # in a work tree's git folder while it is updated
HEADS = "refs/heads/"
ZERO_OID = "0" * 40
_FILE_MODES = ("100644", "100755")


@dataclass(frozen=True)
class Checkout:
    """A work tree whose HEAD is the branch `ref`."""

    ref: str
    path: Path


def checkouts(common_dir: Path, *, bare: bool) -> list[Checkout]:
    """Every work tree of the repository at `common_dir` that has a branch checked out
    (`git worktree list`): its main work tree unless `bare`, and each linked one. Detached
    HEADs check nothing out; a work tree whose folder is gone has nothing to keep."""
    worktrees = common_dir / "worktrees"
    if bare and not (worktrees.is_dir() and any(worktrees.iterdir())):
        return []  # no git process where there is nothing to list (the usual server)
    try:
        out = run_git(["worktree", "list", "--porcelain", "-z"], git_dir=common_dir).stdout
    except GitError as err:  # the host's trouble: nothing may move until it can be asked
        raise CheckoutDirtyError(f"cannot list the work trees of {common_dir}: {err}") from err
    found: list[Checkout] = []
    path: Path | None = None
    ref: str | None = None
    for field in [*out.split(b"\0"), b""]:
        if not field:  # the end of one work tree's record
            if path is not None and ref is not None and path.is_dir():
                found.append(Checkout(ref, path))
            path = ref = None
            continue
        key, _, value = field.decode("utf-8", "surrogateescape").partition(" ")
        if key == "worktree":
            path = Path(value)
        elif key == "branch":
            ref = value
        elif key in ("bare", "prunable"):
            path = None
    return found


def checked_out(common_dir: Path, ref: str, *, bare: bool) -> list[Checkout]:
    """The work trees that have `ref` checked out (none for a ref outside refs/heads/)."""
    if not ref.startswith(HEADS):
        return []
    return [c for c in checkouts(common_dir, bare=bare) if c.ref == ref]


def update(checkout: Checkout, old: str, new: str) -> None:
    """Bring the work tree's index and files from `old` to `new` (a two-way merge, as
    `git merge --ff-only` makes it: local changes elsewhere carried over, none overwritten);
    CheckoutDirtyError, with the work tree as it was, when it cannot."""
    cwd = checkout.path
    try:  # whatever fails here is that work tree's state, never a candidate's doing
        run_git(["update-index", "-q", "--ignore-submodules", "--refresh"], cwd=cwd, check=False)
        taken = _take_landed(checkout, old, new)
        proc = run_git(["read-tree", "-u", "-m", old, new], cwd=cwd, check=False)
        why = last_line(proc.stderr)
    except GitError as err:
        taken, proc, why = [], None, str(err)
    if proc is not None and proc.returncode == 0:
        return
    with contextlib.suppress(GitError):
        _index_info(checkout, [(path, before) for path, before, _ in taken])
    raise CheckoutDirtyError(
        f"{checkout.ref} is checked out in {checkout.path}, which cannot follow it from "
        f"{old[:12]} to {new[:12]} now: {why}. The move waits (nothing moved) until that "
        "work tree can take it: stash or discard the local change there, or commit it on "
        "another branch (a commit on the target itself would move it outside the queue)"
    )


Entry = tuple[str, str]  # (mode, blob) of an index entry; mode "0" removes it


def _take_landed(checkout: Checkout, old: str, new: str) -> list[tuple[bytes, Entry, Entry]]:
    """Stage each file the move changes whose work tree already holds exactly what lands
    (git would refuse to overwrite it, though nothing would change); (path, entry before,
    entry staged) for each, so that a refused update can put the index back."""
    cwd = checkout.path
    staged = set(_paths(["diff-index", "--cached", "--name-only", "-z", old, "--"], cwd))
    modified = set(_paths(["diff-files", "--name-only", "-z", "--"], cwd))
    raw = run_git(["diff-tree", "-r", "-z", "--no-renames", old, new], cwd=cwd).stdout
    fields = raw.split(b"\0")
    wanted: list[tuple[bytes, Entry, Entry]] = []
    for header, path in zip(fields[0::2], fields[1::2], strict=False):
        parts = header.decode("ascii", "replace").lstrip(":").split()
        if len(parts) < 5 or path in staged or b"\n" in path:
            continue  # read-tree keeps a staged entry that is the new one, refuses others
        mode_old, mode_new, blob_old, blob_new = parts[:4]
        if mode_new not in _FILE_MODES or (mode_old != "000000" and path not in modified):
            continue  # a deletion, a link, an unmodified file: read-tree updates it safely
        file = cwd / os.fsdecode(path)
        if file.is_symlink() or not file.is_file():
            continue
        if (mode_new == "100755") != bool(file.stat().st_mode & stat.S_IXUSR):
            continue
        before = ("0", ZERO_OID) if mode_old == "000000" else (mode_old, blob_old)
        wanted.append((path, before, (mode_new, blob_new)))
    if not wanted:
        return []
    listed = b"".join(path + b"\n" for path, _, _ in wanted)
    hashes = run_git(["hash-object", "--stdin-paths"], cwd=cwd, input=listed).stdout.split()
    taken = [w for w, h in zip(wanted, hashes, strict=False) if h.decode() == w[2][1]]
    _index_info(checkout, [(path, entry) for path, _, entry in taken])
    return taken


def _paths(args: list[str], cwd: Path) -> list[bytes]:
    return [p for p in run_git(args, cwd=cwd).stdout.split(b"\0") if p]


def _index_info(checkout: Checkout, entries: Sequence[tuple[bytes, Entry]]) -> None:
    """Set (or, mode "0", remove) index entries, as `git update-index --index-info`."""
    if entries:
        body = b"".join(f"{m} {b}\t".encode() + path + b"\0" for path, (m, b) in entries)
        run_git(["update-index", "-z", "--index-info"], cwd=checkout.path, input=body)


def local_path(url: str) -> Path | None:
    """The folder a git URL names on this host (a path, `file://`), None for any other."""
    if url.startswith("file://"):
        return Path(url.removeprefix("file://"))
    if "://" in url or ":" in url.split("/", 1)[0]:
        return None  # a server, or scp-like `host:path`
    return Path(url)


def server_refusal(url: str, target: str) -> str | None:
    """Why a server on this host would refuse every push of `target`: its repository has
    the target checked out and git's `receive.denyCurrentBranch` refuses to move it (its
    default). None when it will take them, or when the server is not a folder here (what
    a remote server's git does with its own checkouts cannot be seen from here)."""
    folder = local_path(url)
    if folder is None or not folder.is_dir():
        return None
    probe = run_git(["rev-parse", "--git-common-dir", "--is-bare-repository"], cwd=folder,
                    check=False)  # fmt: skip
    lines = probe.stdout.decode("utf-8", "surrogateescape").split()
    if probe.returncode != 0 or len(lines) != 2:
        return None
    common = (folder / lines[0]).resolve()
    found = checked_out(common, f"{HEADS}{target}", bare=lines[1] == "true")
    deny = run_git(["config", "--get", "receive.denyCurrentBranch"], git_dir=common, check=False)
    if not found or deny.stdout.decode().strip() in ("updateInstead", "ignore", "warn", "false"):
        return None
    return (
        f"the server's repository {folder} has {target} checked out in {found[0].path}, and "
        "git refuses pushes to a checked-out branch (receive.denyCurrentBranch): make it "
        "bare, check out another branch there, or let git keep that checkout in step "
        f"(git -C {folder} config receive.denyCurrentBranch updateInstead)"
    )


# -- the record of an update under way -------------------------------------------------------


def _git_folder(checkout: Checkout) -> Path:
    """The work tree's own git folder: `.git` itself, or where a linked one's `.git` file
    points."""
    dot = checkout.path / ".git"
    if dot.is_file():
        text = dot.read_text("utf-8", "surrogateescape").strip()
        return (checkout.path / text.removeprefix("gitdir:").strip()).resolve()
    return dot


def _intent(checkout: Checkout) -> Path:
    return _git_folder(checkout) / INTENT_FILE


def _begin(checkout: Checkout, old: str, new: str) -> None:
    try:
        atomic_write(_intent(checkout), f"{checkout.ref} {old} {new}\n".encode())
    except OSError as err:
        raise CheckoutDirtyError(
            f"cannot record the update of {checkout.path} in its git folder: {err.strerror}"
        ) from err


def _end(checkout: Checkout) -> None:
    with contextlib.suppress(OSError):
        _intent(checkout).unlink()


def repair(checkout: Checkout, now: str | None) -> str | None:
    """Finish what a crash interrupted: a work tree updated towards `new` whose ref stayed
    at `old` (`now`) is put back on `old` (CheckoutDirtyError when it cannot be: the record
    stays, and the move waits). Returns what was done, None when nothing was."""
    try:
        ref, old, new = _intent(checkout).read_text("utf-8").split()
    except (OSError, ValueError):
        return None
    if ref == checkout.ref and now == old and now != new:
        update(checkout, new, old)
        _end(checkout)
        return f"put {checkout.path} back on {ref} ({old[:12]}): its update was interrupted"
    _end(checkout)  # it completed (the ref is at new), or the ref went elsewhere since
    return None


# -- the ref writer --------------------------------------------------------------------------


def refusal(checkout: Checkout, repo: str | Path) -> CheckedOutError:
    """The error for a checked-out branch in a repository that did not opt in."""
    return CheckedOutError(
        f"{checkout.ref} is checked out in the work tree {checkout.path}: moving it there "
        "would leave that work tree's index and files behind (git status would show every "
        f"landing reverted). Check out another branch there (git -C {checkout.path} switch "
        "--detach) or use a bare repository, or keep the checkout in step with the target: "
        f"integrator init --repo {repo} --update-checkout"
    )


class KeptCheckouts:
    """A local `RefUpdater` that never leaves a checked-out branch behind its work tree.

    `keep` (the repository's `integrator.updateCheckout`): keep such work trees in step;
    otherwise a move of a checked-out branch raises CheckedOutError and nothing moves.
    """

    def __init__(
        self, inner: RefUpdater, common_dir: Path, *, bare: bool, keep: bool, repo: str | Path
    ) -> None:
        self.inner = inner
        self.common_dir = common_dir
        self.repo = repo  # as the user names it, for messages
        self.bare = bare
        self.keep = keep
        self.transactions = 0

    def checkouts(self, ref: str) -> list[Checkout]:
        """The work trees that have `ref` checked out."""
        return checked_out(self.common_dir, ref, bare=self.bare)

    def check(self, ref: str, at: str | None) -> list[Checkout]:
        """The work trees that have `ref` (now at `at`) checked out, each repaired; raises
        CheckedOutError when they are not to be kept in step, CheckoutDirtyError when an
        interrupted update cannot be undone."""
        found = self.checkouts(ref)
        for checkout in found:
            if not self.keep:
                raise refusal(checkout, self.repo)
            repair(checkout, at)
        return found

    def apply(self, ops: Sequence[RefOp], *, on_prepared: Callable[[], None] | None = None) -> None:
        steps: list[tuple[Checkout, str, str]] = []
        for op in ops:
            if op.verb == "verify" or not op.ref.startswith(HEADS):
                continue
            for checkout in self.check(op.ref, op.old):
                if op.verb != "update" or op.old is None or op.new is None:
                    raise CheckoutDirtyError(
                        f"{op.ref} is checked out in {checkout.path}: it is neither created "
                        "nor deleted while a work tree has it checked out"
                    )
                steps.append((checkout, op.old, op.new))
        if not steps:
            self.inner.apply(ops, on_prepared=on_prepared)
            self.transactions += 1
            return

        def prepared() -> None:
            if on_prepared is not None:
                on_prepared()
            done: list[tuple[Checkout, str, str]] = []
            try:
                for checkout, old, new in steps:
                    _begin(checkout, old, new)
                    update(checkout, old, new)
                    done.append((checkout, old, new))
            except BaseException:
                for checkout, old, new in reversed(done):  # back where the refs stay
                    with contextlib.suppress(CheckoutDirtyError):
                        update(checkout, new, old)
                        _end(checkout)
                for checkout, _, _ in steps[len(done) :]:
                    _end(checkout)
                raise
            faults.point("after-checkout")

        self.inner.apply(ops, on_prepared=prepared)
        self.transactions += 1
        for checkout, _, _ in steps:
            _end(checkout)

    def close(self) -> None:
        self.inner.close()
