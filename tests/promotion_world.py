"""A world for promotion tests: a canonical repository whose policy validates with a real
shell script in the repository, a spool, real `integrator serve` / `promote` processes, and
an independent record of what the script saw and every move of the target (reflog)."""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pygit2

from integrator.documents.verdict import Verdict
from integrator.records.canonical import Canonical
from integrator.records.claims import Claims, IssueRequest
from integrator.records.prepare import prepare
from integrator.store.spool import VERDICT_FILE, Spool
from tests.daemon_world import Served, key_for, spawn_integrator, submission
from tests.gitutil import commit_files, git, make_repo, run_integrator_raw

PYTHON = sys.executable
MARKER = "BROKEN"
TASKS = 12

# The validation command: it fails when any file named BROKEN is in the checkout (unless a
# "lenient" file exists outside it), and appends "<tree> pass|fail" to a log outside the
# checkout either way, so a test can count runs and check every promoted tree by itself.
CHECK_SCRIPT = f"""#!/bin/sh
log="$1"; lenient="$2"
found=$(find . -name {MARKER} | head -n 1)
if [ -n "$found" ] && [ ! -e "$lenient" ]; then
    echo "$INTEGRATOR_VALIDATION_TREE fail" >> "$log"
    echo "check: marker $found is present in head $INTEGRATOR_VALIDATION_HEAD"
    exit 1
fi
echo "$INTEGRATOR_VALIDATION_TREE pass" >> "$log"
echo "check: ok"
"""

# Fails its first run and passes afterwards: the run count lives outside the checkout.
FLAKY_SCRIPT = """#!/bin/sh
log="$1"; counter="$2"
n=$(cat "$counter" 2>/dev/null || echo 0)
echo $((n + 1)) > "$counter"
if [ "$n" = 0 ]; then
    echo "$INTEGRATOR_VALIDATION_TREE fail" >> "$log"
    echo "flaky: first run fails"
    exit 1
fi
echo "$INTEGRATOR_VALIDATION_TREE pass" >> "$log"
"""


def policy_text(validation: str) -> str:
    return f"version = 1\n\n[validation]\n{validation}\n"


def runs_bound(landings: int) -> int:
    """⌈log₂ n⌉ + 2: the batch head, the bisection, the rebuilt head."""
    return math.ceil(math.log2(landings)) + 2


@dataclass
class PromotionWorld:
    tmp: Path
    repo: Path
    spool: Spool
    log: Path  # what the check script saw: "<tree> pass|fail" per run
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    sids: dict[str, str] = field(default_factory=dict)
    heads: dict[str, str] = field(default_factory=dict)
    contracts: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def lenient(self) -> Path:
        return self.tmp / "lenient"

    def command(self, script: str = "ci/check.sh", extra: str | None = None) -> str:
        second = extra if extra is not None else str(self.lenient)
        return f'command = ["sh", "{script}", "{self.log}", "{second}"]'

    def set_policy(self, validation: str) -> None:
        path = self.tmp / "policy.toml"
        path.write_text(policy_text(validation))
        done = self.cli("policy", "set", str(path), "--repo", str(self.repo))
        assert done.returncode == 0, done.stderr.decode()

    cli = staticmethod(run_integrator_raw)

    def candidate(
        self, task: str, files: dict[str, str], message: str | None = None
    ) -> tuple[dict[str, Any], str]:
        with Canonical(self.repo) as canonical:
            contract = Claims(canonical).issue(
                IssueRequest(task_id=task, paths=(f"{task}/**",), lease=timedelta(hours=2))
            )
            repo = canonical.repo
            base = canonical.commit(contract.base_commit)
            index = pygit2.Index()
            index.read_tree(base.tree)
            for path, text in files.items():
                blob = repo.create_blob(text.encode())
                index.add(pygit2.IndexEntry(path, blob, pygit2.enums.FileMode.BLOB))
            tree = index.write_tree(repo)
            sig = pygit2.Signature("agent", "agent@example.invalid", 1767225600, 0)
            text = message if message is not None else f"work on {task}"
            oid = str(repo.create_commit(None, sig, sig, text, tree, [base.id]))
        self.heads[task] = oid
        self.contracts[task] = json.loads(contract.to_json())
        return self.contracts[task], oid

    def submit(self, task: str, *, broken: bool = False, urgent: bool = False) -> str:
        files = {f"{task}/f.txt": f"{task} changed\n"}
        if broken:
            files[f"{task}/{MARKER}"] = "this landing breaks the build\n"
        contract, oid = self.candidate(task, files)
        doc = submission(contract, oid)
        if urgent:
            doc = doc.model_copy(update={"urgent": True})
        sid = self.spool.submit(doc, key=key_for(self.repo, contract))
        self.sids[task] = sid
        return sid

    def run(self, *args: str, env: dict[str, str] | None = None, name: str = "run") -> Served:
        return spawn_integrator(self.tmp, self.procs, *args, env=env, name=name)

    def serve_once(self, *args: str, env: dict[str, str] | None = None) -> Served:
        served = self.run(
            "serve", "--repo", str(self.repo), "--spool", str(self.spool.root), "--once",
            "--poll", "0.2", "--log-format", "json", *args, env=env, name="serve",
        )  # fmt: skip
        served.proc.wait(timeout=300)
        return served

    def promote_once(self, *args: str, env: dict[str, str] | None = None) -> Served:
        served = self.run(
            "promote", "--repo", str(self.repo), "--once", "--log-format", "json", *args,
            env=env, name="promote",
        )  # fmt: skip
        served.proc.wait(timeout=300)
        return served

    # -- what happened ------------------------------------------------------------------------

    def runs(self) -> list[tuple[str, str]]:
        if not self.log.exists():
            return []
        return [tuple(line.split()) for line in self.log.read_text().splitlines()]  # type: ignore[misc]

    def passed_trees(self) -> set[str]:
        return {tree for tree, result in self.runs() if result == "pass"}

    def target_moves(self) -> list[str]:
        """Every value refs/heads/main took, oldest first (its reflog)."""
        log = self.repo / ".git" / "logs" / "refs" / "heads" / "main"
        return [line.split()[1] for line in log.read_text().splitlines()]

    def chain(self, ref: str) -> list[str]:
        """Candidates on `ref`'s first-parent chain, oldest first."""
        out = git(
            "log", "--first-parent", "--reverse",
            "--format=%(trailers:key=Integrator-Candidate,valueonly)", ref, cwd=self.repo,
        )  # fmt: skip
        return [line.strip() for line in out.splitlines() if line.strip()]

    def verdict(self, folder: str, sid: str) -> Verdict:
        return Verdict.model_validate_json(
            (self.spool.folder(folder) / sid / VERDICT_FILE).read_bytes()
        )

    def check_target_moves(self) -> None:
        """Every value the target took after init passed the script, and none holds the
        marker; each move is forward (descends from the one before)."""
        moves = self.target_moves()
        passed = self.passed_trees()
        assert len(set(moves)) == len(moves), f"the target took one value twice: {moves}"
        for before, after in itertools.pairwise(moves):
            assert git("merge-base", "--is-ancestor", before, after, cwd=self.repo) == ""
        for oid in moves[1:]:
            tree = git("rev-parse", f"{oid}^{{tree}}", cwd=self.repo)
            assert tree in passed, f"target moved to {oid}, whose tree never passed"
            listing = git("ls-tree", "-r", "--name-only", oid, cwd=self.repo)
            assert MARKER not in {p.rsplit("/", 1)[-1] for p in listing.splitlines()}


def make_world(tmp_path: Path, validation: str | None) -> PromotionWorld:
    repo = make_repo(tmp_path / "canon")
    files = {f"t{i}/f.txt": f"t{i}\n" for i in range(TASKS + 4)}
    files["ci/check.sh"] = CHECK_SCRIPT
    files["ci/flaky.sh"] = FLAKY_SCRIPT
    commit_files(repo, files, "base", ref="refs/heads/main")
    world = PromotionWorld(
        tmp_path, repo, Spool(tmp_path / "spool").ensure(), tmp_path / "runs.log"
    )
    prepare(repo, target="main", policy_text=policy_text(validation) if validation else None)
    git("config", "core.logAllRefUpdates", "always", cwd=repo)
    return world


def promotion_world(tmp_path: Path) -> Iterator[PromotionWorld]:
    """The body of each test module's `promotion` fixture (processes killed after)."""
    world = make_world(tmp_path, None)
    yield world
    for proc in world.procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def now() -> datetime:
    return datetime.now(UTC)
