"""The intake, agent side: hand a candidate to daemons that do not share this filesystem.

A submission is one commit pushed to `refs/integrator/submit/<taskId>/<submissionId>` on an
intake repository (any git URL the agent may push to): its tree holds `submission.json`,
its parent is the candidate, so the push carries the candidate's objects. A daemon serving
the intake decides it exactly as if it had come through a spool and publishes the verdict
as a commit holding `verdict.json` (or `rejection.json`) at
`refs/integrator/verdicts/<taskId>/<submissionId>`, then deletes the submission ref.

A submission is (task, id), never the id alone: an id is only a name, and anyone who can
read the intake sees it, so a reader looks at its own task's verdict ref only and checks
that the verdict there is about the candidate it submitted (docs/remote.md, "Intake").

Only git processes here (no libgit2): agents call this in tight loops.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from integrator import jsontext, refnames
from integrator.documents.verdict_key import (
    SIGNATURE_FILE,
    TRUSTED_CONFIG,
    signature_problem,
)
from integrator.errors import InfrastructureError, IntegratorError, UsageError
from integrator.limits import VERDICT_BYTES, VERDICT_SIGNATURE_BYTES
from integrator.plumbing.git import run_git, server_said
from integrator.refnames import refname_problem
from integrator.store.submitted import read_at_most_path

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


class ForeignVerdictError(IntegratorError):
    """The verdict found under a submission's own name is not about that submission: it
    names another candidate or another task (someone else used the id). Never a success:
    the submitter's candidate was not decided there; it submits again, under a new id."""


@dataclass(frozen=True)
class Published:
    """A verdict as the intake holds it: `verdict.json`, or `rejection.json` (malformed)."""

    task_id: str
    sid: str
    rejected: bool
    document: bytes


def check_verdict(
    document: bytes,
    rejected: bool,
    *,
    sid: str,
    task_id: str | None,
    candidate: str | None,
    where: str,
) -> None:
    """ForeignVerdictError unless `document` (a verdict, or a rejection when `rejected`)
    can be the answer to submission `sid` of task `task_id` on `candidate` (each checked
    when known): a rejection names the submission it rejects; a verdict is one (the
    model reads it), names its candidate, and its task when the contract could be read."""
    if rejected:
        try:
            doc = jsontext.loads(document)
        except ValueError:
            doc = None
        if not isinstance(doc, dict) or not isinstance(doc.get("reason"), str):
            raise ForeignVerdictError(f"{where} holds no rejection document")
        if doc.get("submission") != sid:
            raise ForeignVerdictError(f"{where} rejects another submission than {sid}")
        return
    from pydantic import ValidationError  # only when reading a verdict: submit starts light

    from integrator.documents.verdict import Verdict

    try:
        verdict = Verdict.model_validate_json(document)
    except ValidationError as err:
        raise ForeignVerdictError(
            f"{where} holds no verdict document ({err.error_count()} errors)"
        ) from None
    if candidate is not None and verdict.candidate != candidate:
        raise ForeignVerdictError(
            f"{where} is the verdict on candidate {_shown(verdict.candidate)}, not on "
            f"{candidate}, the one submitted: another submission used this id; submit again "
            "(it gets a new id)"
        )
    if task_id is not None and verdict.task_id is not None and verdict.task_id != task_id:
        raise ForeignVerdictError(
            f"{where} is the verdict on a submission of task {_shown(verdict.task_id)}, not of "
            f"{task_id}: another submission used this id; submit again (it gets a new id)"
        )


def check_filed(
    folder: str, path: Path, *, sid: str, task_id: str | None, candidate: str | None
) -> None:
    """`check_verdict` on the verdict a spool filed for `sid` (in `folder`, at `path`)."""
    rejected = folder == "rejected"
    name = REJECTION_FILE if rejected else VERDICT_FILE
    document = read_at_most_path(path / name, VERDICT_BYTES)
    check_verdict(
        document, rejected, sid=sid, task_id=task_id, candidate=candidate, where=str(path / name)
    )


def _shown(value: str | None) -> str:
    """A value read from a published document, as an error may name it (bounded; the CLI
    escapes what it prints)."""
    if value is None:
        return "(none)"
    return repr(value[:100] + ("…" if len(value) > 100 else ""))


def trusted_verdict_keys(repo: Path) -> frozenset[str]:
    """The verdict keys a reader in `repo` trusts: its config's `integrator.trustedVerdictKey`
    (kept there by `submit` and `sync` from the attempt key file) and the environment's."""
    from integrator.records.verdict_keys import trusted_in

    listed = run_git(["config", "--get-all", TRUSTED_CONFIG], cwd=repo, check=False)
    return trusted_in(listed.stdout.decode("utf-8", "replace").split())


def remember_verdict_keys(repo: Path, keys: tuple[str, ...]) -> None:
    """Keep the verdict keys an attempt key file carried in `repo`'s config, so every later
    read of a verdict there believes only verdicts those keys signed."""
    have = trusted_verdict_keys(repo)
    for key in keys:
        if key not in have:
            run_git(["config", "--add", TRUSTED_CONFIG, key], cwd=repo)


def find_verdict(
    url: str,
    repo: Path,
    task_id: str,
    sid: str,
    *,
    candidate: str | None = None,
    untrusted: list[str] | None = None,
) -> Published | None:
    """The verdict the daemons published for submission `sid` of task `task_id` — read at
    `refs/integrator/verdicts/<task>/<id>` and nowhere else — or None (not yet).
    ForeignVerdictError when what is there is not about this submission (`candidate`, when
    the caller knows it, is the commit it submitted). Where the reader trusts verdict keys,
    a verdict no trusted key signed for this submission is not one: None, with why it was
    not believed appended to `untrusted` (a daemon replaces it when it decides)."""
    ref = verdict_ref(_component(task_id, "task id"), _component(sid, "submission id"))
    listed = run_git(["ls-remote", "--refs", url, ref], cwd=repo, check=False)
    if listed.returncode != 0:
        why = listed.stderr.decode("utf-8", "replace").strip().splitlines()
        raise InfrastructureError(f"cannot read {url}: {why[-1] if why else listed.returncode}")
    # ls-remote matches patterns by their tail: only the exact name is this submission's.
    names = {
        line.partition("\t")[2] for line in listed.stdout.decode("utf-8", "replace").splitlines()
    }
    if ref not in names:
        return None
    local = f"{refnames.INTAKE_VERDICTS}{task_id}/{sid}"
    run_git(["fetch", "--quiet", "--no-tags", url, f"+{ref}:{local}"], cwd=repo)
    trusted = trusted_verdict_keys(repo)
    for name_in_tree, rejected in ((VERDICT_FILE, False), (REJECTION_FILE, True)):
        shown = _blob_at(repo, local, name_in_tree, VERDICT_BYTES)
        if shown is None:
            continue  # not a blob: no verdict document
        where = f"{ref} on {url}"
        if trusted:
            signed = _blob_at(repo, local, SIGNATURE_FILE, VERDICT_SIGNATURE_BYTES)
            problem = signature_problem(trusted, signed, task=task_id, submission=sid,
                                        name=name_in_tree, document=shown)  # fmt: skip
            if problem is not None:
                if untrusted is not None:
                    untrusted.append(f"the verdict at {where} is not believed: {problem}")
                return None
        check_verdict(shown, rejected, sid=sid, task_id=task_id, candidate=candidate, where=where)
        return Published(task_id, sid, rejected, shown)
    raise InfrastructureError(f"{ref} on {url} holds no verdict")


def _blob_at(repo: Path, commit: str, name: str, limit: int) -> bytes | None:
    """The blob `name` in `commit`'s tree (measured before it is read), or None when there
    is none; ForeignVerdictError when it is over `limit` bytes."""
    sized = run_git(["cat-file", "-s", f"{commit}:{name}"], cwd=repo, check=False)
    if sized.returncode != 0:
        return None
    if int(sized.stdout.decode().strip() or 0) > limit:
        raise ForeignVerdictError(f"{commit}:{name} is over {limit} bytes")
    shown = run_git(["cat-file", "blob", f"{commit}:{name}"], cwd=repo, check=False)
    return shown.stdout if shown.returncode == 0 else None
