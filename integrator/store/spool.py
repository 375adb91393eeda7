"""The spool: a Maildir-style folder tree through which agents hand candidates to the daemon.

A producer builds a submission folder in `tmp/`, fsyncs it and `rename()`s it into `new/`;
the daemon claims it by renaming it into a folder of its own, `work/<id>/submission/`, and
files that folder (its verdict beside the submission, never inside it) under `accepted/`,
`fenced/`, `review/` or `rejected/`. Every move is one atomic rename of one folder, so a
submission is never half in one place and half in another. Folder names are generated here
(time-sortable plus random), never taken from anything a submitter wrote.

The submitter's folder stays the submitter's: it may plant links, folders or pipes in it,
or change it after the claim. So the daemon writes nothing into it, and reads from it only
through `read_submitted` (no links followed, regular files only, sizes checked first);
whatever it finds wrong there rejects that submission, never the queue behind it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import secrets
import shutil
import stat
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from integrator import jsontext
from integrator.documents.envelope import SUBMISSION_SCHEMA
from integrator.errors import ConfigurationError, InfrastructureError, UsageError
from integrator.files import atomic_write, fsync_dir, write_file
from integrator.limits import SUBMISSION_BYTES
from integrator.refnames import SUBMISSION_ID
from integrator.store.meta import META_FILE, SPOOL_SCHEMA, read_repo
from integrator.store.submitted import open_submitted, read_at_most_path, read_submitted

if TYPE_CHECKING:  # the models are the daemon's; `integrator submit` writes plain JSON
    from pydantic import ValidationError

    from integrator.documents.attempt_key import AttemptKey
    from integrator.documents.submission import Submission
    from integrator.documents.verdict import Decision

REJECTION_SCHEMA = "integrator.rejection.v1"

SUBMISSION_FILE = "submission.json"
VERDICT_FILE = "verdict.json"
REJECTION_FILE = "rejection.json"
BUNDLE_FILE = "candidate.bundle"
# Beside an urgent submission: lets the daemon order its drain by a stat, not a read. Only
# the order: what counts is the submission's own `urgent`.
URGENT_FILE = "urgent"
STRAY_ENTRY = "stray-entry"
SUBMITTED = "submission"  # the submitter's folder, inside the daemon's own
ATTEMPTS_FILE = "attempts.json"
LOCK_FILE = "daemon.lock"
BACKLOG = "mirror-backlog"

# Maildir's rule: a draft untouched for 36 hours was abandoned by its producer.
TMP_MAX_AGE = 36 * 3600.0

INBOX = ("tmp", "new", "work")
DECIDED = ("accepted", "fenced", "review", "rejected", "archived")
FOLDERS = (*INBOX, *DECIDED)
_FOLDER_OF = {"ACCEPTED": "accepted", "FENCED": "fenced", "REVIEW": "review"}


def folder_for(decision: Decision | None) -> str:
    """The folder a decided submission is filed in (None: rejected as malformed)."""
    return "rejected" if decision is None else _FOLDER_OF[decision.value]


ID_RE = SUBMISSION_ID  # 20260601T120000123456Z-0a1b2c3d (integrator.refnames)


def new_id(now: datetime | None = None) -> str:
    """A submission id: UTC time to the microsecond, then 32 random bits."""
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    return f"{moment:%Y%m%dT%H%M%S%f}Z-{secrets.token_hex(4)}"


def render_errors(err: ValidationError) -> list[str]:
    out = []
    for item in err.errors():
        where = ".".join(str(p) for p in item["loc"]) or "(document)"
        msg = "unknown field" if item["type"] == "extra_forbidden" else item["msg"]
        out.append(f"{where}: {msg}")
    return out


@dataclass(frozen=True)
class WorkFolder:
    """The daemon's folder of one submission in `work/` (`path`), holding the submitter's
    folder (`submitted`); `problem` says why it is not a submission at all."""

    sid: str
    path: Path
    problem: str | None = None

    @property
    def submitted(self) -> Path:
        return submitted(self.path)


def submitted(folder: Path) -> Path:
    """The submitter's folder inside a daemon folder (the folder itself in the layout
    before the daemon kept folders of its own)."""
    inner = folder / SUBMITTED
    try:
        return inner if stat.S_ISDIR(os.lstat(inner).st_mode) else folder
    except FileNotFoundError:
        return folder


class Spool:
    """The folder tree of one spool (see docs/daemon.md for the layout)."""

    def __init__(self, root: str | Path) -> None:
        # Absolute once, here: git runs in other folders (a bundle is written from the
        # agent's clone and imported in the canonical repository), and a path relative to
        # where the command started would name another file there.
        self.root = Path(root).absolute()
        self._root = str(self.root)
        self._plain: set[str] = set()  # names in new/ known not to be urgent

    def __repr__(self) -> str:
        return f"Spool({str(self.root)!r})"

    def folder(self, name: str) -> Path:
        return self.root / name

    @property
    def backlog(self) -> Path:
        return self.root / BACKLOG

    def ensure(self) -> Spool:
        """Create the layout (idempotent)."""
        self._make(*FOLDERS, BACKLOG)
        return self

    def _make(self, *names: str) -> None:
        """Create folders of the spool; ConfigurationError naming the spool when it cannot be."""
        if self.root.exists() and not self.root.is_dir():
            raise ConfigurationError(f"spool {self.root} is not a folder")
        try:
            for name in names:
                (self.root / name).mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ConfigurationError(f"cannot create spool {self.root}: {err.strerror}") from err

    def existing(self) -> Spool:
        """This spool, refused when its folder is not there (a mistyped --spool would
        otherwise read as an empty spool)."""
        if not self.root.is_dir():
            why = "is not a folder" if self.root.exists() else "does not exist"
            raise ConfigurationError(f"spool {self.root} {why}")
        return self

    def check(self) -> str | None:
        """Why the spool is not usable by the daemon, or None."""
        for name in (*FOLDERS, BACKLOG):
            path = self.root / name
            if not path.is_dir():
                return f"{path} is missing"
            if not os.access(path, os.W_OK | os.X_OK):
                return f"{path} is not writable"
        return None

    def entries(self, name: str) -> list[str]:
        """Names in a folder, in id order; dot files (editors, rsync) are not entries."""
        try:
            with os.scandir(self.root / name) as it:
                return sorted(e.name for e in it if not e.name.startswith("."))
        except FileNotFoundError:
            return []

    def urgent_first(self, names: list[str]) -> list[str]:
        """`names` of `new/` with those marked urgent first (each group in id order). Each
        name is looked at once: a flood costs one `lstat` per submission, not per batch."""
        urgent = []
        plain = self._plain
        if len(plain) > 200_000:
            plain.clear()
        for name in names:
            if name in plain:
                continue
            try:
                os.lstat(f"{self._root}/new/{name}/{URGENT_FILE}")
            except OSError:
                plain.add(name)
                continue
            urgent.append(name)
        if not urgent:
            return names
        marked = set(urgent)
        return urgent + [n for n in names if n not in marked]

    def depth(self) -> int:
        """How many submissions wait in `new/`."""
        return len(self.entries("new"))

    # -- producers ------------------------------------------------------------------------

    @contextlib.contextmanager
    def draft(self, now: datetime | None = None, *, sid: str | None = None) -> Iterator[Path]:
        """A fresh `tmp/<id>/` folder, removed again unless `publish` moved it; `sid` keeps
        an id chosen elsewhere (the intake's), which must be a valid one."""
        self._make("tmp", "new")
        if sid is not None and not ID_RE.match(sid):
            raise UsageError(f"{sid!r} is not a submission id")
        path = self.root / "tmp" / (sid or new_id(now))
        try:
            path.mkdir()
        except OSError as err:
            # A full disk is worth retrying; a folder we may not write to is not.
            full = err.errno in (errno.ENOSPC, errno.EDQUOT)
            kind = InfrastructureError if full else ConfigurationError
            raise kind(f"cannot write to spool {self.root}: {err.strerror}") from err
        try:
            yield path
        finally:
            if path.exists():
                shutil.rmtree(path, ignore_errors=True)

    def publish(
        self, draft: Path, submission: Submission | bytes | None, *, urgent: bool = False
    ) -> str:
        """Write the submission into `draft`, make it durable, and rename it into `new/`
        (raw bytes are written as they are, None writes nothing: the daemon's reader judges
        what it finds). `urgent` (or a model saying so) marks it for the priority lane."""
        if submission is not None:
            if isinstance(submission, bytes):
                data = submission
            else:
                data = submission.to_json().encode() + b"\n"
                urgent = urgent or bool(submission.urgent)
            write_file(draft / SUBMISSION_FILE, data, sync=True)
            if urgent:
                write_file(draft / URGENT_FILE, b"", sync=True)
        bundle = draft / BUNDLE_FILE
        if bundle.exists():
            with open(bundle, "rb") as fh:
                os.fsync(fh.fileno())
        fsync_dir(draft)
        target = self.root / "new" / draft.name
        os.rename(draft, target)
        fsync_dir(target.parent)
        return draft.name

    def submit(
        self, submission: Submission, now: datetime | None = None, *, key: AttemptKey | None = None
    ) -> str:
        """Publish a submission that carries no bundle; returns its id. With `key` (the
        attempt key issued with its contract) it is signed for the id it gets here."""
        with self.draft(now) as draft:
            if key is not None:
                from integrator.documents.submission import SubmissionSignature

                signature = key.signature(draft.name, submission.candidate)
                submission = submission.model_copy(
                    update={"signature": SubmissionSignature.model_validate(signature)}
                )
            return self.publish(draft, submission)

    def sweep_tmp(self, older_than: float = TMP_MAX_AGE) -> list[str]:
        """Remove drafts abandoned in `tmp/` (a producer that died before its rename)."""
        removed = []
        limit = time.time() - older_than
        for name in self.entries("tmp"):
            path = self.root / "tmp" / name
            with contextlib.suppress(FileNotFoundError):
                if path.lstat().st_mtime >= limit:
                    continue
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink()
                removed.append(name)
        return removed

    # -- the daemon's moves ----------------------------------------------------------------

    def _in(self, folder: str, name: str) -> str:
        # Plain strings on the per-candidate path: pathlib costs more than the syscalls.
        return f"{self._root}/{folder}/{name}"

    def claim(self, name: str) -> WorkFolder | None:
        """Move `new/<name>` into a daemon folder `work/<name>/`; None when another claimer
        got it first.

        An entry that is not a submission folder is wrapped in a folder with a fresh id, so
        it can be filed under `rejected/` without trusting its name.
        """
        source = self._in("new", name)
        try:
            is_folder = stat.S_ISDIR(os.lstat(source).st_mode)
        except FileNotFoundError:
            return None
        if not (is_folder and ID_RE.match(name)):
            return self._wrap(source, f"entry {name!r} in new/ is not a submission folder")
        holder = self._in("work", name)
        with contextlib.suppress(FileExistsError):  # left by a claim a crash interrupted
            os.mkdir(holder, 0o755)
        try:
            os.rename(source, f"{holder}/{SUBMITTED}")
        except FileNotFoundError:
            with contextlib.suppress(OSError):
                os.rmdir(holder)
            return None
        return WorkFolder(name, Path(holder))

    def working(self, sid: str) -> WorkFolder | None:
        """A folder already in `work/` (left there by a crash or a retry); None when a claim
        that a crash interrupted left nothing to decide."""
        path = Path(self._in("work", sid))
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            return None
        if not (ID_RE.match(sid) and stat.S_ISDIR(info.st_mode)):
            return self._wrap(str(path), f"entry {sid!r} in work/ is not a submission folder")
        entries = set(os.listdir(path))
        if STRAY_ENTRY in entries:
            return WorkFolder(sid, path, "an entry in new/ was not a submission folder")
        if SUBMITTED in entries:
            return WorkFolder(sid, path)
        if entries - {ATTEMPTS_FILE, VERDICT_FILE, REJECTION_FILE}:
            return self._adopt(sid, path)  # the layout before daemon folders: wrap it now
        # A claim interrupted between its mkdir and its rename: finish it, or forget it.
        with contextlib.suppress(OSError):
            os.rmdir(path)
        return self.claim(sid)

    def _adopt(self, sid: str, path: Path) -> WorkFolder:
        aside = self._in("work", f".adopt-{sid}")
        os.rename(path, aside)
        os.mkdir(path, 0o755)
        os.rename(aside, f"{path}/{SUBMITTED}")
        return WorkFolder(sid, path)

    def _wrap(self, source: str, problem: str) -> WorkFolder | None:
        sid = new_id()
        holder = self._in("work", sid)
        os.mkdir(holder, 0o755)
        try:
            os.rename(source, f"{holder}/{STRAY_ENTRY}")
        except FileNotFoundError:
            os.rmdir(holder)
            return None
        return WorkFolder(sid, Path(holder), problem)

    def attempts(self, sid: str) -> int:
        """How often deciding `sid` failed unexpectedly (kept across runs of the daemon)."""
        try:
            data = read_at_most_path(Path(self._in("work", sid)) / ATTEMPTS_FILE, 4096)
            doc = jsontext.loads(data)
        except (OSError, ValueError):
            return 0
        count = doc.get("attempts") if isinstance(doc, dict) else None
        return count if type(count) is int and count >= 0 else 0

    def record_attempt(self, sid: str, error: str) -> int:
        """Count one more unexpected failure of `sid` (in its daemon folder); the new count."""
        count = self.attempts(sid) + 1
        doc = {"attempts": count, "lastError": error[:2000]}
        atomic_write(
            Path(self._in("work", sid)) / ATTEMPTS_FILE,
            json.dumps(doc, ensure_ascii=True).encode() + b"\n",
            sync=False,
        )
        return count

    def load(self, folder: Path) -> tuple[Submission, bytes]:
        """Parse the submission in a daemon folder (or a submitter's folder itself);
        UsageError says what is malformed.

        `submission.json` must be a regular file of at most SUBMISSION_BYTES bytes and the
        bundle it names a regular file: anything else (a link, a folder, a pipe that would
        block the daemon) is the producer's mistake and rejects this submission only.
        """
        from pydantic import ValidationError

        from integrator.documents.submission import Submission

        inner = submitted(folder)
        raw = read_submitted(inner, SUBMISSION_FILE, SUBMISSION_BYTES)
        try:
            submission = Submission.model_validate_json(raw)
        except ValidationError as err:
            problems = "; ".join(render_errors(err))
            raise UsageError(
                f"{SUBMISSION_FILE} is not an {SUBMISSION_SCHEMA}: {problems}"
            ) from err
        if submission.bundle is not None:
            try:
                os.close(open_submitted(inner, submission.bundle)[0])  # regular, readable
            except UsageError as err:
                raise UsageError(
                    f"the submission names bundle {submission.bundle!r}, which is missing or "
                    f"unusable ({err})"
                ) from err
        return submission, raw

    def file(self, sid: str, destination: str, name: str, document: bytes) -> None:
        """Write `document` beside the submission, then move the folder to `destination`.

        A folder of that name already there (a producer copied a decided submission back
        into new/) is kept; this one is filed beside it under a suffixed name.
        """
        source = self._in("work", sid)
        write_file(f"{source}/{name}", document, sync=False)
        target = self._in(destination, sid)
        while True:
            try:
                os.rename(source, target)
                return
            except OSError as err:
                if err.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
            target = self._in(destination, f"{sid}.again-{secrets.token_hex(4)}")

    def move(self, sid: str, source: str, destination: str) -> Path:
        target = self.root / destination / sid
        os.rename(self.root / source / sid, target)
        return target

    def find(self, sid: str) -> tuple[str, Path] | None:
        """Which folder holds submission `sid` (None when it is nowhere)."""
        if not ID_RE.match(sid):
            return None
        for name in ("new", "work", *DECIDED):
            path = self.root / name / sid
            with contextlib.suppress(FileNotFoundError):
                if stat.S_ISDIR(os.lstat(path).st_mode):
                    return name, path
        return None

    # -- the daemon's lock and the spool's metadata -----------------------------------------

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the spool for one daemon; the kernel drops the lock when the process dies.

        The lock is on the spool folder itself, which cannot be swapped while it holds
        submissions (a lock on a file could be bypassed by deleting the file); `daemon.lock`
        only says which process holds it.
        """
        folder = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            try:
                fcntl.flock(folder, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError as err:
                try:
                    holder = (self.root / LOCK_FILE).read_text().strip() or "unknown"
                except OSError:
                    holder = "unknown"
                raise ConfigurationError(
                    f"another daemon (pid {holder}) serves {self.root}; stop it first"
                ) from err
            atomic_write(self.root / LOCK_FILE, f"{os.getpid()}\n".encode(), sync=False)
            yield
        finally:
            os.close(folder)

    def write_meta(self, repo: Path) -> None:
        doc = {"schema": SPOOL_SCHEMA, "repo": str(repo.resolve())}
        atomic_write(self.root / META_FILE, json.dumps(doc, indent=2).encode() + b"\n")

    def repo_path(self) -> Path | None:
        """The repository the daemon last served from this spool, if recorded."""
        return read_repo(self.root)


def rejection_document(sid: str, reason: str, at: datetime) -> bytes:
    doc = {
        "schema": REJECTION_SCHEMA,
        "submission": sid,
        "reason": reason,
        "rejectedAt": at.isoformat().replace("+00:00", "Z"),
    }
    return json.dumps(doc, indent=2, ensure_ascii=False).encode() + b"\n"
