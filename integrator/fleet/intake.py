"""The intake, agent side: hand a candidate to daemons that do not share this filesystem.

A submission is one commit pushed to `refs/integrator/submit/<taskId>/<submissionId>` on an
intake repository (any git URL the agent may push to): its tree holds `submission.json`,
its parent is the candidate, so the push carries the candidate's objects. A daemon serving
the intake decides it exactly as if it had come through a spool and publishes the verdict
as a commit holding `verdict.json` (or `rejection.json`) at
`refs/integrator/verdicts/<taskId>/<submissionId>`, then deletes the submission ref.

Only git processes here (no libgit2): agents call this in tight loops.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from integrator import refnames
from integrator.errors import InfrastructureError, UsageError
from integrator.plumbing.git import run_git, server_said
from integrator.refnames import refname_problem

SUBMISSION_FILE = "submission.json"
VERDICT_FILE = "verdict.json"
REJECTION_FILE = "rejection.json"
# Where an agent's repository keeps the verdicts it fetched (never pushed anywhere).


def submit_ref(task_id: str, sid: str) -> str:
    return f"{refnames.SUBMIT}{task_id}/{sid}"


def verdict_ref(task_id: str, sid: str) -> str:
    return f"{refnames.VERDICTS}{task_id}/{sid}"


def _component(value: str, what: str) -> str:
    problem = refname_problem(value)
    if problem:
        raise UsageError(f"{what} {value!r} cannot name a ref: it {problem}")
    return value


def submission_commit(repo: Path, document: bytes, candidate: str, message: str) -> str:
    """Write (objects only) the submission commit: `submission.json`, parent the candidate."""
    blob = (
        run_git(["hash-object", "-w", "--stdin"], cwd=repo, input=document).stdout.decode().strip()
    )
    tree = (
        run_git(["mktree"], cwd=repo, input=f"100644 blob {blob}\t{SUBMISSION_FILE}\n".encode())
        .stdout.decode()
        .strip()
    )
    made = run_git(
        ["commit-tree", tree, "-p", candidate, "-F", "-"], cwd=repo, input=message.encode()
    )
    return made.stdout.decode().strip()


def push_submission(url: str, repo: Path, task_id: str, sid: str, commit: str) -> None:
    """Create the submission ref on the intake (expected absent: a submission id is new)."""
    ref = submit_ref(_component(task_id, "task id"), _component(sid, "submission id"))
    proc = run_git(
        ["push", "--porcelain", "--quiet", url, f"--force-with-lease={ref}:", f"{commit}:{ref}"],
        cwd=repo,
        check=False,
    )
    if proc.returncode != 0:
        why = server_said(proc.stderr, str(proc.returncode))
        raise InfrastructureError(f"cannot push the submission to {url}: {why}")


@dataclass(frozen=True)
class Published:
    """A verdict as the intake holds it: `verdict.json`, or `rejection.json` (malformed)."""

    task_id: str
    sid: str
    rejected: bool
    document: bytes


def find_verdict(url: str, repo: Path, sid: str) -> Published | None:
    """The verdict the daemons published for submission `sid`, or None (not yet)."""
    _component(sid, "submission id")
    listed = run_git(["ls-remote", "--refs", url, f"{refnames.VERDICTS}*"], cwd=repo, check=False)
    if listed.returncode != 0:
        why = listed.stderr.decode("utf-8", "replace").strip().splitlines()
        raise InfrastructureError(f"cannot read {url}: {why[-1] if why else listed.returncode}")
    for line in listed.stdout.decode("utf-8", "replace").splitlines():
        _, _, ref = line.partition("\t")
        task_id, _, name = ref.removeprefix(refnames.VERDICTS).partition("/")
        if name != sid or refname_problem(task_id):
            continue
        local = f"{refnames.INTAKE_VERDICTS}{sid}"
        run_git(["fetch", "--quiet", "--no-tags", url, f"+{ref}:{local}"], cwd=repo)
        for name_in_tree, rejected in ((VERDICT_FILE, False), (REJECTION_FILE, True)):
            shown = run_git(["cat-file", "blob", f"{local}:{name_in_tree}"], cwd=repo, check=False)
            if shown.returncode == 0:
                return Published(task_id, sid, rejected, shown.stdout)
        raise InfrastructureError(f"{ref} on {url} holds no verdict")
    return None
