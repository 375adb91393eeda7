"""The drill harness: a world (canonical repository, spool, logs) driven through the real CLI.

Every scenario step is an `integrator` process; every command, its exit status and output go
to the world's `commands.log`; verdicts printed by `integrate`/`gate` are kept under
`verdicts/`, daemon logs under `logs/`. When the drill ends the world writes `refs.txt`,
`queue.txt` and `claims.txt`, and `world.json` tells `drills.gates` where to look. The figures
are computed from those records, never from what the drill believed it did.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pygit2

from drills.commands import CommandLog
from drills.context import Context
from drills.procs import DrillError, Served, wait_until
from drills.records import Contract, Decision, Result
from drills.repo import MAIN, QUEUE, Spec, first_parent_chain, git, make_commit, rev
from integrator.documents.attempt_key import AttemptKey
from integrator.documents.submission import Submission
from integrator.errors import ConfigurationError
from integrator.records.canonical import Canonical
from integrator.store.keys import KeyStore, store_of
from integrator.store.spool import DECIDED, VERDICT_FILE, Spool

PY = sys.executable


class World(CommandLog):
    """A canonical repository prepared with `integrator init`, its spool, and its records."""

    def __init__(
        self,
        ctx: Context,
        name: str,
        files: Mapping[str, Spec],
        *,
        policy: str | None = None,
        tags: Sequence[str] = (),
    ) -> None:
        self.ctx = ctx
        ctx.worlds.append(self)
        self.root = ctx.dir / name
        self.repo = self.root / "canon"
        self.logs = self.root / "logs"
        self.verdicts = self.root / "verdicts"
        self.contracts = self.root / "contracts"
        for folder in (self.logs, self.verdicts, self.contracts):
            folder.mkdir(parents=True, exist_ok=True)
        self.commands = self.root / "commands.log"
        self.spool = Spool(self.root / "spool").ensure()
        self.published: list[str] = []
        self.daemons: list[Served] = []
        self._seq = 0
        git("init", "-q", "-b", "main", str(self.repo), cwd=self.root)
        # Commits are written without a work tree: declared bare, no checkout of main is
        # left behind by the landings (integrator init refuses one it does not keep in step).
        git("config", "core.bare", "true", cwd=self.repo)
        # Every ref update is logged, the queue's too: the reflog is evidence for the races.
        git("config", "core.logAllRefUpdates", "always", cwd=self.repo)
        base = make_commit(self.repo, files, parent=None, message="base")
        git("update-ref", MAIN, base, cwd=self.repo)
        args = ["init", "--repo", str(self.repo)]
        if policy is not None:
            path = self.root / "policy.toml"
            path.write_text(policy)
            args += ["--policy", str(path)]
        self.cli(*args)
        initial = self.ref(QUEUE)
        assert initial is not None
        self.initial = initial
        self.meta: dict[str, Any] = {
            "schema": "drills.world.v1",
            "drill": ctx.name,
            "name": name,
            "tags": list(tags),
            "repo": str(self.repo),
            "spool": str(self.spool.root),
            "initialHead": initial,
        }
        self.save_meta()

    # -- records -----------------------------------------------------------------------------

    def save_meta(self) -> None:
        (self.root / "world.json").write_text(json.dumps(self.meta, indent=2) + "\n")

    def evidence(self, *extra: Path | str) -> list[str]:
        return [str(p) for p in extra] + [
            str(self.root / "refs.txt"),
            str(self.root / "queue.txt"),
            str(self.commands),
        ]

    def snapshot(self) -> None:
        """Write the refs, the queue's history and every claim's history beside the world."""
        refs = git("for-each-ref", "--format=%(objectname) %(refname)", cwd=self.repo)
        (self.root / "refs.txt").write_text(refs + "\n")
        queue = git(
            "log", "--first-parent", "--format=%H %s%n%(trailers:key=Integrator-Candidate)",
            f"{self.initial}..{QUEUE}", cwd=self.repo,
        )  # fmt: skip
        (self.root / "queue.txt").write_text(queue + "\n")
        claims = []
        for line in refs.splitlines():
            ref = line.split(" ", 1)[1]
            if ref.startswith("refs/integrator/claims/"):
                claims.append(f"# {ref}")
                claims.append(git("log", "--format=%h %s", ref, cwd=self.repo))
        (self.root / "claims.txt").write_text("\n".join(claims) + "\n")

    # -- commands ----------------------------------------------------------------------------

    def cli(
        self,
        *args: str,
        expect: int | Collection[int] | None = 0,
        env: Mapping[str, str] | None = None,
        label: str | None = None,
    ) -> Result:
        return self.run(
            [PY, "-m", "integrator", *args], expect=expect, env=env, label=label or args[0]
        )

    def issue(
        self,
        task: str,
        paths: Sequence[str],
        *,
        resources: Sequence[str] = (),
        deny: Sequence[str] = (),
        lease: str = "2h",
        holder: str = "agent",
        force_shared: bool = False,
        expect: int | Collection[int] = 0,
    ) -> Contract | Result:
        """`integrator contract issue`; the contract, or the refusal when it exits non-zero."""
        out = self.contracts / f"{task}-issue-{self._seq + 1}.json"
        args = ["contract", "issue", "--repo", str(self.repo), "--task", task, "-o", str(out)]
        args += [f"--path={p}" for p in paths] + [f"--deny={d}" for d in deny]
        args += [f"--resource={r}" for r in resources]
        args += ["--lease", lease, "--holder", holder]
        if force_shared:
            args.append("--force-shared")
        result = self.cli(*args, expect=expect, label=self._seqname(f"issue-{task}"))
        if result.code != 0:
            return result
        return Contract(out, json.loads(out.read_text()))

    def contract(self, task: str, paths: Sequence[str], **kw: Any) -> Contract:
        issued = self.issue(task, paths, **kw)
        assert isinstance(issued, Contract)
        return issued

    def setup_contract(
        self,
        task: str,
        paths: Sequence[str],
        *,
        resources: Sequence[str] = (),
        force_shared: bool = False,
    ) -> Contract:
        """Issue a contract in-process, for drills where the coordinator is not the subject
        (a `contract issue` process costs half a second; the claim it writes is the same)."""
        from integrator.records.claims import Claims, IssueRequest

        request = IssueRequest(
            task_id=task, paths=tuple(paths), resources=tuple(resources), lease=timedelta(hours=2)
        )
        with Canonical(self.repo) as canonical:
            contract = Claims(canonical).issue(request, force_shared=force_shared)
        out = self.contracts / f"{task}-setup-{self._seq + 1}.json"
        out.write_text(contract.to_json())
        with self.commands.open("a", encoding="utf-8") as fh:
            fh.write(f"## setup: issued {task} in-process → {out.name}\n\n")
        return Contract(out, json.loads(out.read_text()))

    def reclaim(
        self, task: str, *, holder: str, lease: str = "2h", force: bool = False
    ) -> Contract:
        out = self.contracts / f"{task}-reclaim-{self._seq + 1}.json"
        args = ["contract", "reclaim", "--repo", str(self.repo), "--task", task]
        args += ["--holder", holder, "--lease", lease, "-o", str(out)]
        if force:
            args.append("--force")
        self.cli(*args, label=self._seqname(f"reclaim-{task}"))
        return Contract(out, json.loads(out.read_text()))

    def commit(
        self, files: Mapping[str, Spec], *, parent: str | None = None, message: str = "agent work"
    ) -> str:
        """An agent's candidate commit, on the queue head unless `parent` says otherwise."""
        return make_commit(self.repo, files, parent=parent or self.initial, message=message)

    def _integrate_argv(self, verb: str, contract: Contract, candidate: str) -> list[str]:
        return [
            PY, "-m", "integrator", verb, "--repo", str(self.repo),
            "--contract", str(contract.path), "--candidate", candidate, "--json",
        ]  # fmt: skip

    def keep_verdict(self, label: str, result: Result, contract: Contract) -> Decision:
        """Keep a printed verdict with what produced it (read back by `drills.gates`)."""
        try:
            verdict = json.loads(result.out)
        except ValueError:
            verdict = {}
        return self.keep(label, verdict, contract.doc, list(result.argv), result.code)

    def keep(
        self,
        label: str,
        verdict: dict[str, Any],
        contract: Mapping[str, Any],
        argv: list[str],
        code: int,
    ) -> Decision:
        """Record a verdict (also one reached in-process during setup) beside the world."""
        file = self.verdicts / f"{self._seqname(label)}.json"
        doc = {
            "schema": "drills.decision.v1",
            "repo": str(self.repo),
            "argv": argv,
            "exit": code,
            "contract": dict(contract),
            "verdict": verdict,
        }
        file.write_text(json.dumps(doc, indent=2) + "\n")
        return Decision(code, verdict, file)

    def integrate(
        self,
        contract: Contract,
        candidate: str,
        *,
        fault: str | None = None,
        label: str = "integrate",
        verb: str = "integrate",
        expect: Collection[int] = (0, 1, 3),
    ) -> Decision:
        env = {"INTEGRATOR_FAULT": fault} if fault else None
        argv = self._integrate_argv(verb, contract, candidate)
        result = self.run(argv, expect=expect, env=env, label=label)
        return self.keep_verdict(label, result, contract)

    def start_integrate(
        self, contract: Contract, candidate: str, *, fault: str | None = None
    ) -> subprocess.Popen[bytes]:
        env = {"INTEGRATOR_FAULT": fault} if fault else None
        return self.ctx.spawn(self._integrate_argv("integrate", contract, candidate), env=env)

    def finish_integrate(
        self, proc: subprocess.Popen[bytes], contract: Contract, label: str, timeout: float = 120
    ) -> Decision:
        out, err = proc.communicate(timeout=timeout)
        argv = tuple(str(a) for a in proc.args) if isinstance(proc.args, list) else ()
        result = Result(argv, proc.returncode, out.decode(), err.decode(), 0.0)
        self._log(result, label)
        return self.keep_verdict(label, result, contract)

    # -- the spool and the daemon ------------------------------------------------------------

    def publish(self, contract: Contract | Mapping[str, Any], candidate: str) -> str:
        """Hand a submission to the spool through the spool module (what `submit` does)."""
        doc = contract.doc if isinstance(contract, Contract) else dict(contract)
        submission = Submission.model_validate(
            {
                "schema": "integrator.submission.v1",
                "contract": doc,
                "candidate": candidate,
                "submitter": {"user": "drill", "host": "drills"},
                "submittedAt": datetime.now(UTC),
            }
        )
        sid = self.spool.submit(submission, key=self.key_for(doc))
        self.published.append(sid)
        return sid

    def key_for(self, doc: Mapping[str, Any]) -> AttemptKey | None:
        """The attempt key `contract issue` put in the canonical's key store for `doc`
        (None for a contract no claim issued: the drills' forgeries go in unsigned)."""
        task, attempt = doc.get("taskId"), doc.get("attemptId")
        generation = doc.get("ownershipGeneration")
        if not isinstance(task, str) or not isinstance(attempt, str) or type(generation) is not int:
            return None
        try:
            return KeyStore(store_of(Path(pygit2.Repository(str(self.repo)).path))).load(
                task, attempt, generation
            )
        except ConfigurationError:
            return None

    def _serve_argv(self, *args: str) -> list[str]:
        return [
            PY, "-m", "integrator", "serve", "--repo", str(self.repo), "--spool",
            str(self.spool.root), "--poll", "0.2", "--log-format", "json", *args,
        ]  # fmt: skip

    def serve(self, *args: str, env: Mapping[str, str] | None = None) -> Served:
        """Start a live daemon; its log is `logs/serve-N.log`."""
        log = self.logs / f"{self._seqname('serve')}.log"
        served = Served(self.ctx.spawn(self._serve_argv(*args), env=env, log=log), log)
        self.daemons.append(served)
        served.wait_event("daemon.ready", 1, timeout=30)
        return served

    def serve_once(
        self, *args: str, env: Mapping[str, str] | None = None, expect: int | None = 0
    ) -> Served:
        """`integrator serve --once`: drain the spool and exit."""
        log = self.logs / f"{self._seqname('serve-once')}.log"
        served = Served(self.ctx.spawn(self._serve_argv("--once", *args), env=env, log=log), log)
        self.daemons.append(served)
        code = served.proc.wait(timeout=600)
        if expect is not None and code != expect:
            raise DrillError(f"serve --once exited {code}, expected {expect}", [log])
        return served

    def config(self, text: str) -> Path:
        path = self.root / f"serve-{self._seq + 1}.toml"
        path.write_text(text)
        return path

    def filed(self, sid: str) -> tuple[str, Path] | None:
        for folder in DECIDED:
            path = self.spool.folder(folder) / sid
            if path.is_dir():
                return folder, path
        return None

    def settle(self, timeout: float = 60) -> None:
        """The settle barrier: nothing in new/ or work/, every submission filed, and a
        `decision` event logged for each by one of this world's daemons."""
        served = self.daemons

        def settled() -> bool:
            if self.spool.entries("new") or self.spool.entries("work"):
                return False
            if any(self.filed(sid) is None for sid in self.published):
                return False
            logged = {e.get("submission") for s in served for e in s.events("decision")}
            return all(sid in logged for sid in self.published)

        logs = [s.log for s in served]
        wait_until(settled, timeout, f"the spool of {self.root.name} to settle", [*logs])

    def verdict_of(self, sid: str) -> tuple[str, dict[str, Any]]:
        """(folder, verdict) of a filed submission."""
        found = self.filed(sid)
        if found is None:
            raise DrillError(f"submission {sid} was never filed", [self.spool.root])
        folder, path = found
        verdict_file = path / VERDICT_FILE
        doc = json.loads(verdict_file.read_text()) if verdict_file.exists() else {}
        return folder, doc

    # -- reading the outcome -----------------------------------------------------------------

    def ref(self, name: str) -> str | None:
        return rev(self.repo, name)

    def chain(self) -> list[str]:
        """Staging commits on the queue since `integrator init`, oldest first."""
        return first_parent_chain(self.repo, self.ref(QUEUE), self.initial)

    def landed(self) -> list[str]:
        """Candidates in the order the queue took them."""
        out = git(
            "log", "--first-parent", "--reverse",
            "--format=%(trailers:key=Integrator-Candidate,valueonly)",
            f"{self.initial}..{QUEUE}", cwd=self.repo,
        )  # fmt: skip
        return [line.strip() for line in out.splitlines() if line.strip()]

    def show(self, spec: str) -> str | None:
        """A blob's text (`<rev>:<path>`), or None when the path does not exist there."""
        if rev(self.repo, spec) is None:
            return None
        return git("cat-file", "-p", spec, cwd=self.repo)
