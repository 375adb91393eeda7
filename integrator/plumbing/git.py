"""Every git effect goes through here: processes, ref transactions, repository setup.

Object reads and writes use pygit2 elsewhere (they cannot move authority); every git
process starts here, so the fence has one door: `run_git` for a bounded run, `open_git` for
a long-lived one (`transaction` and `packs` speak to theirs), both in `git_env()`.

pygit2 is imported inside the few functions that need it at run time, so that a command
which only runs git processes (`integrator submit`) starts without loading libgit2.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NamedTuple

from integrator.errors import ConfigurationError, GitError, GitTimeoutError, InfrastructureError

if TYPE_CHECKING:
    import pygit2

ZERO_OID = "0" * 40

# Settings written by `integrator init` so an accepted landing survives a power cut: git's
# default `core.fsync` (committed,-loose-object) fsyncs neither refs nor loose objects.
# Objects that integrator writes itself through libgit2 (staging and claim commits) are
# flushed by one syncfs() before each ref transaction (see `sync_objects`), which costs
# one call per landing instead of one fsync per object.
DURABLE_CONFIG: dict[str, str] = {
    "core.fsync": "objects,reference,derived-metadata",
    "core.fsyncMethod": "fsync",
    "integrator.durable": "true",
    # Concurrent integrators queue on a ref lock for up to a second instead of failing.
    "core.filesRefLockTimeout": "1000",
    "merge.renameLimit": "10000",
}

_GIT_ENV_DROP = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY")


def git_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _GIT_ENV_DROP}
    env.setdefault("GIT_TERMINAL_PROMPT", "0")
    env["LC_ALL"] = "C"
    return env


# A local git that runs this long is stuck (a lock on a hung disk, a hook that waits): its
# caller gets an error instead of waiting for ever. Callers that talk to a server pass theirs.
LOCAL_TIMEOUT = 3600.0
STDERR_LIMIT = 500  # characters of git's stderr that an error message quotes, at most


def bounded(text: str, limit: int = STDERR_LIMIT) -> str:
    """`text` stripped, cut to at most `limit` characters (git's stderr is not ours to size)."""
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def last_line(stderr: bytes, default: str = "no message") -> str:
    """The last line git wrote to stderr (where it says why), bounded; `default` when none."""
    lines = stderr.decode("utf-8", "replace").strip().splitlines()
    return bounded(lines[-1]) if lines else default


def server_said(stderr: bytes, default: str = "no message") -> str:
    """Why a server refused: every `remote:` line (where its hooks say why) and git's own
    last line, joined and bounded; `default` when git wrote nothing."""
    lines = stderr.decode("utf-8", "replace").strip().splitlines()
    said = [line[len("remote:") :].strip() for line in lines if line.startswith("remote:")]
    said = [line for line in said if line]
    last = lines[-1] if lines else default
    return bounded("; ".join([*said, last]) if said and last not in said else last)


def _spawn_args(
    args: Sequence[str],
    cwd: str | Path | None,
    git_dir: str | Path | None,
    env: Mapping[str, str] | None,
    index_file: str | Path | None,
) -> tuple[list[str], str | Path, dict[str, str]]:
    """argv, folder and environment of one git: always `git_env()`, plus what the caller adds."""
    if cwd is None and git_dir is None:
        raise ValueError("a git process needs cwd or git_dir")
    environment = git_env()
    environment.update(env or {})
    if index_file is not None:
        environment["GIT_INDEX_FILE"] = str(index_file)
    prefix = [f"--git-dir={git_dir}"] if git_dir is not None else []
    folder = cwd if cwd is not None else git_dir
    assert folder is not None
    return ["git", *prefix, *args], folder, environment


GitRun = subprocess.CompletedProcess[bytes]  # what `run_git` returns: argv, code, stdout, stderr


def run_git(
    args: Sequence[str],
    *,
    cwd: str | Path | None = None,
    git_dir: str | Path | None = None,
    input: bytes | None = None,
    timeout: float | None = LOCAL_TIMEOUT,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    index_file: str | Path | None = None,
) -> GitRun:
    """Run one git command to its end: the one door every bounded git run goes through.

    It runs in `cwd` (else in `git_dir`), with `--git-dir=<git_dir>` when that is given, in
    `git_env()` plus `env`; `index_file` points git at a private index (GIT_INDEX_FILE).
    stdin is `input`, or empty: a git never reads the caller's terminal. Past `timeout`
    seconds git is killed and reaped, and GitTimeoutError raised (callers that talk to a
    server say which); with `check`, an exit other than 0 is a GitError quoting the last line
    of git's stderr, bounded. No git on PATH is a ConfigurationError.
    """
    argv, folder, environment = _spawn_args(args, cwd, git_dir, env, index_file)
    try:  # no input: an empty pipe, so git reads end-of-file, never the caller's terminal
        proc = subprocess.run(
            argv, cwd=folder, input=input or b"", capture_output=True, env=environment,
            check=False, timeout=timeout,
        )  # fmt: skip
    except FileNotFoundError as err:
        raise ConfigurationError("git is not installed or not on PATH") from err
    except subprocess.TimeoutExpired as err:  # subprocess.run killed and reaped it
        raise GitTimeoutError(f"git {args[0]} timed out after {timeout:g}s") from err
    if check and proc.returncode != 0:
        raise GitError(f"git {args[0]} failed: {last_line(proc.stderr, str(proc.returncode))}")
    return proc


class GitProcess:
    """A long-lived git (`update-ref --stdin`, `cat-file --batch`, `repack`, `pack-objects`)
    that its caller speaks to through pipes; `wait` and `finish` take a bound."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self._proc = proc
        self.pid = proc.pid
        self.stdin: IO[bytes] | None = proc.stdin
        self.stdout: IO[bytes] | None = proc.stdout
        self.stderr: IO[bytes] | None = proc.stderr

    def poll(self) -> int | None:
        """The exit code, or None while git runs."""
        return self._proc.poll()

    def wait(self, timeout: float | None = None) -> int | None:
        """The exit code, or None when git still runs after `timeout` seconds."""
        try:
            return self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def finish(self, timeout: float) -> int:
        """Close git's stdin (its end of input) and give it `timeout` seconds to exit, then
        kill it; the exit code (negative: the signal that ended it). git is reaped."""
        with contextlib.suppress(OSError):
            if self.stdin is not None:
                self.stdin.close()
        code = self.wait(timeout)
        if code is None:
            self._proc.kill()
            code = self._proc.wait()
        return code


def open_git(
    args: Sequence[str],
    *,
    cwd: str | Path | None = None,
    git_dir: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    pipes: bool = True,
) -> GitProcess:
    """Start a long-lived git, as `run_git` would run it (folder, `--git-dir`, environment);
    stdin, stdout and stderr are pipes, or with `pipes=False` all three /dev/null.

    No git on PATH is a ConfigurationError, any other failure to start it a GitError.
    """
    argv, folder, environment = _spawn_args(args, cwd, git_dir, env, None)
    stream = subprocess.PIPE if pipes else subprocess.DEVNULL
    try:
        proc = subprocess.Popen(
            argv, cwd=folder, stdin=stream, stdout=stream, stderr=stream, env=environment
        )
    except FileNotFoundError as err:
        raise ConfigurationError("git is not installed or not on PATH") from err
    except OSError as err:
        raise GitError(f"cannot start git {args[0]}: {err.strerror or err}") from err
    return GitProcess(proc)


def open_repo(path: str | Path) -> pygit2.Repository:
    """Open a repository (bare or not) at `path`, or raise a usable error."""
    import pygit2

    try:
        return pygit2.Repository(str(path))
    except (pygit2.GitError, KeyError) as err:
        raise ConfigurationError(f"{path} is not a git repository") from err


def git_dir(repo: pygit2.Repository) -> Path:
    return Path(repo.path)


def common_dir(repo: pygit2.Repository) -> Path:
    """The shared `.git` folder (the same for every worktree of a repository)."""
    gd = Path(repo.path)
    commondir = gd / "commondir"
    if commondir.exists():
        return (gd / commondir.read_text().strip()).resolve()
    return gd


def ref_target(repo: pygit2.Repository, name: str) -> str | None:
    """The OID a ref points at (peeled through symbolic refs), or None when absent."""
    import pygit2

    ref = repo.references.get(name)
    if ref is None:
        return None
    try:
        return str(ref.resolve().target)
    except (pygit2.GitError, KeyError):
        return None


def refs_under(repo: pygit2.Repository, prefix: str) -> dict[str, str]:
    """The OID of each ref whose name starts with `prefix` (peeled through symbolic refs)."""
    return refs_under_each(repo, (prefix,))[0]


def refs_under_each(repo: pygit2.Repository, prefixes: Sequence[str]) -> list[dict[str, str]]:
    """`refs_under` of each of `prefixes` (none a prefix of another) in one pass over the
    refs: each loose ref is a file read, so a listing costs the repository's ref count."""
    import pygit2

    out: list[dict[str, str]] = [{} for _ in prefixes]
    for ref in repo.references.iterator():
        index = next((i for i, p in enumerate(prefixes) if ref.name.startswith(p)), None)
        with contextlib.suppress(pygit2.GitError, KeyError):
            if index is not None:
                out[index][ref.name] = str(ref.resolve().target)
    return out


def resolve_commit(repo: pygit2.Repository, rev: str) -> pygit2.Commit:
    import pygit2

    try:
        obj = repo.revparse_single(rev)
        commit = obj.peel(pygit2.Commit)
    except (KeyError, ValueError, pygit2.GitError) as err:
        raise ConfigurationError(f"{rev!r} does not name a commit in {repo.path}") from err
    assert isinstance(commit, pygit2.Commit)
    return commit


def rev_parse_commit(path: str | Path, rev: str) -> str:
    """The id of the commit `rev` names in the repository at `path`, through `git rev-parse`."""
    if not Path(path).is_dir():
        raise ConfigurationError(f"{path} is not a folder")
    proc = run_git(
        ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"],
        cwd=path,
        check=False,
    )
    if proc.returncode != 0:
        why = proc.stderr.decode("utf-8", "replace").strip()
        if "not a git repository" in why:
            raise ConfigurationError(f"{path} is not a git repository")
        raise ConfigurationError(f"{rev!r} does not name a commit in {path}")
    return proc.stdout.decode().strip()


def config_blob(repo_path: str | Path, oid: str) -> list[tuple[str, str]] | None:
    """(key, value) pairs of a blob read as git config by git itself (`config --blob`),
    in file order; None when git cannot read it as config."""
    proc = run_git(["config", "--blob", oid, "--list", "--null"], cwd=repo_path, check=False)
    if proc.returncode != 0:
        return None
    pairs = []
    for item in proc.stdout.split(b"\0"):
        if item:
            key, _, value = item.decode("utf-8", "surrogateescape").partition("\n")
            pairs.append((key, value))
    return pairs


def object_kind(repo: pygit2.Repository, oid: str, *, strict: bool = False) -> str | None:
    """ "commit", "tree", "blob" or "tag" for an object here, None when there is none.
    `strict`: an object store that cannot be read (an I/O error, a pack it may not open) is
    an InfrastructureError, not an absent object."""
    import pygit2

    try:
        kind = repo.odb.read_header(oid)[0]
    except (KeyError, ValueError):
        return None
    except pygit2.GitError as err:
        if strict:
            raise InfrastructureError(f"cannot read the object store: {err}", kind="disk") from err
        return None
    return {
        pygit2.enums.ObjectType.COMMIT: "commit",
        pygit2.enums.ObjectType.TREE: "tree",
        pygit2.enums.ObjectType.BLOB: "blob",
        pygit2.enums.ObjectType.TAG: "tag",
    }.get(kind)


def has_object(repo: pygit2.Repository, oid: str) -> bool:
    import pygit2

    try:
        return bool(repo.odb.exists(oid))
    except (ValueError, pygit2.GitError):
        return False


def shallow_boundary(repo: pygit2.Repository) -> frozenset[str]:
    """Commits where a shallow clone's history is cut (they show no parents)."""
    if not repo.is_shallow:
        return frozenset()
    try:
        text = (common_dir(repo) / "shallow").read_text()
    except OSError:
        return frozenset()
    return frozenset(line.strip() for line in text.splitlines() if line.strip())


def repo_identity(repo: pygit2.Repository, rev: str = "HEAD") -> str | None:
    """`sha256:` of the repository's identity, or None when it cannot be derived here.

    `integrator init` records it in `integrator.repoId`; before that it is derived from the
    root commit on the first-parent chain of `rev` (or of HEAD), so every full clone agrees
    on it. A shallow clone cannot see its root: without a configured id, it is unknown.
    """
    import pygit2

    configured = repo.config.get_multivar("integrator.repoId")
    for value in configured:
        return str(value)
    commit = None
    for candidate in (rev, "HEAD"):
        try:
            commit = resolve_commit(repo, candidate)
            break
        except ConfigurationError:
            continue
    if commit is None:
        return None
    boundary = shallow_boundary(repo)
    while commit.parent_ids or str(commit.id) in boundary:
        if str(commit.id) in boundary:
            return None  # the history is cut (shallow clone): the root is not here
        parent = commit.parent_ids[0]
        if not has_object(repo, str(parent)):
            return None
        nxt = repo[parent]
        assert isinstance(nxt, pygit2.Commit)
        commit = nxt
    seed = f"integrator.repo.v1\n{commit.id}".encode()
    import hashlib

    return "sha256:" + hashlib.sha256(seed).hexdigest()


def config_flag(repo: pygit2.Repository, key: str) -> bool:
    """A boolean setting of `repo`'s config, as git reads one (false when unset)."""
    for value in repo.config.get_multivar(key):
        return str(value).lower() in ("true", "yes", "1", "on")
    return False


def durable(repo: pygit2.Repository) -> bool:
    return config_flag(repo, "integrator.durable")


# ctypes, hashlib and tempfile are imported where they are used: the write guard imports this
# module for run_git alone, before every write an agent makes.


@functools.cache
def _libc() -> Any:
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


# syncfs(2) flushes a whole filesystem: every dirty file and directory entry on it.
HAS_SYNCFS = sys.platform.startswith("linux")


def _sync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        if HAS_SYNCFS:
            if _libc().syncfs(fd) != 0:
                import ctypes

                err = ctypes.get_errno()
                raise GitError(f"syncfs on {folder} failed: {os.strerror(err)}")
        else:
            os.fsync(fd)
    finally:
        os.close(fd)


def sync_objects(repo: pygit2.Repository) -> None:
    """Flush the filesystem holding the object store (Linux syncfs; fsync of the folder elsewhere).

    Called before a ref transaction so the objects a new ref names are on disk before the
    ref is: git then fsyncs the ref itself (core.fsync=reference).
    """
    _sync_folder(common_dir(repo) / "objects")


def sync_refs(repo: pygit2.Repository) -> None:
    """Flush the filesystem holding the loose refs (Linux only: see `RefUpdater`)."""
    if not HAS_SYNCFS:
        raise GitError("flushing refs after the fact needs syncfs (Linux)")
    _sync_folder(common_dir(repo) / "refs")


def set_config(repo: pygit2.Repository, values: dict[str, str]) -> None:
    for key, value in values.items():
        repo.config[key] = value


# Free space an import or a landing needs beyond its own objects (temporary packs, indexes).
_SPARE_BYTES = 64 * 1024 * 1024


def host_trouble(repo: pygit2.Repository, need: int = 0) -> str | None:
    """Why this host cannot import `need` bytes now (full disk, read-only or unwritable
    object store), or None when it can: asked of the host, not of git's message."""
    return store_trouble(common_dir(repo) / "objects", need)


def store_trouble(objects: Path, need: int = 0) -> str | None:
    """`host_trouble` of the object store at `objects`."""
    try:
        fs = os.statvfs(objects)
    except OSError as err:
        return f"cannot stat the object store: {err.strerror}"
    if fs.f_flag & os.ST_RDONLY:
        return "the object store is on a read-only file system"
    free = fs.f_bavail * fs.f_frsize
    if free < need + _SPARE_BYTES:
        return f"only {free} bytes free for the object store"
    import tempfile

    try:
        fd, probe = tempfile.mkstemp(prefix="tmp_probe_", dir=objects)
    except OSError as err:
        return f"cannot write to the object store: {err.strerror}"
    os.close(fd)
    os.unlink(probe)
    return None


# --- merges ------------------------------------------------------------------------------


class MergeTreeResult(NamedTuple):
    tree: str | None
    conflicts: tuple[str, ...]
    messages: str


def merge_tree(repo_path: str | Path, ours: str, theirs: str) -> MergeTreeResult:
    """`git merge-tree --write-tree --name-only` over two commits.

    Exit 1 means conflicts *or* a missing object, so stdout must start with a tree OID.
    """
    proc = run_git(
        ["merge-tree", "--write-tree", "--name-only", "--no-messages", ours, theirs],
        cwd=repo_path,
        check=False,
    )
    out = proc.stdout.decode("utf-8", "surrogateescape").splitlines()
    if not out or not re.fullmatch(r"[0-9a-f]{40,64}", out[0]):
        err = proc.stderr.decode("utf-8", "replace").strip()
        raise GitError(f"git merge-tree failed: {err or 'no tree written'}")
    if proc.returncode == 0:
        return MergeTreeResult(out[0], (), "")
    conflicts = tuple(dict.fromkeys(line for line in out[1:] if line))
    return MergeTreeResult(None, conflicts, proc.stderr.decode("utf-8", "replace"))
