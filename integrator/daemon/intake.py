"""The intake, daemon side: submissions pushed to a git repository, decided like the spool's.

`serve --intake URL` fetches `refs/integrator/submit/*` from the intake into the mirror
(`refs/integrator/intake/submit/*`), puts each new one into the daemon's spool under its own
id (whatever its document says: the spool's reader judges it), and, once the daemon filed
it, publishes the verdict at `refs/integrator/verdicts/<taskId>/<submissionId>` and deletes
the submission ref, both in one atomic push with leases. Nothing is lost: a daemon killed at
any step leaves the submission ref in place (it is imported again, and deciding it again
reports the same landing) or its verdict published. Several daemons may serve one intake:
the first to publish a verdict wins the push, and the others find it there.

A submission is (task, id, document), never the id alone. The spool names a folder by the
id, so the spool's folder of an id is this ref's submission only when its `submission.json`
is this ref's very blob (checked by content, once per daemon run); a verdict is published
only to the ref of the submission it decided. A ref whose id the spool holds for another
submission, whose document is missing, too large, the same as another ref's, or whose
contract names another task is answered at its own verdict ref with a small rejection
(integrator.daemon.admission), in one push per poll, and never enters the spool.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import structlog

from integrator import faults, jsontext, refnames
from integrator.daemon import admission, intake_verdicts
from integrator.daemon.admission import Pending
from integrator.daemon.probe import Backoff
from integrator.documents.verdict_key import SIGNATURE_FILE
from integrator.errors import GitTimeoutError, InfrastructureError, IntegratorError, UsageError
from integrator.files import atomic_write
from integrator.fleet.intake import SUBMISSION_FILE, submit_ref, verdict_ref
from integrator.limits import (
    INTAKE_POLL_BYTES,
    INTAKE_POLL_SUBMISSIONS,
    SUBMISSION_BYTES,
    VERDICT_BYTES,
)
from integrator.plumbing import git
from integrator.plumbing.packs import ObjectBuffer, commit_bytes, flush_loose, tree_bytes
from integrator.plumbing.remote import (
    INTAKE_KEY_FILE_CONFIG,
    KEY_FILE_CONFIG,
    PUSH_TIMEOUT,
    push_signature,
    remote_refs,
)
from integrator.records import verdict_keys
from integrator.records.canonical import Canonical, signature
from integrator.refnames import refname_problem
from integrator.store import republish
from integrator.store.republish import ORIGIN_FILE
from integrator.store.spool import (
    ID_RE,
    REJECTION_FILE,
    VERDICT_FILE,
    Spool,
    rejection_document,
    submitted,
)
from integrator.store.submitted import read_at_most_path, read_submitted

log = structlog.get_logger("integrator.intake")

# In the spool: one file per document blob taken from the intake, naming the ref it was
# taken as, so a document is imported once however many refs or runs bring it.
TAKEN_DIR = "intake-taken"
REMEMBERED = 200_000  # document blobs kept in memory (then forgotten at once; the files stay)

__all__ = ["ORIGIN_FILE", "Intake", "Pending"]


class Intake:
    """One intake repository served by this daemon."""

    def __init__(
        self, canonical: Canonical, spool: Spool, url: str, *, max_backoff: float = 30.0
    ) -> None:
        self.canonical = canonical
        self.spool = spool
        self.url = url
        # Publishing verdicts writes the intake's refs: signed, when its hook checks that.
        self.key = canonical.push_key(INTAKE_KEY_FILE_CONFIG)
        if self.key is None and url == canonical.remote_url:
            self.key = canonical.push_key(KEY_FILE_CONFIG)
        # Every verdict published is signed, when this host has a verdict key; a verdict
        # ref there that no trusted key signed is someone else's and is replaced.
        self.verdict_key = verdict_keys.daemon_key(canonical.repo)
        self.trusted = verdict_keys.trusted(canonical.repo)
        self.imported = 0
        self.published = 0
        self.trouble: str | None = None  # the last fetch or publish failure, None once it works
        self.failures = 0  # fetches that failed (the daemon counts them in its metrics)
        self.max_backoff = max_backoff
        self._backoff = Backoff()
        self._retry_at = 0.0
        # Why a verdict is not out yet: by submission id (republications) or by the verdict
        # ref (first publications and rejections at the door).
        self.unpublished: dict[str, str] = {}
        self._done: set[Pending] = set()  # answered by this daemon (their refs may still show)
        self._ours: dict[str, Pending] = {}  # spool id → the submission ref the folder is
        self._blobs: dict[str, str] = {}  # document blob → `<task>/<id>` it was taken as
        self._seen: dict[Pending, int] = {}  # ref → the poll that first saw it
        self._polls = 0
        self._unusable: set[str] = set()  # submit refs no daemon could decide, said once

    def _git(self, args: list[str]) -> git.GitRun:
        try:
            return git.run_git(
                args, cwd=self.canonical.repo.path, timeout=PUSH_TIMEOUT, check=False
            )
        except GitTimeoutError as err:
            raise InfrastructureError(f"git {args[0]} with the intake timed out") from err

    def fetch(self) -> list[Pending]:
        """Fetch the intake's submissions; every one the mirror now holds, oldest id first."""
        proc = self._git(
            ["fetch", "--quiet", "--prune", "--no-tags", "--no-write-fetch-head",
             "--no-auto-maintenance", self.url, f"+{refnames.SUBMIT}*:{refnames.INTAKE_SUBMIT}*"]
        )  # fmt: skip
        if proc.returncode != 0:
            raise InfrastructureError(f"cannot fetch the intake: {git.last_line(proc.stderr, '?')}")
        found = []
        for ref, oid in git.refs_under(self.canonical.repo, refnames.INTAKE_SUBMIT).items():
            task_id, _, sid = ref.removeprefix(refnames.INTAKE_SUBMIT).partition("/")
            if refname_problem(task_id) or not ID_RE.fullmatch(sid):
                if ref not in self._unusable:  # said once, not at every poll
                    self._unusable.add(ref)
                    log.warning("intake.unusable_ref", ref=refnames.shown(ref))
                continue
            found.append(Pending(task_id, sid, oid))
        self._forget(found)
        return sorted(found, key=lambda p: (p.sid, p.task_id))

    def _forget(self, found: list[Pending]) -> None:
        """Keep only what is about refs still on the intake (an answered ref is gone at the
        next fetch; one pushed again is judged again)."""
        self._polls += 1
        here = set(found)
        self._seen = {p: self._seen.get(p, self._polls) for p in found}
        self._done &= here
        self._ours = {sid: p for sid, p in self._ours.items() if p in here}
        names = {verdict_ref(p.task_id, p.sid) for p in found}
        for key in [k for k in self.unpublished if k.startswith(refnames.VERDICTS)]:
            if key not in names:
                del self.unpublished[key]
        if len(self._blobs) > REMEMBERED:
            self._blobs.clear()

    def poll(self) -> list[Pending]:
        """Fetch and take; the intake's trouble is kept in `trouble` and logged when it
        begins or changes (not at every poll), never the spool's: the spool goes on at its
        own pace while the intake is asked again after a backoff of its own."""
        now = time.monotonic()
        if now < self._retry_at:
            return []
        try:
            pending = self.fetch()
            taken = self.take(pending)
        except IntegratorError as err:
            self._failed(str(err))
            self.failures += 1
            self._backoff.grow(self.max_backoff)
            self._retry_at = now + self._backoff.seconds
            return []
        self._backoff.reset()
        self._retry_at = 0.0
        self._recovered()
        if taken:
            log.info("intake.taken", submissions=taken, waiting=len(pending))
        return pending

    def publish_logged(self, pending: list[Pending]) -> None:
        """`publish`, its trouble kept (a later drain publishes what this one could not)."""
        try:
            self.publish(pending)
        except IntegratorError as err:
            self._failed(str(err))
        self.retry_republish()

    def republish(self, sid: str) -> None:
        """Publish `sid`'s verdict again after it changed (its landing was ejected): the
        submitter's `status` reads what is true now, not the ACCEPTED it was first told.
        Durable: the request waits in the spool (`store.republish`, where the review page
        and `review approve` ask too) until it is out, and every drain tries again (a
        failure is also kept in `unpublished`: exit 4 for `serve --once`)."""
        republish.ask(self.spool.root, sid)
        self.retry_republish()

    def retry_republish(self) -> None:
        """Publish every verdict asked to be published again (not while the intake is
        known to be down: the next drain tries)."""
        waiting = republish.waiting(self.spool.root)
        if not waiting or self.trouble is not None:
            return
        for sid in waiting:
            republish.take(self.spool.root, sid)  # before the verdict is read
            try:
                self._republish_one(sid)
            except (IntegratorError, OSError, ValueError, KeyError, TypeError) as err:
                log.warning("intake.republish_failed", submission=sid, error=str(err))
                self.unpublished[sid] = str(err)
                continue
            self.unpublished.pop(sid, None)
            republish.done(self.spool.root, sid)

    def _republish_one(self, sid: str) -> None:
        """Push `sid`'s verdict as it is filed now to the ref its first verdict went to (as
        this daemon recorded it: a submission that did not come through the intake has no
        such record and is left alone)."""
        found = self.spool.find(sid)
        if found is None:
            return
        try:
            origin = jsontext.loads(read_at_most_path(found[1] / ORIGIN_FILE, 1 << 12))
        except FileNotFoundError:
            return  # not an intake submission: nothing was published for it
        task_id = origin.get("task") if isinstance(origin, dict) else None
        if not isinstance(task_id, str) or refname_problem(task_id):
            raise InfrastructureError(f"{found[1] / ORIGIN_FILE} names no usable task")
        verdict = read_at_most_path(found[1] / VERDICT_FILE, VERDICT_BYTES)
        target = verdict_ref(task_id, sid)
        old = remote_refs(Path(self.canonical.repo.path), self.url, [target]).get(target)
        commit = self._verdict_commit(Pending(task_id, sid, ""), VERDICT_FILE, verdict)
        sign = push_signature(self.key, [(old, commit, target)])
        lease = f"--force-with-lease={target}:{old or ''}"
        proc = self._git(
            ["push", "--porcelain", "--no-verify", *sign, self.url, lease, f"+{commit}:{target}"]
        )  # fmt: skip
        if proc.returncode != 0:
            raise InfrastructureError(
                f"the intake refused the new verdict: {git.server_said(proc.stderr)}"
            )
        log.info("intake.republished", submission=sid, task=task_id, verdict=target)

    def check_published(self) -> None:
        """InfrastructureError when a decided verdict could not be published (`serve
        --once` then exits 4; the next run publishes it)."""
        if self.unpublished:
            sid, why = min(self.unpublished.items())
            log.error("intake.unpublished", submissions=sorted(self.unpublished))
            raise InfrastructureError(
                f"{len(self.unpublished)} verdict(s) decided but not published on the intake "
                f"({sid}: {why}); the next run publishes them",
                kind="intake",
            )

    def _failed(self, why: str) -> None:
        if why != self.trouble:
            log.warning("intake.unavailable", error=why)
        self.trouble = why

    def _recovered(self) -> None:
        if self.trouble is not None:
            log.info("intake.available", after=self.trouble)
        self.trouble = None

    def take(self, pending: list[Pending]) -> int:
        """Put the submissions the spool does not hold yet into `new/`, answer those that
        can never be decided with a rejection at their own ref, and recognise those this
        spool holds already; within one poll's budget (the rest wait for the next poll, in
        rounds across tasks). How many were put into the spool."""
        todo = [p for p in pending if p not in self._done and self._ours.get(p.sid) != p]
        count, budget = INTAKE_POLL_SUBMISSIONS, INTAKE_POLL_BYTES
        measured: dict[str, admission.Measured] = {}  # by commit: one header read each
        refused: list[tuple[Pending, str]] = []
        taken = 0
        for item in admission.rounds(todo, self._seen):
            if count == 0:
                break
            found = measured.get(item.commit) or admission.measure(self.canonical.repo, item.commit)
            measured[item.commit] = found
            first = self._taken_as(found.blob) if found.problem is None else None
            duplicate = first is not None and first != item.name
            if found.problem is None and not duplicate and found.size > budget:
                continue  # its document waits for the next poll's budget
            count -= 1
            if found.problem is not None:
                refused.append((item, found.problem))
            elif duplicate:
                refused.append((item, admission.DUPLICATE))
            else:
                budget -= found.size
                why, new = self._admit(item, found)
                if why is not None:
                    refused.append((item, why))
                taken += new
        self._refuse(refused)
        self.imported += taken
        return taken

    def _admit(self, item: Pending, found: admission.Measured) -> tuple[str | None, int]:
        """Take `item` (its document measured as `found`) into the spool, or recognise it
        there; (why it is refused instead, or None; 1 when it was put into the spool)."""
        held = self.spool.find(item.sid)
        if held is not None:
            try:
                data = read_submitted(submitted(held[1]), SUBMISSION_FILE, SUBMISSION_BYTES)
            except (UsageError, OSError):
                data = None
            if data is None or admission.blob_id(data) != found.blob:
                return admission.ID_IN_USE, 0
        else:
            data = bytes(self.canonical.repo.odb.read(found.blob)[1])
        named = admission.contract_task(data)
        if named is not None and named != item.task_id:
            return admission.WRONG_TASK, 0
        self._ours[item.sid] = item
        self._blobs[found.blob] = item.name
        if held is not None:
            return None, 0  # imported before (by this daemon or an earlier run of it)
        # Durable before the import: a later run (or a restart) knows the document too.
        (self.spool.root / TAKEN_DIR).mkdir(exist_ok=True)
        atomic_write(self.spool.root / TAKEN_DIR / found.blob, item.name.encode(), sync=False)
        with self.spool.draft(sid=item.sid) as draft:
            self.spool.publish(draft, data)
        return None, 1

    def _taken_as(self, blob: str) -> str | None:
        """The `<task>/<id>` a document blob was taken into this spool as, if it was."""
        known = self._blobs.get(blob)
        if known is None:
            try:
                known = read_at_most_path(self.spool.root / TAKEN_DIR / blob, 1024).decode()
            except (OSError, UnicodeDecodeError):
                return None
            self._blobs[blob] = known
        return known

    def _refuse(self, refused: list[tuple[Pending, str]]) -> None:
        """Answer each refused ref with a rejection at its own verdict ref (and delete it):
        all in one atomic push, or one by one when that push does not go through."""
        if not refused:
            return
        at = self.canonical.clock()
        answers = [
            (
                item,
                self._verdict_commit(item, REJECTION_FILE, rejection_document(item.sid, why, at)),
            )
            for item, why in refused
        ]
        if len(answers) == 1 or not self._push_answers(answers):
            for item, commit in answers:
                target, source = (
                    verdict_ref(item.task_id, item.sid),
                    submit_ref(item.task_id, item.sid),
                )
                try:
                    if not self._push_answers([(item, commit)]):
                        self._settle(item, target, source, commit)
                except IntegratorError as err:
                    log.warning("intake.refusal_unpublished", submission=item.name, error=str(err))
                    self.unpublished[target] = str(err)
                    continue
                self.unpublished.pop(target, None)
                self._done.add(item)
        else:
            self._done.update(item for item, _ in answers)
        reasons: dict[str, int] = {}
        for _, why in refused:
            reasons[why] = reasons.get(why, 0) + 1
        log.info("intake.refused", refs=len(refused), reasons=reasons)

    def _push_answers(self, answers: list[tuple[Pending, str]]) -> bool:
        """One atomic push: each answer's verdict ref created (expected absent) and its
        submission ref deleted (expected at the commit judged). Whether it went through."""
        updates: list[tuple[str | None, str | None, str]] = []
        leases: list[str] = []
        specs: list[str] = []
        for item, commit in answers:
            target, source = verdict_ref(item.task_id, item.sid), submit_ref(item.task_id, item.sid)
            updates += [(None, commit, target), (item.commit, None, source)]
            leases += [
                f"--force-with-lease={target}:",
                f"--force-with-lease={source}:{item.commit}",
            ]
            specs += [f"{commit}:{target}", f":{source}"]
        sign = push_signature(self.key, updates)
        proc = self._git(
            ["push", "--atomic", "--porcelain", "--no-verify", *sign, self.url, *leases, *specs]
        )
        return proc.returncode == 0

    def publish(self, pending: list[Pending]) -> int:
        """Publish the verdict of every pending submission the daemon has filed; how many."""
        done = 0
        for item in pending:
            if item in self._done or self._ours.get(item.sid) != item:
                continue  # answered, or not (yet) known to be the spool's submission of that id
            found = self.spool.find(item.sid)
            if found is None or found[0] in ("new", "work", "tmp"):
                continue
            target = verdict_ref(item.task_id, item.sid)
            try:
                self._publish_one(item, found[1])
                self._done.add(item)
                self.unpublished.pop(target, None)
                done += 1
            except IntegratorError as err:
                log.warning("intake.publish_failed", submission=item.name, error=str(err))
                self.unpublished[target] = str(err)
        self.published += done
        return done

    def _publish_one(self, item: Pending, folder: Path) -> None:
        for name in (VERDICT_FILE, REJECTION_FILE):
            try:
                document = read_at_most_path(folder / name, VERDICT_BYTES)
                break
            except FileNotFoundError:
                continue
        else:
            raise InfrastructureError(f"{folder} holds neither {VERDICT_FILE} nor {REJECTION_FILE}")
        commit = self._verdict_commit(item, name, document)
        target, source = verdict_ref(item.task_id, item.sid), submit_ref(item.task_id, item.sid)
        faults.point("before-publish")
        sign = push_signature(self.key, [(None, commit, target), (item.commit, None, source)])
        proc = self._git(
            ["push", "--atomic", "--porcelain", "--no-verify", *sign, self.url,
             f"--force-with-lease={target}:", f"--force-with-lease={source}:{item.commit}",
             f"{commit}:{target}", f":{source}"]
        )  # fmt: skip
        if proc.returncode != 0:
            self._settle(item, target, source, commit)
        # The daemon's own note (beside the verdict, outside the submitter's folder) of the
        # ref this verdict went to: where a changed verdict is published again.
        atomic_write(folder / ORIGIN_FILE, json.dumps({"task": item.task_id}).encode() + b"\n")
        log.info("intake.published", submission=item.sid, task=item.task_id, verdict=target)

    def _settle(self, item: Pending, target: str, source: str, commit: str) -> None:
        """A publish that did not come back clean: another daemon's verdict may be there
        — or, on an intake that cannot guard its refs, a verdict no integrator wrote,
        which is replaced by this one (leased on what was seen)."""
        now = remote_refs(Path(self.canonical.repo.path), self.url, [target, source])
        there = now.get(target)
        if there is not None:
            forged = intake_verdicts.untrusted(
                self._git, self.url, self.canonical.repo, self.trusted, item
            )
            if forged is not None:
                log.warning("intake.untrusted_verdict", submission=item.sid, task=item.task_id,
                            verdict=target, why=forged)  # fmt: skip
                intake_verdicts.replace(
                    self._git, self.url, self.key, item, there, commit, now.get(source)
                )
                return
        if target in now and source not in now:
            return  # published (by us, or by another daemon first)
        if target in now and now.get(source) == item.commit:
            # Another daemon published and has not deleted the submission yet: finish it.
            sign = push_signature(self.key, [(item.commit, None, source)])
            proc = self._git(
                ["push", "--porcelain", "--no-verify", *sign, self.url,
                 f"--force-with-lease={source}:{item.commit}", f":{source}"]
            )  # fmt: skip
            if proc.returncode == 0:
                return
        raise InfrastructureError(f"cannot publish the verdict of {item.sid} on the intake")

    def _verdict_commit(self, item: Pending, name: str, document: bytes) -> str:
        buffer = ObjectBuffer(self.canonical.repo)
        files = {name.encode(): (b"100644", buffer.add("blob", document))}
        if self.verdict_key is not None:
            signed = self.verdict_key.sign(item.task_id, item.sid, name, document)
            files[SIGNATURE_FILE.encode()] = (b"100644", buffer.add("blob", signed))
        tree = buffer.add("tree", tree_bytes(files))
        sig = signature(self.canonical.clock())
        message = f"verdict {item.sid} of task {item.task_id}\n"
        commit = buffer.add("commit", commit_bytes(tree, [], sig, sig, message)).hex()
        flush_loose(buffer)
        return commit
