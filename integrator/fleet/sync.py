"""Bring a contract's base into the agent's clone (`integrator sync`).

With validation on, a contract is based on the queue head, which is not yet on the target
branch: a plain clone of the server lacks it, and a candidate built elsewhere is fenced
BASE_NOT_ANCESTOR. `sync` fetches the queue refs (and the target) from the remote into the
same names, so the base is an ordinary local commit, and says whether it is there now.
Only git processes here: agents run it at the start of each task.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from integrator import refnames
from integrator.errors import GitTimeoutError, InfrastructureError, UsageError
from integrator.plumbing import git

FETCH_TIMEOUT = 120.0


@dataclass(frozen=True)
class Synced:
    base: str
    reachable: bool
    fetched: tuple[str, ...]  # the refspecs fetched

    def document(self) -> dict[str, object]:
        return {"base": self.base, "reachable": self.reachable, "fetched": list(self.fetched)}


def fetch_line(remote: str) -> str:
    """The git command that fetches the queue refs, as hints print it."""
    return f"git fetch {remote} '+{refnames.QUEUE}*:{refnames.QUEUE}*'"


def _has_commit(repo: Path, oid: str) -> bool:
    proc = git.run_git(["cat-file", "-e", f"{oid}^{{commit}}"], cwd=repo, check=False)
    return proc.returncode == 0


def sync_base(repo: Path, base: str, remote: str = "origin") -> Synced:
    """Fetch the queue refs from `remote` into `repo` and report whether `base` is there."""
    if remote.startswith("-") or any(ord(ch) < 32 for ch in remote):
        raise UsageError(f"{remote[:80]!r} is not a remote name or URL")
    specs = (f"+{refnames.QUEUE}*:{refnames.QUEUE}*",)
    try:
        proc = git.run_git(
            ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", remote, *specs],
            cwd=repo, check=False, timeout=FETCH_TIMEOUT,
        )  # fmt: skip
    except GitTimeoutError as err:
        raise InfrastructureError(f"fetching the queue from {remote} timed out") from err
    if proc.returncode != 0:
        raise InfrastructureError(
            f"cannot fetch the queue from {remote}: {git.server_said(proc.stderr)}",
            kind="git-server",
        )
    return Synced(base, _has_commit(repo, base), specs)
