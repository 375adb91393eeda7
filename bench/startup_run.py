"""Commands an agent or a CI job starts for every event: their wall time against git's own.

- The write guard runs before every file write an agent makes: `python -m integrator guard`
  on real Claude Code events (a write inside the contract, one outside, a shell command),
  against `python -c pass` of the same interpreter — the hook's floor, whatever the guard
  does.
- `integrator --help`, `--version` and `status` (the overview, answered by the daemon
  serving the spool; and read by the command itself, for comparison) against the same.
- `integrator gate` on a 10-file commit of a real tree — the Python standard library this
  interpreter ships, its first 4,500 files — against `git diff-tree -r -M` plus
  `git merge-tree --write-tree` on the same commits.

Each command runs `ROUNDS` times, interleaved with its baseline so that a busy moment of the
machine lands on both; the figures are medians of wall time, and beside them of CPU time
(user + system of the process and the git processes it waited for, from getrusage), which a
shared machine's other load disturbs far less.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from bench.report import percentile

ROUNDS = 25
STDLIB_FILES = 4_500
EDITED = 10
ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}


@dataclass
class Timing:
    """Wall milliseconds of one command and of its baseline, round by round."""

    command_ms: list[float] = field(default_factory=list)
    baseline_ms: list[float] = field(default_factory=list)
    command_cpu_ms: list[float] = field(default_factory=list)
    baseline_cpu_ms: list[float] = field(default_factory=list)

    @property
    def p50(self) -> float:
        return percentile(self.command_ms, 50)

    @property
    def baseline_p50(self) -> float:
        return percentile(self.baseline_ms, 50)

    @property
    def cpu_ratio(self) -> float:
        floor = percentile(self.baseline_cpu_ms, 50)
        return percentile(self.command_cpu_ms, 50) / floor if floor else float("nan")


@dataclass
class StartupResult:
    guard: dict[str, Timing]
    gate: Timing
    gate_files: int
    answers: dict[str, str]  # what each guard event was answered, to show it decided
    serve: Timing = field(default_factory=Timing)  # `serve --once` on an empty spool
    cli: dict[str, Timing] = field(default_factory=dict)  # --help, --version, status


def _env() -> dict[str, str]:
    return {**os.environ, **ENV}


def _git(cwd: Path, *args: str, data: bytes | None = None) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=cwd, input=data, capture_output=True, env=_env(), check=True
    )
    return proc.stdout.decode().strip()


def _integrator(
    *args: str, cwd: Path, data: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "integrator", *args],
        cwd=cwd, input=data, capture_output=True, env=_env(), check=False,
    )  # fmt: skip


def _checked(done: subprocess.CompletedProcess[bytes]) -> None:
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, done.args))}: {done.stderr.decode()}")


def _timed(run: Callable[[], object]) -> tuple[float, float]:
    """Wall and CPU milliseconds of `run` (CPU: of the child processes it waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    run()
    wall = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return wall, cpu


def _interleaved(
    command: Callable[[], object], baseline: Callable[[], object], rounds: int
) -> Timing:
    timing = Timing()
    command()  # warm the page cache and the byte-code caches once, unmeasured
    baseline()
    for _ in range(rounds):
        wall, cpu = _timed(command)
        timing.command_ms.append(wall)
        timing.command_cpu_ms.append(cpu)
        wall, cpu = _timed(baseline)
        timing.baseline_ms.append(wall)
        timing.baseline_cpu_ms.append(cpu)
    return timing


def _bound_worktree(work: Path) -> Path:
    """A repository whose worktree `.trees/alice` is bound to task CODE (`src/**`)."""
    repo = work / "guarded"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    (repo / "src").mkdir()
    (repo / "src" / "a.py").write_text("a\n")
    (repo / "docs").mkdir()
    (repo / "docs" / "x.md").write_text("x\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "init")
    _checked(_integrator("task", "init", cwd=repo))
    (repo / ".agents" / "workspaces.toml").write_text('[agents.alice]\nworkspace = "alice"\n')
    task = repo / "code.md"
    task.write_text("---\nid: CODE\nowns: [src/**]\nrequires_filesystem: true\n---\n# Code\n")
    _checked(_integrator("task", "add", str(task), cwd=repo))
    _checked(_integrator("task", "claim", "--agent", "alice", "--json", cwd=repo))
    worktree = repo / ".trees" / "alice"
    if not worktree.is_dir():
        raise RuntimeError(f"task claim made no worktree at {worktree}")
    return worktree


def _claude(tool: str, tool_input: dict[str, object], cwd: Path) -> bytes:
    return json.dumps({
        "session_id": "bench", "transcript_path": "/dev/null", "cwd": str(cwd),
        "permission_mode": "default", "hook_event_name": "PreToolUse",
        "tool_name": tool, "tool_input": tool_input, "tool_use_id": "toolu_bench",
    }).encode()  # fmt: skip


def guard_phase(work: Path, rounds: int = ROUNDS) -> tuple[dict[str, Timing], dict[str, str]]:
    worktree = _bound_worktree(work)
    events = {
        "write inside the contract": _claude(
            "Write", {"file_path": str(worktree / "src/new.py"), "content": "x"}, worktree
        ),
        "write outside the contract": _claude(
            "Write", {"file_path": str(worktree / "docs/new.md"), "content": "x"}, worktree
        ),
        "shell command (not mediated)": _claude("Bash", {"command": "ls -la"}, worktree),
    }
    floor = [sys.executable, "-c", "pass"]
    out: dict[str, Timing] = {}
    answers: dict[str, str] = {}
    for name, event in events.items():
        done = _integrator("guard", cwd=worktree, data=event)
        answers[name] = "deny" if b'"deny"' in done.stdout else "allow"
        out[name] = _interleaved(
            partial(_integrator, "guard", cwd=worktree, data=event),
            partial(subprocess.run, floor, check=True),
            rounds,
        )
    return out, answers


def _stdlib_files(limit: int) -> list[Path]:
    """The first `limit` files of the standard library, its packages included (all of
    them: a folder's order is sorted, so the tree is the same on every run)."""
    root = Path(sysconfig.get_paths()["stdlib"])
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            path = Path(folder) / name
            if path.is_file() and not path.is_symlink():
                found.append(path)
        if len(found) >= limit:
            break
    return found[:limit]


def _stdlib_repository(work: Path) -> tuple[Path, str, str, str]:
    """A repository of the stdlib's first files, and a 10-file candidate in one package."""
    repo = work / "stdlib"
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    root = Path(sysconfig.get_paths()["stdlib"])
    files = _stdlib_files(STDLIB_FILES)
    for path in files:
        dest = repo / path.relative_to(root)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "the standard library")
    base = _git(repo, "rev-parse", "HEAD")
    by_folder: dict[Path, list[Path]] = {}
    for path in files:
        by_folder.setdefault(path.relative_to(root).parent, []).append(path.relative_to(root))
    folder = next(f for f, paths in sorted(by_folder.items()) if len(paths) >= EDITED and f.parts)
    for relative in by_folder[folder][:EDITED]:
        with open(repo / relative, "a", encoding="utf-8", errors="surrogateescape") as out:
            out.write("\n# edited\n")
    _git(repo, "commit", "-qam", "ten edits")
    candidate = _git(repo, "rev-parse", "HEAD")
    _git(repo, "reset", "-q", "--hard", base)
    return repo, base, candidate, folder.as_posix()


def gate_phase(work: Path, rounds: int = ROUNDS) -> tuple[Timing, int]:
    repo, base, candidate, folder = _stdlib_repository(work)
    _checked(_integrator("init", "--repo", str(repo), "--update-checkout", cwd=repo))
    contract = work / "contract.json"
    _checked(_integrator("contract", "issue", "--repo", str(repo), "--task", "stdlib-edit",
                         "--path", f"{folder}/**", "--base", base, "--lease", "2h",
                         "-o", str(contract), cwd=repo))  # fmt: skip
    gate = ("gate", "--repo", str(repo), "--contract", str(contract), "--candidate", candidate)
    first = _integrator(*gate, "--json", cwd=repo)
    if json.loads(first.stdout)["decision"] != "ACCEPTED":
        raise RuntimeError(f"the bench candidate is not accepted: {first.stdout.decode()}")

    def plain() -> None:
        _git(repo, "diff-tree", "-r", "-M", base, candidate)
        _git(repo, "merge-tree", "--write-tree", base, candidate)

    timing = _interleaved(partial(_integrator, *gate, cwd=repo), plain, rounds)
    files = int(_git(repo, "ls-tree", "-r", "--name-only", base).count("\n")) + 1
    return timing, files


def _served_repository(work: Path) -> Path:
    """A bare repository of one empty commit, prepared by `integrator init`."""
    repo = work / "served.git"
    work.mkdir(parents=True, exist_ok=True)
    _git(work, "init", "-q", "--bare", "-b", "main", str(repo))
    empty = _git(repo, "hash-object", "-t", "tree", "-w", "--stdin", data=b"")
    root = _git(repo, "commit-tree", "-m", "root", empty)
    _git(repo, "update-ref", "refs/heads/main", root)
    _checked(_integrator("init", "--repo", str(repo), cwd=work))
    return repo


def _serve_command(repo: Path, spool: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "integrator", "serve", "--repo", str(repo), "--spool",
            str(spool), "--no-watch", "--log-format", "json", *extra]  # fmt: skip


def serve_phase(work: Path, rounds: int = ROUNDS) -> Timing:
    """`integrator serve --once` on an empty spool (the daemon's start-up: imports, the
    repository and spool opened, recovery, exit) against `python -c pass`."""
    repo = _served_repository(work)
    command = _serve_command(repo, work / "spool", "--once")
    _checked(subprocess.run(command, cwd=work, capture_output=True, env=_env(), check=False))
    return _interleaved(
        partial(subprocess.run, command, cwd=work, capture_output=True, env=_env(), check=True),
        partial(subprocess.run, [sys.executable, "-c", "pass"], check=True),
        rounds,
    )


CLI_ROWS = ("--help", "--version", "status, a daemon serving the spool")
STATUS_READ = "status, no daemon (the command reads)"


def cli_phase(work: Path, rounds: int = ROUNDS) -> dict[str, Timing]:
    """`integrator --help`, `--version` and `status` (the overview of a repository and its
    spool, answered by the daemon serving it; and, for comparison, read by the command
    itself when no daemon runs) against `python -c pass`."""
    repo = _served_repository(work)
    spool = work / "spool"
    _checked(subprocess.run(_serve_command(repo, spool, "--once"), cwd=work,
                            capture_output=True, env=_env(), check=False))  # fmt: skip
    floor = partial(subprocess.run, [sys.executable, "-c", "pass"], check=True)
    status = ("status", "--spool", str(spool))
    out = {
        "--help": _interleaved(partial(_integrator, "--help", cwd=work), floor, rounds),
        "--version": _interleaved(partial(_integrator, "--version", cwd=work), floor, rounds),
    }
    daemon = subprocess.Popen(_serve_command(repo, spool), cwd=work, env=_env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (spool / "overview.sock").exists():
            if time.monotonic() > deadline or daemon.poll() is not None:
                raise RuntimeError("the daemon made no overview socket within 60 s")
            time.sleep(0.05)
        answered = _integrator(*status, "--json", cwd=work)
        _checked(answered)
        if json.loads(answered.stdout).get("answeredBy") != {"daemon": daemon.pid}:
            raise RuntimeError(f"the daemon did not answer status: {answered.stdout!r}")
        out[CLI_ROWS[2]] = _interleaved(partial(_integrator, *status, cwd=work), floor, rounds)
    finally:
        daemon.terminate()
        daemon.wait(timeout=60)
    out[STATUS_READ] = _interleaved(partial(_integrator, *status, cwd=work), floor, min(rounds, 10))
    return out


def startup(work: Path, rounds: int = ROUNDS) -> StartupResult:
    guard, answers = guard_phase(work / "guard", rounds)
    gate, files = gate_phase(work / "gate", rounds)
    serve = serve_phase(work / "serve", min(rounds, 10))  # seconds a round on a busy host
    cli = cli_phase(work / "cli", rounds)
    return StartupResult(guard, gate, files, answers, serve, cli)


def ratio_of(timing: Timing) -> float:
    return timing.p50 / timing.baseline_p50 if timing.baseline_p50 else float("nan")


__all__: Sequence[str] = (
    "CLI_ROWS", "STATUS_READ", "StartupResult", "Timing", "cli_phase", "ratio_of", "startup",
)  # fmt: skip
