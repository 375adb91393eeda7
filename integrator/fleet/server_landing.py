"""Where a landing is, told to an agent that reads its verdict from an intake.

The intake holds verdicts; where a landing is now — on the queue, promoted to the target,
ejected, reverted — is in the canonical repository's refs: `refs/integrator/queue/<target>`,
`refs/heads/<target>`, `refs/integrator/ejected/<target>/<landing>`. The agent fetches
those into its own clone, under `refs/integrator/intake/landing/` (never pushed, never
read by anything else), and `records.landings.locate` reads them there: the same
function `status --spool` reads the daemon's repository with, so the answer is the same.

Which server holds them: the one named (`status --canonical URL`); else the clone's
`origin` when it holds a queue (an agent's clone is a clone of the canonical repository);
else the intake itself (the canonical repository serving as its own intake).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from integrator import refnames
from integrator.errors import InfrastructureError
from integrator.plumbing.git import last_line, run_git
from integrator.plumbing.remote import fetch_retried

HEADS = "refs/heads/"
SERVER_TIMEOUT = 300.0  # seconds for one ls-remote or fetch of the landing refs
REF_LOCK_MS = 5000  # how long a fetch waits for a private ref another agent's fetch holds


@dataclass(frozen=True)
class Source:
    """A server holding queue refs: its URL, and each target it queues for (with whether
    the target branch exists there)."""

    url: str
    targets: dict[str, bool]


def _git(args: list[str], repo: Path) -> tuple[int, bytes, bytes]:
    proc = run_git(args, cwd=repo, timeout=SERVER_TIMEOUT, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def origin(repo: Path) -> str | None:
    """The clone's `origin` URL (insteadOf applied), None when it has none."""
    code, out, _ = _git(["remote", "get-url", "origin"], repo)
    url = out.decode("utf-8", "replace").strip()
    return url if code == 0 and url else None


def listed(url: str, repo: Path) -> Source:
    """What `url` holds: the targets of its queue refs (InfrastructureError: unreadable)."""
    code, out, err = _git(["ls-remote", "--refs", url, f"{refnames.QUEUE}*", f"{HEADS}*"], repo)
    if code != 0:
        raise InfrastructureError(f"cannot read {url}: {last_line(err, str(code))}")
    queues: set[str] = set()
    heads: set[str] = set()
    for line in out.decode("utf-8", "surrogateescape").splitlines():
        _, _, ref = line.partition("\t")
        if refnames.ref_problem(ref) is not None:
            continue  # nothing a server should hold; never a refspec of ours
        if ref.startswith(refnames.QUEUE):
            queues.add(ref.removeprefix(refnames.QUEUE))
        elif ref.startswith(HEADS):
            heads.add(ref.removeprefix(HEADS))
    return Source(url, {target: target in heads for target in sorted(queues)})


def source(intake: str, repo: Path, canonical: str | None = None) -> Source | None:
    """The server to read landings from (module docstring), None when none holds a queue.
    A server that cannot be read is skipped for the next, and its error raised only when
    no other holds a queue: a landing is never reported gone because a host was down."""
    if canonical is not None:
        found = listed(canonical, repo)
        return found if found.targets else None
    trouble: InfrastructureError | None = None
    for url in dict.fromkeys(u for u in (origin(repo), intake) if u):
        try:
            found = listed(url, repo)
        except InfrastructureError as err:
            trouble = trouble or err
            continue
        if found.targets:
            return found
    if trouble is not None:
        raise trouble
    return None


def fetch(found: Source, repo: Path) -> set[str]:
    """Fetch its queue refs, target branches and ejection records into the clone's
    private namespace; the local names the fetch made true (a name ending in `/` stands
    for the family below it, pruned to what the server holds)."""
    specs: list[str] = []
    fetched: set[str] = set()
    for target, has_head in found.targets.items():
        refs = [refnames.queue(target)] + ([HEADS + target] if has_head else [])
        for ref in refs:
            local = refnames.intake_landing(ref)
            specs.append(f"+{ref}:{local}")
            fetched.add(local)
    ejected = refnames.intake_landing(refnames.EJECTED)
    specs.append(f"+{refnames.EJECTED}*:{ejected}*")
    fetched.add(ejected)
    # Agents in worktrees of one clone share these refs: a fetch that finds one locked by
    # another agent's waits for it (git retries), and one whose ref another agent's fetch
    # moved after it was read is run again, instead of failing at once.
    args = ["-c", f"core.filesRefLockTimeout={REF_LOCK_MS}", "fetch", "--quiet", "--no-tags",
            "--prune", "--no-write-fetch-head", "--no-auto-maintenance",
            "--no-recurse-submodules", found.url, *specs]  # fmt: skip
    proc = fetch_retried(lambda: run_git(args, cwd=repo, timeout=SERVER_TIMEOUT, check=False))
    code, err = proc.returncode, proc.stderr
    if code != 0:
        raise InfrastructureError(f"cannot fetch the queue from {found.url}: {last_line(err)}")
    return fetched


def whereabouts(
    intake: str, repo: Path, staging: str, canonical: str | None = None
) -> dict[str, object] | None:
    """Where the landing `staging` names is now, as `status --spool` tells it
    (`Whereabouts.wire()`), read from the canonical server; None when no server holds a
    queue to look in. InfrastructureError when the server cannot be read."""
    found = source(intake, repo, canonical)
    if found is None:
        return None
    fetched = fetch(found, repo)
    from integrator.records.landings import Fetched, Whereabouts, locate

    first: Whereabouts | None = None
    for target in found.targets:
        with Fetched(repo, refnames.INTAKE_LANDING, target, fetched) as view:
            where = locate(view, staging)
        if where.state != "gone":
            return where.wire()
        first = first or where
    return first.wire() if first is not None else None
