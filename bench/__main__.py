"""`python -m bench [--full]`: build the workloads, run every contender, print one table.

The quick default (`make bench-quick`) keeps every workload's shape but runs the fleet on
10,000 files, mergetrain on 10 branches and the scaling curve in two rounds, so it finishes
in under two minutes on two cores; `--full` (`make bench`) runs the full sizes: the fleet
on 100,000 files, mergetrain on 50 branches, three scaling rounds. The scaling sizes
(1,000 / 10,000 / 100,000 files) and the 10,000-submission stale flood are the same in both.
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from bench import (
    phases,
    profile,
    remote_run,
    rows,
    startup_run,
    targets,
    validation_run,
    workers_run,
    workload,
)
from bench.report import Row, machine, render, write_json

T = TypeVar("T")


@dataclass(frozen=True)
class Plan:
    """Sizes of one run. Changing them breaks comparability with earlier runs' JSON."""

    mode: str
    fleet_files: int
    fleet_candidates: int
    stale_submissions: int
    scaling_files: tuple[int, ...]
    scaling_candidates: int
    scaling_rounds: int
    peer_branches: int
    floor_transactions: int
    # Every validation checks the head's whole tree out: its cost is the file count's.
    validation_files: int
    worker_rounds: int


QUICK = Plan("quick", 10_000, 200, 10_000, (1_000, 10_000, 100_000), 20, 2, 10, 300, 1_000, 1)
FULL = Plan("full", 100_000, 200, 10_000, (1_000, 10_000, 100_000), 20, 3, 50, 1_000, 10_000, 3)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--full", action="store_true", help="the full sizes (make bench)")
    parser.add_argument("--out", type=Path, default=Path("bench-out"), help="default bench-out/")
    parser.add_argument("--seed", type=int, default=1, help="workload seed (default 1)")
    parser.add_argument("--no-mergetrain", action="store_true", help="skip the mergetrain peer")
    parser.add_argument(
        "--no-validation", action="store_true", help="skip the validation phase (no target)"
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also run the fleet once more under py-spy (installed into its own venv) and "
        "report where the daemon's time goes",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work repositories")
    return parser.parse_args(argv)


class Stopwatch:
    """Prints each phase as it starts and ends, so a slow run shows where it is."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.phases: dict[str, float] = {}

    def phase(self, name: str) -> _Phase:
        return _Phase(self, name)


class _Phase:
    def __init__(self, watch: Stopwatch, name: str) -> None:
        self.watch, self.name = watch, name

    def __enter__(self) -> None:
        self.t0 = time.perf_counter()
        print(f"[{time.perf_counter() - self.watch.started:6.1f}s] {self.name} …", flush=True)

    def __exit__(self, *exc: object) -> None:
        self.watch.phases[self.name] = round(time.perf_counter() - self.t0, 2)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    # A stuck run can be asked where it is: kill -USR1 <pid> prints every thread's stack.
    faulthandler.register(signal.SIGUSR1)
    plan = FULL if args.full else QUICK
    load_before = [round(x, 2) for x in os.getloadavg()]
    out: Path = args.out.resolve()
    work, trash, discard = _scratch(out)
    _compile_bytecode()
    watch = Stopwatch()
    built: dict[int, workload.Workload] = {}

    def base(files: int) -> workload.Workload:
        if files not in built:
            sets = {
                "fleet": (
                    min(plan.fleet_candidates, workload.layout_for(files).max_candidates),
                    False,
                )
            }
            if files == plan.fleet_files:
                sets["shared"] = (plan.fleet_candidates, True)
            with watch.phase(f"build {files:,}-file repository"):
                built[files] = workload.build(work / f"base-{files}.git", files, args.seed, sets)
        return built[files]

    def measured(name: str, run: Callable[[], T]) -> T:
        """Run one phase, then set its copies aside (not the base repositories) unless --keep."""
        with watch.phase(name):
            result = run()
        if not args.keep:
            for path in work.iterdir():
                if not path.name.startswith("base-"):
                    discard(path)
        return result

    fleet_base = base(plan.fleet_files)
    fleet = measured(
        "fleet: integrator (one at a time, batched), then the plain git pipeline",
        lambda: phases.fleet(fleet_base, "fleet", work),
    )
    workers = measured(
        "fleet, batched, with and without an evaluation worker (every core, one core)",
        lambda: workers_run.workers_phase(fleet_base, "fleet", work, plan.worker_rounds),
    )
    remote = measured(
        "fleet over a git daemon on 127.0.0.1 (remote mode), batched",
        lambda: remote_run.remote_phase(fleet_base, "fleet", work, None),
    )
    shared = measured("fleet + shared CHANGELOG", lambda: phases.fleet(fleet_base, "shared", work))
    stale = measured(
        f"stale flood: {plan.stale_submissions:,} submissions",
        lambda: phases.stale_flood(fleet_base, plan.stale_submissions, work),
    )
    scaling = phases.combine(
        [
            measured(
                f"scaling round {n}: {plan.scaling_candidates} candidates at "
                f"{w.layout.files:,} files",
                partial(phases.fleet, w, "fleet", work, count=plan.scaling_candidates, plain=False),
            )
            for n in range(1, plan.scaling_rounds + 1)
            for w in [base(files) for files in plan.scaling_files]
        ]
    )
    started = measured(
        "start-up: the guard per hook event, the gate CLI on a real tree",
        lambda: startup_run.startup(work / "startup"),
    )
    validated = (
        None
        if args.no_validation
        else measured(
            f"validation by `true` at max_batch 1, 8, 32, {plan.validation_files:,} files",
            lambda: validation_run.validation_phase(base(plan.validation_files), work),
        )
    )
    floors = measured(
        "floor: ref moves alone",
        lambda: phases.floors(fleet_base, plan.floor_transactions, work),
    )
    peer = (
        None
        if args.no_mergetrain
        else measured(
            f"mergetrain vs integrator: {plan.peer_branches} branches",
            lambda: phases.peer(fleet_base, plan.peer_branches, work, out),
        )
    )
    hotspots = _profiles(fleet_base, work, out, measured) if args.profile else []
    results: dict[str, Any] = {
        "plan": plan,
        "seed": args.seed,
        "fleet": fleet,
        "workers": workers,
        "remote": remote,
        "shared": shared,
        "stale": stale,
        "scaling": scaling,
        "startup": started,
        "floors": floors,
        "validation": validated,
        "peer": peer,
        "profile": hotspots,
    }
    table = _table(results)
    _report(out, plan, args.seed, table, results, hotspots, watch, load_before)
    if not args.keep:
        discard(work)
    _remove_later(trash)
    return 0


def _scratch(out: Path) -> tuple[Path, Path, Callable[[Path], None]]:
    """(work, trash, discard): a fresh work folder, and a way to set finished copies aside."""
    work = out / "work"
    trash = out / "trash"

    def discard(path: Path) -> None:
        # Deleting a stale flood's 10,000 folders and 50,000 loose objects takes longer than
        # the flood itself, and its I/O would disturb the next phase: set it aside now,
        # delete everything in one background `rm` when the run is over.
        trash.mkdir(exist_ok=True)
        path.rename(trash / f"{time.time_ns()}-{path.name}")

    if work.exists():
        discard(work)
    if trash.exists():
        # A previous run's background clean-up may still be running: finish it before
        # measuring anything, or its disk traffic lands in this run's figures.
        print(f"removing the previous run's scratch in {trash} …", flush=True)
        subprocess.run(["rm", "-rf", str(trash)], check=False)
    work.mkdir(parents=True)
    return work, trash, discard


def _table(results: dict[str, Any]) -> list[Row]:
    """The report's rows, phase by phase, in the order they ran."""
    plan: Plan = results["plan"]
    peer = results["peer"]
    return [
        *rows.fleet_rows(results["fleet"], shared=False),
        *rows.workers_rows(results["workers"], plan.fleet_files),
        *rows.remote_rows(results["remote"], results["fleet"]),
        *rows.fleet_rows(results["shared"], shared=True),
        *rows.stale_rows(results["stale"], plan.stale_submissions, results["floors"]),
        *rows.scaling_rows(results["scaling"]),
        *rows.startup_rows(results["startup"]),
        *(rows.validation_rows(results["validation"]) if results["validation"] else []),
        *rows.floor_rows(results["floors"], results["fleet"]),
        *(rows.peer_rows(peer) if peer is not None else []),
        *targets.target_rows(results),
    ]


def _profiles(
    fleet_base: workload.Workload,
    work: Path,
    out: Path,
    measured: Callable[[str, Callable[[], profile.Hotspots]], profile.Hotspots],
) -> list[profile.Hotspots]:
    """The fleet, shared and stale-flood phases again under py-spy (`--profile`)."""
    hotspots = [
        measured(
            f"profile: {name} again, under py-spy",
            partial(profile.fleet_profile, fleet_base, name, work, out),
        )
        for name in ("fleet", "shared")
    ]
    hotspots.append(
        measured(
            "profile: a stale flood of 2,000, under py-spy",
            lambda: profile.stale_profile(fleet_base, 2_000, work, out),
        )
    )
    return hotspots


def _compile_bytecode() -> None:
    """Byte-compile the package first, as an installation does: with
    PYTHONDONTWRITEBYTECODE set (some shells and CI images set it), every command would
    otherwise compile its modules afresh, and the start-up figures would measure that."""
    import compileall

    import integrator

    compileall.compile_dir(str(Path(integrator.__file__).parent), quiet=1)


def _remove_later(trash: Path) -> None:
    """Delete the run's scratch in one background `rm`, after the figures are written."""
    if trash.exists():
        subprocess.Popen(
            ["rm", "-rf", str(trash)],
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )


def _report(
    out: Path,
    plan: Plan,
    seed: int,
    table: list[Row],
    results: dict[str, Any],
    hotspots: list[profile.Hotspots],
    watch: Stopwatch,
    load_before: list[float],
) -> None:
    """Print the table (and profiles) and write the run's JSON and text records."""
    host = machine()
    host["load_average_before"] = load_before
    text = render(table)
    print()
    print(
        f"integrator bench ({plan.mode}, seed {seed}) on {host['nproc']} × {host['cpu']}, "
        f"{host['git']}, Python {host['python']}, commit {host['commit']}"
        + (" (modified)" if host["worktree_modified"] else "")
        + f"; load average {load_before[0]} before, {host['load_average'][0]} after"
    )
    print(text)
    for spots in hotspots:
        print()
        print(profile.render(spots))
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    document = {
        "schema": "integrator.bench.v1",
        "at": stamp,
        "machine": host,
        "phases_s": watch.phases,
        "table": [r.__dict__ for r in table],
        "results": results,
    }
    for path in (out / f"bench-{plan.mode}-{stamp}.json", out / f"latest-{plan.mode}.json"):
        write_json(path, document)
    (out / f"latest-{plan.mode}.txt").write_text(text + "\n")
    print(
        f"\nwrote {out / f'latest-{plan.mode}.json'} in {time.perf_counter() - watch.started:.0f} s"
    )


if __name__ == "__main__":
    sys.exit(main())
