"""The integrator contender: a prepared canonical copy, contracts, a spool, `serve --once`.

Everything before the daemon starts (copying, `integrator init`, issuing contracts,
writing submissions) is set-up and not timed. The figures come from the daemon itself:
its `decision` log events carry `latency_ms` (claim of the submission to verdict), and
`daemon.ready` / `daemon.drained` bound the drain. Peak RSS is the daemon process's
`ru_maxrss` from `wait4`, which also covers the git children it waited for.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pygit2

from bench.workload import CHANGELOG, Shape, Workload
from integrator.documents.policy import default_policy_text
from integrator.documents.submission import Submission, Submitter
from integrator.files import write_file
from integrator.records.canonical import Canonical
from integrator.records.claims import Claims, IssueRequest
from integrator.records.prepare import prepare
from integrator.store.keys import KeyStore, store_of
from integrator.store.spool import SUBMISSION_FILE, Spool, new_id

LEASE = timedelta(days=1)
SUBMITTER = Submitter(user="bench", host="localhost")
# Submission ids are minted from this instant plus the candidate's position, so the spool
# order (and so the landing order) is the candidate order on every run.
EPOCH = datetime(2030, 1, 1, tzinfo=UTC)


def policy_text(*, shared_changelog: bool) -> str:
    """The default policy; the shared-file workload also marks CHANGELOG shared."""
    text = default_policy_text()
    if not shared_changelog:
        return text
    old = "[shared]\nresources = []\npaths = []\n"
    if text.count(old) != 1:
        raise RuntimeError("the default policy no longer has the [shared] table bench expects")
    return text.replace(old, f'[shared]\nresources = []\npaths = ["{CHANGELOG}"]\n')


def union_attributes(repo: Path) -> None:
    """`CHANGELOG merge=union` where git merge-tree (and integrator) read it in a bare repo."""
    info = repo / "info"
    info.mkdir(exist_ok=True)
    (info / "attributes").write_text(f"{CHANGELOG} merge=union\n")


def prepare_copy(workload: Workload, dest: Path, *, shared_changelog: bool) -> Path:
    """A copy of the workload's repository, prepared with `integrator init`."""
    workload.copy(dest)
    union_attributes(dest)
    prepare(dest, target="main", policy_text=policy_text(shared_changelog=shared_changelog))
    return dest


def issue_contracts(repo: Path, shapes: tuple[Shape, ...], base: str) -> list[dict[str, Any]]:
    """One live contract per candidate, covering exactly its folders (JSON documents)."""
    out: list[dict[str, Any]] = []
    with Canonical(repo) as canonical:
        claims = Claims(canonical)
        for shape in shapes:
            contract = claims.issue(
                IssueRequest(
                    task_id=shape.task_id,
                    paths=shape.contract_paths,
                    base=base,
                    lease=LEASE,
                    holder=shape.task_id,
                ),
                # The folders are disjoint by construction; the overlap scan over every live
                # claim is quadratic set-up time that measures nothing here.
                force_shared=True,
            )
            out.append(json.loads(contract.to_json()))
    return out


def stale_contract(repo: Path, task_id: str, paths: tuple[str, ...], base: str) -> dict[str, Any]:
    """A contract whose generation was superseded by a forced reclaim."""
    with Canonical(repo) as canonical:
        claims = Claims(canonical)
        old = claims.issue(IssueRequest(task_id=task_id, paths=paths, base=base, lease=LEASE))
        claims.reclaim(task_id, force=True, lease=LEASE, base=base)
    doc: dict[str, Any] = json.loads(old.to_json())
    return doc


def write_submissions(
    spool: Spool, items: list[tuple[dict[str, Any], str]], repo: Path
) -> list[str]:
    """Publish (contract, candidate) pairs into `new/` in order, Maildir-style, each signed
    with the attempt key `repo` issued its contract with (as `integrator submit` signs).

    Unlike `Spool.publish` this does not fsync each file: the producer is not what is
    measured, and four fsyncs per submission would make a 10,000-submission flood take
    minutes to write. One `os.sync()` at the end puts everything on disk before the daemon
    starts, so its timing does not absorb write-back.
    """
    spool.ensure()
    tmp, new = spool.folder("tmp"), spool.folder("new")
    sids: list[str] = []
    store = KeyStore(store_of(Path(pygit2.Repository(str(repo)).path)))
    for i, (contract, candidate) in enumerate(items):
        now = EPOCH + timedelta(microseconds=i)
        sid = new_id(now)
        key = store.load(contract["taskId"], contract["attemptId"], contract["ownershipGeneration"])
        submission = Submission.model_validate(
            {
                "schema": "integrator.submission.v1",
                "contract": contract,
                "candidate": candidate,
                "submitter": SUBMITTER,
                "submittedAt": now,
                "signature": key.signature(sid, candidate) if key is not None else None,
            }
        )
        draft = tmp / sid
        draft.mkdir()
        write_file(draft / SUBMISSION_FILE, submission.to_json().encode() + b"\n", sync=False)
        os.rename(draft, new / sid)
        sids.append(sid)
    os.sync()
    return sids


@dataclass
class DaemonRun:
    """What one `serve --once` reported about itself."""

    startup_s: float
    drain_s: float
    wall_s: float
    decided: int
    latencies_ms: list[float] = field(default_factory=list)
    decisions: dict[str, int] = field(default_factory=dict)
    codes: dict[str, int] = field(default_factory=dict)
    peak_rss_mb: float = 0.0
    cpu_s: float = 0.0  # user + system, the daemon and the children it waited for
    exit_code: int = 0
    log: str = ""

    @property
    def per_second(self) -> float:
        return self.decided / self.drain_s if self.drain_s > 0 else 0.0


def _ts(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(str(event["timestamp"])).timestamp()


def serve_command(repo: Path, spool: Path, config: Path | None = None) -> list[str]:
    command = [
        sys.executable,
        "-m",
        "integrator",
        "serve",
        "--repo",
        str(repo),
        "--spool",
        str(spool),
        "--once",
        "--no-watch",
        "--log-format",
        "json",
    ]
    return [*command, "--config", str(config)] if config is not None else command


def one_at_a_time(folder: Path) -> Path:
    """A `[serve]` configuration with batch-size 1: each candidate's own cost, unbatched."""
    path = folder / "serve-one-at-a-time.toml"
    path.write_text("[serve]\nbatch-size = 1\n")
    return path


def run_daemon(
    repo: Path,
    spool: Path,
    log_path: Path,
    *,
    config: Path | None = None,
    wrap: list[str] | None = None,
) -> DaemonRun:
    """Run `integrator serve --once` until the spool is drained; parse its JSON log.

    `wrap` prefixes the command: `taskset` (which execs it), or a profiler, whose figures
    are not reported.
    """
    command = [*(wrap or []), *serve_command(repo, spool, config)]
    with open(log_path, "wb") as out:
        spawned = time.time()
        started = time.perf_counter()
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
    events: list[dict[str, Any]] = []
    for line in log_path.read_text("utf-8", "replace").splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict) and "event" in doc:
            events.append(doc)
    ready = next((e for e in events if e["event"] == "daemon.ready"), None)
    drained = next((e for e in events if e["event"] == "daemon.drained"), None)
    decisions = [e for e in events if e["event"] == "decision"]
    if ready is None or drained is None or proc.returncode != 0:
        raise RuntimeError(
            f"integrator serve exited {proc.returncode} without draining; see {log_path}"
        )
    codes: Counter[str] = Counter(c for e in decisions for c in e.get("codes", []))
    return DaemonRun(
        startup_s=_ts(ready) - spawned,
        drain_s=_ts(drained) - _ts(ready),
        wall_s=wall,
        decided=len(decisions),
        latencies_ms=[float(e["latency_ms"]) for e in decisions],
        decisions=dict(Counter(str(e["decision"]) for e in decisions)),
        codes=dict(codes),
        # Linux reports ru_maxrss in KiB.
        peak_rss_mb=usage.ru_maxrss / 1024,
        cpu_s=usage.ru_utime + usage.ru_stime,
        exit_code=proc.returncode,
        log=str(log_path),
    )


def submit_and_serve(
    repo: Path, spool: Path, contracts: list[Path], oids: tuple[str, ...], log_path: Path
) -> tuple[float, DaemonRun]:
    """Wall time of one `integrator submit` process per candidate, then `serve --once`.

    This is the like-for-like counterpart of mergetrain's enqueue-then-deploy: every step
    through the command line, as an operator's script would run it.
    """
    started = time.perf_counter()
    for contract, oid in zip(contracts, oids, strict=True):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "integrator",
                "submit",
                "--create",
                "--spool",
                str(spool),
                "--contract",
                str(contract),
                "--candidate",
                oid,
                "--repo",
                str(repo),
            ],
            capture_output=True,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"integrator submit failed: {proc.stderr.decode()[-300:]}")
    run = run_daemon(repo, spool, log_path)
    if run.decisions.get("ACCEPTED", 0) != len(oids):
        raise RuntimeError(f"integrator accepted {run.decisions} of {len(oids)}; see {log_path}")
    return time.perf_counter() - started, run
