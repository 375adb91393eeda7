"""The measured phases of one benchmark run; each returns plain data for the report.

Every contender gets its own copy of the same workload repository, so no run sees another
run's refs, objects or caches beyond the operating system's page cache.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from bench import baseline, correctness, mergetrain_peer
from bench.daemon_run import (
    DaemonRun,
    issue_contracts,
    one_at_a_time,
    prepare_copy,
    run_daemon,
    stale_contract,
    submit_and_serve,
    union_attributes,
    write_submissions,
)
from bench.workload import Workload
from integrator import refnames
from integrator.plumbing import git
from integrator.records.canonical import Canonical
from integrator.store.spool import Spool


def fresh(path: Path) -> Path:
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


@dataclass
class FleetResult:
    """One fleet-style workload: integrator's daemon against the plain pipeline.

    The daemon drains the same spool twice on two identical copies: with its default
    batching (throughput) and with batch-size 1 (each candidate's own latency; in a batch a
    candidate's claim-to-verdict time includes the rest of its batch).
    """

    name: str
    files: int
    candidates: int
    batched: DaemonRun
    single: DaemonRun
    plain: baseline.PipelineRun
    checks: dict[str, correctness.Verdict] = field(default_factory=dict)
    # Loose objects the daemon wrote per landed candidate (staging commit, rebuilt trees,
    # consumed-claim commit...): each is one file, the main cost per landing measured here.
    objects_per_landing: dict[str, float] = field(default_factory=dict)
    sequence_problems: list[str] = field(default_factory=list)

    @property
    def correct(self) -> bool:
        return all(c.ok and c.checked == self.candidates for c in self.checks.values())


def queue_head(repo: Path) -> str:
    with Canonical(repo) as canonical:
        head = canonical.ref(canonical.queue_ref)
    if head is None:
        raise RuntimeError(f"{repo} has no queue ref")
    return head


def prepare_fleet(
    workload: Workload, name: str, work: Path, count: int | None = None
) -> tuple[Path, Spool]:
    """A prepared copy with one contract per candidate, and a spool holding them all."""
    cs = workload.sets[name]
    shared = any(s.changelog for s in cs.shapes)
    repo = prepare_copy(workload, work / "integrator.git", shared_changelog=shared)
    contracts = issue_contracts(repo, cs.shapes[:count], workload.base)
    spool = Spool(work / "spool")
    write_submissions(spool, list(zip(contracts, cs.oids[:count], strict=True)), repo)
    return repo, spool


def stored_objects(repo: Path) -> int:
    """How many objects the repository stores, loose and packed (`git count-objects -v`).

    Landings write packs and the engine repacks small packs now and then, so counting
    loose files alone would say nothing about how many objects a landing writes.
    """
    out = git.run_git(["count-objects", "-v"], cwd=repo).stdout.decode()
    fields = dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)
    return int(fields["count"]) + int(fields["in-pack"])


def _drain(
    workload: Workload, name: str, work: Path, count: int | None, *, single: bool
) -> tuple[DaemonRun, list[correctness.Landing], correctness.Verdict, float]:
    repo, spool = prepare_fleet(workload, name, fresh(work), count)
    config = one_at_a_time(work) if single else None
    before = stored_objects(repo)
    run = run_daemon(repo, spool.root, work / "serve.jsonl", config=config)
    written = stored_objects(repo) - before
    landings = correctness.queue_landings(repo, queue_head(repo), workload.base)
    per_landing = written / len(landings) if landings else 0.0
    return run, landings, correctness.check_landings(repo, landings), per_landing


def fleet(
    workload: Workload, name: str, out: Path, *, count: int | None = None, plain: bool = True
) -> FleetResult:
    """Land candidate set `name` batched, one at a time, and with the plain pipeline.

    `plain=False` runs only the one-at-a-time daemon (the scaling curve needs its latency).
    """
    oids = workload.sets[name].oids[:count]
    work = fresh(out / f"{name}-{workload.layout.files}")
    single, _, single_check, objects = _drain(workload, name, work / "single", count, single=True)
    # Until the batched run below replaces it, the one-at-a-time run stands for both.
    result = FleetResult(
        name, workload.layout.files, len(oids), single, single, baseline.PipelineRun()
    )
    result.checks["one at a time"] = single_check
    result.objects_per_landing["one at a time"] = objects
    if not plain:
        return result
    batched, landings, check, objects = _drain(
        workload, name, work / "batched", count, single=False
    )
    result.batched = batched
    result.checks["batched"] = check
    result.objects_per_landing["batched"] = objects
    plain_repo = workload.copy(work / "plain.git")
    union_attributes(plain_repo)
    result.plain = baseline.plain_pipeline(plain_repo, workload.base, oids)
    result.sequence_problems = correctness.same_sequence(
        landings, [t for _, _, t in result.plain.landed]
    )
    return result


def combine(runs: list[FleetResult]) -> list[FleetResult]:
    """One result per repository size from interleaved rounds: latencies pooled, checks kept.

    The scaling curve runs its sizes in turn, round after round, so a change in the
    machine's load (these machines are shared) weighs on every size alike.
    """
    by_size: dict[int, FleetResult] = {}
    for run in runs:
        check = run.checks["one at a time"]
        pooled = by_size.get(run.files)
        if pooled is None:
            pooled = by_size[run.files] = dataclasses.replace(
                run, single=dataclasses.replace(run.single, latencies_ms=[]), checks={}
            )
            pooled.batched = pooled.single
        pooled.single.latencies_ms.extend(run.single.latencies_ms)
        pooled.checks[f"round {len(pooled.checks) + 1}"] = check
    return [by_size[files] for files in sorted(by_size)]


def prepare_stale(workload: Workload, submissions: int, work: Path) -> tuple[Path, Spool]:
    """`submissions` copies of a contract whose generation a forced reclaim superseded."""
    repo = prepare_copy(workload, work / "integrator.git", shared_changelog=False)
    contract = stale_contract(repo, "bench-stale", ("d0/**",), workload.base)
    spool = Spool(work / "spool")
    candidate = workload.sets["fleet"].oids[0]
    write_submissions(spool, [(contract, candidate)] * submissions, repo)
    return repo, spool


def stale_flood(workload: Workload, submissions: int, out: Path) -> DaemonRun:
    """Drain a spool of stale submissions; every one must be fenced, none accepted."""
    work = fresh(out / "stale")
    repo, spool = prepare_stale(workload, submissions, work)
    return run_daemon(repo, spool.root, work / "serve.jsonl")


def floors(workload: Workload, transactions: int, out: Path) -> list[baseline.FloorRun]:
    """The two-ref transaction alone (git's defaults, durable, durable + syncfs), one loose
    object written through pygit2 (the unit of integrator's other per-landing cost), and
    what a stale submission costs the file system: one held ref, and the spool's moves."""
    repo = workload.copy(fresh(out / "floor") / "floor.git")
    a, b = workload.base, workload.sets["fleet"].oids[0]
    return [
        baseline.ref_floor(repo, a, b, transactions, durable=False),
        baseline.ref_floor(repo, a, b, transactions, durable=True),
        baseline.ref_floor(repo, a, b, transactions, durable=True, syncfs=True),
        baseline.object_floor(repo, transactions),
        baseline.held_ref_floor(repo, b, transactions, 64),
        baseline.spool_floor(out / "floor" / "spool", transactions),
    ]


@dataclass
class PeerResult:
    """mergetrain and integrator landing the same agent branches, end to end."""

    branches: int
    files: int
    mergetrain: mergetrain_peer.PeerRun
    integrator_wall_s: float | None = None
    integrator_serve_s: float | None = None
    tree_differences: list[str] = field(default_factory=list)
    note: str = ""


def peer(workload: Workload, branches: int, out: Path, venv_root: Path) -> PeerResult:
    """mergetrain's enqueue + deploy against integrator's submit + serve, same 50 changes."""
    cs = workload.sets["fleet"]
    work = fresh(out / "peer")
    exe, how = mergetrain_peer.ensure_venv(venv_root)
    if exe is None:
        run = mergetrain_peer.PeerRun(branches, None, note=how)
        return PeerResult(branches, workload.layout.files, run, note=how)
    mt_repo = mergetrain_peer.setup(workload, cs, branches, fresh(work / "mergetrain"))
    theirs = mergetrain_peer.land(exe, mt_repo, branches)

    repo = prepare_copy(workload, work / "integrator.git", shared_changelog=False)
    contracts = issue_contracts(repo, cs.shapes[:branches], workload.base)
    files = []
    for shape, contract in zip(cs.shapes, contracts, strict=False):
        path = work / f"contract-{shape.index:04d}.json"
        path.write_text(json.dumps(contract))
        files.append(path)
    log = work / "serve.jsonl"
    wall, served = submit_and_serve(repo, work / "spool", files, cs.oids[:branches], log)
    result = PeerResult(
        branches, workload.layout.files, theirs, wall, served.wall_s, note=theirs.note
    )
    if theirs.tree is not None:
        result.tree_differences = mergetrain_peer.differing_paths(
            mt_repo.parent / "remote.git", theirs.tree, repo, f"{refnames.QUEUE}main"
        )
    return result
