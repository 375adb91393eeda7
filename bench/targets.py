"""The round's targets, each met or not within one run, and why when not.

Every target is a ratio or a difference of two figures measured in the same run (a shared
machine moves absolute figures by up to 2× from one minute to the next). The "nothing gets
slower" rows compare this run's ratios with the last round's (docs/bench.md, commit e00092a):
the one-at-a-time p50 against the plain pipeline (1.0×), the stale flood's share of its own
file-system floor (589 of 1,496 decisions/s: 0.39) and the scaling growth (1.25).
"""

from __future__ import annotations

from typing import Any

from bench.phases import FleetResult
from bench.remote_run import RemoteResult
from bench.report import Row, fmt, summary, verdict
from bench.startup_run import CLI_ROWS, StartupResult, ratio_of

SECTION = "targets of this round (ratios within this run; the reason when not met)"
REMOTE_SHARE = 0.8  # remote landing rate against the local one
DRAIN_SPEEDUP = 3.0  # batched drain against the plain pipeline, start-up excluded
SERVE_OVER_PYTHON_S = 0.2  # `serve --once` on an empty spool over `python -c pass`
GUARD_OVER_PYTHON = 2.5  # the guard per hook call against `python -c pass`
CLI_OVER_PYTHON_MS = 100.0  # `--help`, `--version`, `status` over `python -c pass` (U)
LAST_SINGLE_RATIO = 1.0  # last round: one-at-a-time p50, plain pipeline's over ours
LAST_FLOOD_SHARE = 0.39  # last round: stale flood rate over its file-system floor's rate
LAST_SCALING = 1.25  # last round: p50 at 100,000 files over p50 at 1,000


def _row(metric: str, value: str, ok: bool, target: str, reason: str) -> Row:
    return Row(SECTION, metric, value, "" if ok else reason, "", target, verdict(ok))


def _remote(remote: RemoteResult, local: FleetResult) -> list[Row]:
    here, there = local.batched, remote.run
    share = there.per_second / here.per_second if here.per_second else 0.0
    batches = max(remote.batches, 1)
    extra = (there.drain_s - here.drain_s) / batches
    fetches, pushes = remote.per_batch("fetches"), remote.per_batch("pushes")
    trips = remote.round_trips_per_batch
    return [
        _row(
            "remote landing rate / local rate (loopback git daemon)",
            f"{share:.2f}×",
            share >= REMOTE_SHARE,
            f"≥ {REMOTE_SHARE}×",
            f"{extra:.2f} s more per batch ({remote.batches} batches): the push's server side "
            "(index-pack, connectivity check, its own durable ref transaction) and the fetch",
        ),
        _row(
            "fetches / pushes per batch (round trips per batch)",
            f"{fmt(fetches, 2)} / {fmt(pushes, 2)} ({fmt(trips, 2)})",
            fetches <= 1 and pushes <= 1,
            "≤ 1 / ≤ 1",
            "a lost lease or an unclear push report read the server again",
        ),
    ]


def _drain(fleet: FleetResult) -> Row:
    speedup = fleet.batched.per_second / fleet.plain.per_second if fleet.plain.per_second else 0
    return _row(
        "daemon drain / plain pipeline, start-up excluded",
        f"{speedup:.2f}×",
        speedup >= DRAIN_SPEEDUP,
        f"≥ {DRAIN_SPEEDUP:g}×",
        "the gate's Python per candidate (tree records parsed, paths matched, renames named) "
        "and one durable transaction with syncfs per batch",
    )


def _startup(started: StartupResult) -> list[Row]:
    over = (started.serve.p50 - started.serve.baseline_p50) / 1000
    rows = [
        _row(
            "serve --once on an empty spool, over python -c pass (s)",
            fmt(over, 3),
            over <= SERVE_OVER_PYTHON_S,
            f"≤ {SERVE_OVER_PYTHON_S}",
            "imports before daemon.ready: the daemon, engine and promotion modules with their "
            "pydantic models, pygit2 and structlog",
        )
    ]
    for event, timing in started.guard.items():
        answer = started.answers[event]
        if "not mediated" in event:
            continue  # the targets name allow and deny of a write
        share = ratio_of(timing)
        rows.append(
            _row(
                f"guard per hook call, {answer} / python -c pass",
                f"{share:.2f}×",
                share <= GUARD_OVER_PYTHON,
                f"≤ {GUARD_OVER_PYTHON}×",
                "Python imports of the CLI and the guard's own modules, and its git processes",
            )
        )
    for name in CLI_ROWS:
        if name not in started.cli:
            continue
        over_ms = started.cli[name].p50 - started.cli[name].baseline_p50
        rows.append(
            _row(
                f"integrator {name}, over python -c pass (ms)",
                fmt(over_ms),
                over_ms <= CLI_OVER_PYTHON_MS,
                f"≤ {CLI_OVER_PYTHON_MS:g}",
                "the CLI's own imports (argparse, json, the config file's discovery) and, for "
                "status, the daemon's answer",
            )
        )
    return rows


def _not_slower(fleet: FleetResult, stale: Any, floor_ms: float, scaling: list[Any]) -> list[Row]:
    one = summary(fleet.single.latencies_ms)["p50"]
    plain = summary(fleet.plain.latencies_ms)["p50"]
    single = plain / one if one else 0.0
    flood = stale.per_second * floor_ms / 1000 if floor_ms else 0.0
    rows = [
        _row(
            "one at a time: plain pipeline p50 / integrator p50",
            f"{single:.2f}×",
            single >= LAST_SINGLE_RATIO * 0.9,
            f"≥ {LAST_SINGLE_RATIO}× (last round, ±10%)",
            "slower than the last round against the same pipeline",
        ),
        _row(
            "stale flood rate / its file-system floor's rate",
            f"{flood:.2f}",
            flood >= LAST_FLOOD_SHARE * 0.9,
            f"≥ {LAST_FLOOD_SHARE} (last round, ±10%)",
            "slower than the last round against the same floor",
        ),
    ]
    p50 = {r.files: summary(r.single.latencies_ms)["p50"] for r in scaling}
    if 1_000 in p50 and 100_000 in p50 and p50[1_000]:
        growth = p50[100_000] / p50[1_000]
        rows.append(
            _row(
                "scaling: p50 at 100,000 files / at 1,000",
                f"{growth:.2f}",
                growth <= LAST_SCALING * 1.1,
                f"≤ {LAST_SCALING} (last round, ±10%)",
                "a candidate costs more in a larger repository than in the last round",
            )
        )
    return rows


def _correct(results: dict[str, Any]) -> list[Row]:
    fleets: list[FleetResult] = [results["fleet"], results["shared"], *results["scaling"]]
    remote: RemoteResult = results["remote"]
    trees = all(f.correct and not f.sequence_problems for f in fleets) and remote.check.ok
    stale = results["stale"]
    accepted = stale.decisions.get("ACCEPTED", 0)
    return [
        _row(
            "landed trees = git merge-tree, every run",
            "all" if trees else "NOT ALL",
            trees,
            "all",
            "a landed tree differs from git merge-tree (see the rows above)",
        ),
        _row("stale submissions accepted", str(accepted), accepted == 0, "0", "stale accepted"),
    ]


def target_rows(results: dict[str, Any]) -> list[Row]:
    """Every target of the round as one row each, after the phases' own tables."""
    fleet: FleetResult = results["fleet"]
    io = sum(
        f.per_transaction_ms
        for f in results["floors"]
        if "held ref" in f.settings or "spool" in f.settings
    )
    return [
        *_remote(results["remote"], fleet),
        _drain(fleet),
        *_startup(results["startup"]),
        *_not_slower(fleet, results["stale"], io, results["scaling"]),
        *_correct(results),
    ]
