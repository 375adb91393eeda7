"""`python -m bench.queue_run` (`make bench-queue`): merge-queue strategies side by side on
one generated workload, with the real engine, the real promoter and real git.

Each strategy gets a fresh repository built from the same seed (8 disjoint areas, 200
candidates, 3% culprits, 5% of runs flaky) and the same arrival schedule. A driver lands
each candidate at its arrival time through the integrator's engine and runs the promoter's
rounds until every candidate has landed and nothing is left to promote, on a simulated
clock (`run_strategy`). The figures come from the suite's own log (every run, its simulated duration) and
the promotion records in git (when each landing was promoted, what was ejected):

- runs and CI-seconds (simulated) per landing promoted;
- innocent ejections: landings ejected that were not culprits;
- whether the target ever held a culprit (every value of its reflog checked);
- p50 / p95 from landing to promotion, in simulated seconds; landings per simulated hour.

Strategies:

- `one-at-a-time`: every landing validated alone (max_batch 1);
- `single-queue`: one queue, batches of 16 and bisection (bors-style);
- `fifo-groups`: groups of 4, four validated at once speculatively (GitHub merge queue);
- `integrator`: one scope per area, flaky reruns, the adaptive window, the result cache.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from bench.queue_world import Candidate, Shape, World, build, plan_candidates, scopes_toml
from integrator.daemon import logs
from integrator.landing.engine import Integrator
from integrator.promotion.promoter import Promoter
from integrator.records.canonical import Canonical
from integrator.records.validations import promotions

STRATEGIES: dict[str, str] = {
    "one-at-a-time": "{command}\nmax_batch = 1\nconcurrency = 1\n",
    "single-queue": "{command}\nmax_batch = 16\nconcurrency = 1\n",
    "fifo-groups": "{command}\nmax_batch = 4\nconcurrency = 4\n",
    "integrator": "{command}\nmax_batch = 16\nconcurrency = 2\nbudget = 8\n"
    'flaky_reruns = 1\nadaptive = true\ntoolchain = "bench-suite-v1"\nlinger = {linger}\n',
}
LINGER_SUITES = 2.0  # integrator's linger, in one area's suites (docs/validation.md)
LINGER_STEP = 0.01  # simulated seconds past a lingering batch's start (dates are in seconds)
ROUND_PAUSE = 0.002  # wall seconds between idle rounds
SUITE_WALL = 0.1  # wall seconds one full suite sleeps (time is simulated: see run_strategy)


@dataclass
class Figures:
    strategy: str
    landed: int
    promoted: int
    runs: int
    ci_seconds: float
    innocent: int
    culprits_ejected: int
    culprit_on_target: bool
    p50_s: float | None
    p95_s: float | None
    per_hour: float | None
    wall_s: float
    flaky_runs: int

    @property
    def runs_per_landing(self) -> float:
        return self.runs / self.promoted if self.promoted else float("inf")

    @property
    def ci_per_landing(self) -> float:
        return self.ci_seconds / self.promoted if self.promoted else float("inf")


def run_strategy(
    name: str, shape: Shape, plan: list[Candidate], work: Path, linger: float | None = None
) -> Figures:
    """One strategy from an empty queue to every candidate promoted or ejected.

    Time is simulated: the clock starts at 0, each candidate lands (through the engine) once
    the clock has passed its arrival, and a round of validation advances the clock by its
    scripted length — the longest of its runs, a run's reruns one after the other, since
    the round's heads run at once. Promotions, ejections and reorders take no simulated
    time (they are milliseconds of git). So the figures do not depend on the machine's load;
    the runs still happen, in real checkouts, each sleeping its scaled duration."""
    validation = STRATEGIES[name] + (scopes_toml(shape) if name == "integrator" else "")
    # Lingering two area suites: a run covers what lands while two others would have run.
    linger = LINGER_SUITES * shape.scope_s if linger is None else linger
    validation = validation.replace("{linger}", f"{linger:g}")
    world = build(work / name, shape, validation, plan)
    shm = Path("/dev/shm")
    scratch = Path(tempfile.mkdtemp(prefix="bench-queue-", dir=shm if shm.is_dir() else None))
    landed: dict[str, float] = {}
    promoted_at: dict[str, float] = {}
    now = 0.0
    start = time.time()  # the simulated clock's origin: what landings and records are dated

    def clock() -> datetime:
        return datetime.fromtimestamp(start + now, UTC)

    waiting = list(world.items)
    wall = time.monotonic()
    try:
        with (
            Canonical(world.repo, clock=clock) as canonical,
            Canonical(world.repo, clock=clock) as landing_side,
        ):
            engine = Integrator(landing_side)
            promoter = Promoter(canonical, scratch=scratch)
            seen_runs = 0
            while True:
                while waiting and waiting[0][0].arrival_s <= now:
                    candidate, contract, commit = waiting.pop(0)
                    verdict = engine.integrate(contract, commit)
                    if verdict.staging_commit is not None:
                        landed[verdict.staging_commit] = candidate.arrival_s
                done = promoter.round()
                lines = world.log.read_text().splitlines()
                now += _round_length(lines[seen_runs:])
                seen_runs = len(lines)
                if done.action == "promote":
                    _promoted(canonical, promoted_at, now)
                if done.progress:
                    continue
                if done.action == "linger":  # a batch waits for more: the clock runs on
                    until = float(str(done.detail["until"])) - start + LINGER_STEP
                    if waiting:
                        until = min(until, waiting[0][0].arrival_s)
                    now = max(now, until)
                    continue
                if waiting:
                    now = max(now, waiting[0][0].arrival_s)
                    continue
                if done.action == "idle":
                    break
                time.sleep(ROUND_PAUSE)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return _figures(name, world, shape, plan, landed, promoted_at, time.monotonic() - wall)


def _round_length(lines: list[str]) -> float:
    """A round's simulated length: its longest job, each job its attempts in a row."""
    jobs: dict[tuple[str, str], float] = {}
    for line in lines:
        scope, tree, _, _, duration, _ = line.split()
        jobs[scope, tree] = jobs.get((scope, tree), 0.0) + float(duration)
    return max(jobs.values(), default=0.0)


def _promoted(canonical: Canonical, promoted_at: dict[str, float], now: float) -> None:
    """Every landing the newest promotion record promoted, at `now`."""
    found = promotions(canonical, "main", limit=1)
    if found and found[0][1].action == "promote":
        for c in found[0][1].landings:
            promoted_at.setdefault(c.landing, now)


def _figures(
    name: str, world: World, shape: Shape, plan: list[Candidate], landed: dict[str, float],
    promoted_at: dict[str, float], wall: float,
) -> Figures:  # fmt: skip
    runs = [line.split() for line in world.log.read_text().splitlines() if line.strip()]
    culprits = {c.task for c in plan if c.culprit}
    innocent = ejected_culprits = 0
    with Canonical(world.repo) as canonical:
        for _, record in promotions(canonical, "main"):
            if record.action == "eject":
                for e in record.ejected:
                    if e.task_id in culprits:
                        ejected_culprits += 1
                    else:
                        innocent += 1
        on_target = _culprit_on_target(canonical, world)
    latencies = sorted(max(0.0, promoted_at[k] - t) for k, t in landed.items() if k in promoted_at)
    span_h = max(promoted_at.values(), default=0.0) / 3600
    return Figures(
        strategy=name, landed=len(landed), promoted=len(promoted_at), runs=len(runs),
        ci_seconds=sum(float(r[4]) for r in runs), innocent=innocent,
        culprits_ejected=ejected_culprits, culprit_on_target=on_target,
        p50_s=_pct(latencies, 0.5), p95_s=_pct(latencies, 0.95),
        per_hour=len(promoted_at) / span_h if span_h > 0 else None, wall_s=wall,
        flaky_runs=sum(1 for r in runs if r[5] == "flake"),
    )  # fmt: skip


def _pct(values: list[float], q: float) -> float | None:
    return values[min(len(values) - 1, int(q * len(values)))] if values else None


def _culprit_on_target(canonical: Canonical, world: World) -> bool:
    """Whether any value the target took holds a culprit's marker (its reflog)."""
    log = Path(canonical.repo.path) / "logs" / "refs" / "heads" / "main"
    for line in log.read_text().splitlines():
        tree = canonical.commit(line.split()[1]).tree
        if any(path in tree for path in world.culprit_paths):
            return True
    return False


def targets(results: dict[str, Figures], shape: Shape) -> list[tuple[str, bool, str]]:
    """The issue's targets, each met or not, with the figures it compares."""
    mine = results.get("integrator")
    if mine is None:
        return []
    singles = [results[n] for n in ("single-queue", "fifo-groups") if n in results]
    best = min((f.ci_per_landing for f in singles), default=None)
    alone = results.get("one-at-a-time")
    out = [
        ("0 innocent ejections, the target never at a culprit",
         mine.innocent == 0 and not mine.culprit_on_target,
         f"{mine.innocent} innocent, culprit on target: {mine.culprit_on_target}"),
        ("<= 0.35 validation runs per landing", mine.runs_per_landing <= 0.35,
         f"{mine.runs_per_landing:.3f}"),
    ]  # fmt: skip
    if best is not None:
        ratio = mine.ci_per_landing / best
        out.append(("CI-seconds <= 0.6x the best single queue", ratio <= 0.6, f"{ratio:.3f}x"))
    if alone is not None:
        ratio = mine.ci_per_landing / alone.ci_per_landing
        out.append(("CI-seconds <= 0.25x one-at-a-time", ratio <= 0.25, f"{ratio:.3f}x"))
    p95 = mine.p95_s if mine.p95_s is not None else float("inf")
    out.append(
        ("p95 landing -> promotion <= 3x one validation", p95 <= 3 * shape.suite_s,
         f"{p95:.0f} s against {3 * shape.suite_s:.0f} s")
    )  # fmt: skip
    return out


def table(results: dict[str, Figures], shape: Shape) -> str:
    head = (
        "| strategy | runs / landing | CI-s / landing | innocent ejections | culprit on target "
        "| p50 → target (s) | p95 → target (s) | landings / sim. hour | promoted | wall (s) |\n"
        "|---|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = "".join(
        f"| {f.strategy} | {f.runs_per_landing:.3f} | {f.ci_per_landing:.1f} | {f.innocent} | "
        f"{'yes' if f.culprit_on_target else 'no'} | {_num(f.p50_s)} | {_num(f.p95_s)} | "
        f"{_num(f.per_hour)} | {f.promoted}/{shape.candidates} | {f.wall_s:.1f} |\n"
        for f in results.values()
    )
    lines = "".join(
        f"- {'met' if ok else 'NOT met'}: {what} ({figure})\n"
        for what, ok, figure in targets(results, shape)
    )
    return head + rows + ("\nTargets:\n" + lines if lines else "")


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.queue_run", description=__doc__)
    parser.add_argument("--candidates", type=int, default=Shape.candidates)
    parser.add_argument("--areas", type=int, default=Shape.areas)
    parser.add_argument("--seed", type=int, default=Shape.seed)
    parser.add_argument("--suite-wall", type=float, default=SUITE_WALL,
                        help="wall seconds one full (10-minute) suite takes")  # fmt: skip
    parser.add_argument("--interval", type=float, default=Shape.interval_s,
                        help="simulated seconds between arrivals, on average")  # fmt: skip
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--linger", type=float, default=None,
                        help="integrator's linger in simulated seconds (default: two area "
                        "suites)")  # fmt: skip
    parser.add_argument(
        "--out", type=Path, default=None, help="folder for repositories and results.json"
    )
    args = parser.parse_args(argv)
    shape = Shape(
        candidates=args.candidates, areas=args.areas, seed=args.seed, interval_s=args.interval,
        scale=args.suite_wall / Shape.suite_s,
        scope_s=Shape.suite_s * (0.1 + 0.9 / args.areas),
    )  # fmt: skip
    out = args.out or Path(tempfile.mkdtemp(prefix="bench-queue-"))
    out.mkdir(parents=True, exist_ok=True)
    with (out / "promoter.log").open("w") as log_stream:
        logs.configure(fmt="json", level="warning", stream=log_stream)
        return _run(args, shape, out)


def _run(args: argparse.Namespace, shape: Shape, out: Path) -> int:
    plan = plan_candidates(shape)
    results: dict[str, Figures] = {}
    for name in args.strategies.split(","):
        results[name] = run_strategy(name, shape, plan, out, args.linger)
        print(f"# {name}: {results[name].wall_s:.1f} s wall", flush=True)
    print(
        f"\n{shape.candidates} candidates over {shape.areas} areas, "
        f"{sum(c.culprit for c in plan)} culprits, {shape.flaky_share:.0%} of runs flaky, "
        f"one arrival every {shape.interval_s:g} s on average; the full suite takes "
        f"{shape.suite_s:g} s, one area's {shape.scope_s:g} s (simulated; 1 s = "
        f"{shape.scale * 1000:.3f} ms)\n"
    )
    print(table(results, shape))
    (out / "results.json").write_text(
        json.dumps({n: asdict(f) for n, f in results.items()}, indent=2) + "\n"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
