"""Validation's cost: landings promoted per second with validation by `true`, at
`max_batch` 1, 8 and 32, against the same drain without validation.

Each run is `integrator serve --once` on its own prepared copy of one workload: without a
[validation] section it lands the spool (the target follows the queue); with one, the same
drain lands into the queue and the promoter then validates and promotes it, so the figure
is submission to promoted target. Every validation is a real one: the head's tree checked
out into a fresh folder (`git archive`, read through the tar `data` filter) and `true` run
in it — what a real suite pays before its first test. The checkouts go where `TMPDIR`
says: each batch size runs with the machine's default (a disk) and, where `/dev/shm` is a
tmpfs, once more with the checkouts there, since writing the files is most of a
validation's cost. The run ends with the target at the queue head (checked), so every
landing was promoted.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bench.daemon_run import (
    DaemonRun,
    issue_contracts,
    policy_text,
    run_daemon,
    union_attributes,
    write_submissions,
)
from bench.phases import fresh
from bench.workload import Workload
from integrator.records.canonical import Canonical
from integrator.records.prepare import prepare
from integrator.store.spool import Spool

BATCHES = (1, 8, 32)
CANDIDATES = 64
SHM = Path("/dev/shm")


@dataclass
class Validated:
    """One drain with validation at one `max_batch`, checkouts in `scratch`."""

    batch: int
    scratch: str
    run: DaemonRun
    validations: int
    validation_s: list[float] = field(default_factory=list)
    promoted: bool = False

    @property
    def mean_validation_s(self) -> float:
        return sum(self.validation_s) / len(self.validation_s) if self.validation_s else 0.0


@dataclass
class ValidationResult:
    files: int
    candidates: int
    plain: DaemonRun
    runs: list[Validated]


def _prepare(
    workload: Workload, work: Path, count: int, validation: str | None
) -> tuple[Path, Spool]:
    repo = workload.copy(work / "integrator.git")
    union_attributes(repo)
    text = policy_text(shared_changelog=False)
    if validation is not None:
        text += f"\n[validation]\n{validation}\n"
    prepare(repo, target="main", policy_text=text)
    cs = workload.sets["fleet"]
    contracts = issue_contracts(repo, cs.shapes[:count], workload.base)
    spool = Spool(work / "spool")
    write_submissions(spool, list(zip(contracts, cs.oids[:count], strict=True)), repo)
    return repo, spool


def _validations(log: str) -> list[float]:
    out = []
    for line in Path(log).read_text("utf-8", "replace").splitlines():
        if '"validation.run"' in line:
            out.append(float(json.loads(line).get("duration_s", 0.0)))
    return out


def validation_phase(workload: Workload, out: Path, count: int = CANDIDATES) -> ValidationResult:
    """The drain without validation, then with `true` at each of BATCHES."""
    count = min(count, len(workload.sets["fleet"].shapes))
    work = fresh(out / "validation-plain")
    repo, spool = _prepare(workload, work, count, None)
    plain = run_daemon(repo, spool.root, work / "serve.jsonl")
    runs: list[Validated] = []
    scratches: list[tuple[str, str | None]] = [("disk", None)]
    if SHM.is_dir() and os.access(SHM, os.W_OK):
        scratches.append(("tmpfs", str(SHM)))
    for name, scratch in scratches:
        for batch in BATCHES:
            work = fresh(out / f"validation-{name}-{batch}")
            repo, spool = _prepare(
                workload, work, count, f'command = ["true"]\nmax_batch = {batch}'
            )
            with _tmpdir(scratch):
                run = run_daemon(repo, spool.root, work / "serve.jsonl")
            with Canonical(repo) as canonical:
                promoted = canonical.ref(canonical.target_ref) == canonical.ref(canonical.queue_ref)
            durations = _validations(run.log)
            runs.append(Validated(batch, name, run, len(durations), durations, promoted))
    return ValidationResult(workload.layout.files, count, plain, runs)


@contextlib.contextmanager
def _tmpdir(scratch: str | None) -> Iterator[None]:
    """TMPDIR set to `scratch` for the daemons started inside (None: as it is)."""
    before = os.environ.get("TMPDIR")
    if scratch is not None:
        os.environ["TMPDIR"] = scratch
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = before
