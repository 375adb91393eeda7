"""What the server's pre-receive hook runs around `integrator.serverhook.decide.decide`: the
settings from the repository's git config, the key file, the server's symbolic refs, and
the store of signature nonces already used (docs/server-hook.md).
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from integrator import jsontext
from integrator.errors import ConfigurationError
from integrator.files import atomic_write
from integrator.limits import MAX_UPDATES, SUBMISSION_BYTES, SYMREF_PATTERNS
from integrator.plumbing import git
from integrator.plumbing.catfile import batch_objects
from integrator.plumbing.signing import DEFAULT_MAX_AGE, OPTION, Update, load_key
from integrator.refnames import QUEUE, ref_problem
from integrator.serverhook.decide import (
    IDENTITY_CHOICES,
    UNIX,
    HookVerdict,
    Settings,
    Submitted,
    classify,
    decide,
    parse_updates,
    push_options,
)
from integrator.store.spool import SUBMISSION_FILE

CONFIG_ALLOW = "integrator.hook.allow"
CONFIG_KEY_FILE = "integrator.hook.keyFile"
CONFIG_IDENTITY = "integrator.hook.identity"
CONFIG_MAX_AGE = "integrator.hook.maxAge"
CONFIG_REQUIRE_IDENTITY = "integrator.hook.requireIdentity"
CONFIG_TARGET = "integrator.target"
# Where `install --chain` moves a foreign pre-receive hook; the check runs it once accepted.
CHAINED = "pre-receive.chained"
NONCE_FOLDER = "integrator-hook"
_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0", ""}


def read_config(git_dir: Path) -> dict[str, list[str]]:
    """Every `integrator.*` setting in the repository's own config file (names lower-cased,
    as git reports them). Only that file: not the server account's global config, and not
    settings passed in the environment (GIT_CONFIG_PARAMETERS, GIT_CONFIG_COUNT)."""
    proc = git.run_git(
        [
            "--git-dir",
            str(git_dir),
            "config",
            "--local",
            "--null",
            "--get-regexp",
            r"^integrator\.",
        ],
        cwd=git_dir,
        check=False,
    )
    if proc.returncode not in (0, 1):  # 1: no such setting
        raise ConfigurationError(
            f"cannot read the git config of {git_dir}: {proc.stderr.decode(errors='replace').strip()}"
        )
    found: dict[str, list[str]] = {}
    for entry in proc.stdout.split(b"\0"):
        if entry:
            name, _, value = entry.decode("utf-8", "replace").partition("\n")
            found.setdefault(name, []).append(value)
    return found


def settings_from_config(config: Mapping[str, Sequence[str]]) -> Settings:
    """The hook's settings from `read_config`'s answer; a bad value is a ConfigurationError."""

    def last(name: str) -> str | None:
        values = config.get(name.lower())
        return values[-1] if values else None

    targets = tuple(config.get(CONFIG_TARGET.lower(), ())) or ("main",)
    for target in targets:
        if ref_problem(f"refs/heads/{target}"):
            raise ConfigurationError(f"{CONFIG_TARGET} {target!r} is not a branch name")
    key_file = last(CONFIG_KEY_FILE)
    identity = last(CONFIG_IDENTITY) or "auto"
    if identity not in IDENTITY_CHOICES:
        raise ConfigurationError(
            f"{CONFIG_IDENTITY} {identity!r} is not one of {', '.join(IDENTITY_CHOICES)}"
        )
    max_age = last(CONFIG_MAX_AGE) or str(DEFAULT_MAX_AGE)
    if not max_age.isdigit() or not 1 <= int(max_age) <= 86400:
        raise ConfigurationError(
            f"{CONFIG_MAX_AGE} {max_age!r} is not a number of seconds from 1 to 86400"
        )
    require = (last(CONFIG_REQUIRE_IDENTITY) or "false").lower()
    if require not in _TRUE | _FALSE:
        raise ConfigurationError(f"{CONFIG_REQUIRE_IDENTITY} {require!r} is not a boolean")
    return Settings(
        targets=targets,
        allow=tuple(config.get(CONFIG_ALLOW.lower(), ())),
        key=load_key(key_file) if key_file else None,
        identity_from=identity,
        max_age=int(max_age),
        require_identity=require in _TRUE,
    )


def queue_targets(git_dir: Path) -> list[str]:
    """The branches this repository has integrator queues for
    (`refs/integrator/queue/<branch>`, made by `integrator init`, moved by integrators
    only): the targets its integrator settings name, whatever the hook's config says."""
    proc = git.run_git(
        ["--git-dir", str(git_dir), "for-each-ref", "--format=%(refname)", "--", QUEUE],
        cwd=git_dir,
    )
    names = (
        line.removeprefix(QUEUE) for line in proc.stdout.decode("utf-8", "replace").split("\n")
    )
    return sorted(n for n in names if n and not ref_problem(f"refs/heads/{n}"))


def server_symrefs(git_dir: Path, names: Sequence[str] | None = None) -> dict[str, str]:
    """The server's symbolic refs (pushing to one moves the ref it points at): among `names`
    when given (at most `SYMREF_PATTERNS` of them, else every ref is listed)."""
    fmt = "%(if)%(symref)%(then)%(refname)%00%(symref)%(end)"
    patterns = list(names) if names is not None and len(names) <= SYMREF_PATTERNS else []
    args = ["--git-dir", str(git_dir), "for-each-ref", f"--format={fmt}", "--", *patterns]
    proc = git.run_git(args, cwd=git_dir)
    pairs = (line.split(b"\0", 1) for line in proc.stdout.split(b"\n") if b"\0" in line)
    found = {
        n.decode("utf-8", "surrogateescape"): t.decode("utf-8", "surrogateescape") for n, t in pairs
    }
    return {n: t for n, t in found.items() if not patterns or n in patterns}


class NonceStore:
    """The nonces of accepted signatures still inside their time window, one `<time> <nonce>`
    line each, read and rewritten under an exclusive lock so two replays cannot both pass."""

    def __init__(self, git_dir: Path) -> None:
        self.folder = git_dir / NONCE_FOLDER
        self.path = self.folder / "nonces"
        self.entries: dict[str, int] = {}
        self._lock = -1

    def __enter__(self) -> NonceStore:
        self.folder.mkdir(mode=0o700, exist_ok=True)
        self._lock = os.open(
            self.folder / "nonces.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600
        )
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        try:
            text = self.path.read_text("ascii")
        except FileNotFoundError:
            text = ""
        for line in text.splitlines():
            stamp, _, nonce = line.partition(" ")
            if stamp.isdigit() and nonce:
                self.entries[nonce] = int(stamp)
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self._lock)

    def record(self, nonce: str, stamp: int, *, now: int, max_age: int) -> None:
        self.entries = {n: s for n, s in self.entries.items() if now - s <= max_age}
        self.entries[nonce] = stamp
        body = "".join(f"{s} {n}\n" for n, s in sorted(self.entries.items(), key=lambda e: e[1]))
        atomic_write(self.path, body.encode("ascii"), sync=True, mode=0o600)


def read_submitted(
    git_dir: Path, env: Mapping[str, str], updates: Sequence[Update], targets: Sequence[str]
) -> dict[str, Submitted]:
    """What each created submission ref's commit says: its `submission.json`'s contract task
    and lease holder. Measured before it is read (at most SUBMISSION_BYTES, at most
    MAX_UPDATES refs, one `git cat-file` for all), read from the push's quarantine (git
    hands the hook its object folder in GIT_OBJECT_DIRECTORY)."""
    wanted = [
        u for u in updates
        if u.action == "create" and classify(u.ref, targets)[0] == "submit"
    ][:MAX_UPDATES]  # fmt: skip
    if not wanted:
        return {}
    extra = {
        name: env[name]
        for name in (
            "GIT_OBJECT_DIRECTORY",
            "GIT_ALTERNATE_OBJECT_DIRECTORIES",
            "GIT_QUARANTINE_PATH",
        )
        if name in env
    }
    specs = "".join(f"{u.new}:{SUBMISSION_FILE}\n" for u in wanted).encode()
    checked = git.run_git(["cat-file", "--batch-check"], cwd=git_dir, input=specs, env=extra)
    out: dict[str, Submitted] = {}
    readable: list[Update] = []
    for update, line in zip(
        wanted, checked.stdout.decode("utf-8", "replace").splitlines(), strict=False
    ):
        parts = line.split()
        if len(parts) != 3 or parts[1] != "blob" or not parts[2].isdigit():
            out[update.ref] = Submitted(problem=f"the commit holds no {SUBMISSION_FILE} file")
        elif int(parts[2]) > SUBMISSION_BYTES:
            out[update.ref] = Submitted(
                problem=f"{SUBMISSION_FILE} is over {SUBMISSION_BYTES} bytes"
            )
        else:
            readable.append(update)
    if readable:
        batch = "".join(f"{u.new}:{SUBMISSION_FILE}\n" for u in readable).encode()
        shown = git.run_git(["cat-file", "--batch"], cwd=git_dir, input=batch, env=extra)
        try:
            bodies = batch_objects(shown.stdout, len(readable))
        except ValueError:
            bodies = [None] * len(readable)
        for update, body in zip(readable, bodies, strict=True):
            out[update.ref] = _facts(body)
    return out


def _facts(body: bytes | None) -> Submitted:
    if body is None:
        return Submitted(problem=f"the commit holds no {SUBMISSION_FILE} file")
    try:
        doc = jsontext.loads(body)
    except ValueError:
        return Submitted(problem=f"{SUBMISSION_FILE} is not JSON")
    contract = doc.get("contract") if isinstance(doc, dict) else None
    lease = contract.get("lease") if isinstance(contract, dict) else None
    task = contract.get("taskId") if isinstance(contract, dict) else None
    holder = lease.get("holder") if isinstance(lease, dict) else None
    if not isinstance(task, str) or not isinstance(holder, str):
        return Submitted(problem="its contract names no task and lease holder")
    return Submitted(task=task, holder=holder)


def git_dir_of(env: Mapping[str, str], cwd: Path) -> Path:
    """The repository a hook runs in: git sets GIT_DIR (`.` in a bare repository)."""
    return (cwd / env.get("GIT_DIR", ".")).resolve()


def run_check(
    data: bytes,
    *,
    env: Mapping[str, str],
    git_dir: Path,
    settings: Settings | None = None,
    now: int | None = None,
) -> HookVerdict:
    """What the pre-receive hook does: decide with the repository's settings and state,
    and record the nonce of a signature that let the push through."""
    settings = settings or settings_from_config(read_config(git_dir))
    # A branch the repository has a queue for is a target whatever the config says (a hook
    # installed with another --target, or before `init` chose the branch).
    learned = [t for t in queue_targets(git_dir) if t not in settings.targets]
    if learned:
        settings = replace(settings, targets=(*settings.targets, *learned))
    now = int(time.time()) if now is None else now
    unix_user = None
    if settings.identity_from == UNIX:
        import pwd

        unix_user = pwd.getpwuid(os.geteuid()).pw_name
    updates, _problems = parse_updates(data)
    symrefs = server_symrefs(git_dir, [u.ref for u in updates if not ref_problem(u.ref)])
    submitted = read_submitted(
        git_dir, env, [u for u in updates if not ref_problem(u.ref)], settings.targets
    )
    signed = settings.key is not None and any(o.startswith(f"{OPTION}=") for o in push_options(env))
    if not signed:
        return decide(
            data, env=env, settings=settings, now=now, symrefs=symrefs, unix_user=unix_user,
            submitted=submitted,
        )  # fmt: skip
    with NonceStore(git_dir) as store:
        verdict = decide(
            data,
            env=env,
            settings=settings,
            now=now,
            used_nonces=store.entries,
            symrefs=symrefs,
            unix_user=unix_user,
            submitted=submitted,
        )
        if verdict.nonce is not None:
            stamp, nonce = verdict.nonce
            store.record(nonce, stamp, now=now, max_age=settings.max_age)
    return verdict


@dataclass(frozen=True)
class GivenSettings:
    """The hook's settings given on a command line (None: not given); they take the place
    of the repository's git config entries of the same name."""

    allow: tuple[str, ...] | None = None
    key_file: Path | None = None
    target: tuple[str, ...] | None = None
    identity_from: str | None = None
    max_age: int | None = None
    require_identity: bool = False

    def overrides(self) -> dict[str, list[str]]:
        """The settings given, as git config entries."""
        found: dict[str, list[str]] = {}
        if self.allow is not None:
            found[CONFIG_ALLOW] = list(self.allow)
        if self.key_file is not None:
            found[CONFIG_KEY_FILE] = [str(self.key_file.resolve())]
        if self.target is not None:
            found[CONFIG_TARGET] = list(self.target)
        if self.identity_from is not None:
            found[CONFIG_IDENTITY] = [self.identity_from]
        if self.max_age is not None:
            found[CONFIG_MAX_AGE] = [str(self.max_age)]
        if self.require_identity:
            found[CONFIG_REQUIRE_IDENTITY] = ["true"]
        return found


def merged(config: dict[str, list[str]], overrides: dict[str, list[str]]) -> dict[str, list[str]]:
    """The repository's config with `overrides` in place of its entries of the same names."""
    result = dict(config)
    result.update({name.lower(): values for name, values in overrides.items()})
    return result


def run_chained(hook: Path, data: bytes) -> bool | None:
    """Hand the hook's input to the hook it chains to: whether that one accepted; None when
    it is missing (or not executable)."""
    if not (hook.is_file() and os.access(hook, os.X_OK)):
        return None
    proc = subprocess.run([str(hook)], input=data, check=False)
    return proc.returncode == 0
