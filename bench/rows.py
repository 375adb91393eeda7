"""The rows of the benchmark table, built from the phases' results, with their targets."""

from __future__ import annotations

from bench.baseline import FloorRun
from bench.daemon_run import DaemonRun
from bench.phases import FleetResult, PeerResult
from bench.remote_run import RemoteResult
from bench.report import Row, fmt, median, ratio, summary, verdict
from bench.startup_run import CLI_ROWS, StartupResult, ratio_of
from bench.targets import CLI_OVER_PYTHON_MS
from bench.validation_run import ValidationResult
from bench.workers_run import WorkersRun

TARGET_FILES = 100_000


def _at_target_size(files: int, ok: bool) -> str:
    return verdict(ok) if files >= TARGET_FILES else "n/a <100k"


def _correctness(section: str, result: FleetResult) -> Row:
    matched = {c.checked - len(c.mismatches) for c in result.checks.values()}
    runs = len(result.checks)
    checked = (
        f"{matched.pop()}/{result.candidates}" + (f" in {runs} runs" if runs > 1 else "")
        if len(matched) == 1
        else ", ".join(
            f"{c.checked - len(c.mismatches)}/{result.candidates} {how}"
            for how, c in result.checks.items()
        )
    )
    compared = ""
    if result.plain.landed:
        same = not result.sequence_problems
        compared = "pipeline's trees " + ("identical" if same else "DIFFER")
    ok = result.correct and not result.sequence_problems
    return Row(section, "landed trees = git merge-tree", checked, compared, "", "all", verdict(ok))


def fleet_rows(result: FleetResult, *, shared: bool) -> list[Row]:
    one, many, p = result.single, result.batched, result.plain
    ours, theirs = summary(one.latencies_ms), summary(p.latencies_ms)
    waited = summary(many.latencies_ms)
    label = "fleet + shared CHANGELOG" if shared else "fleet"
    section = f"{label}, {result.files:,} files, {result.candidates} candidates"
    speedup = many.per_second / p.per_second if p.per_second else 0.0

    def latency(key: str, limit: float | None) -> Row:
        met = "" if limit is None or shared else _at_target_size(result.files, ours[key] <= limit)
        return Row(
            section,
            f"latency {key} (ms), one at a time",
            fmt(ours[key]),
            fmt(theirs[key]),
            ratio(ours[key], theirs[key]),
            "" if limit is None or shared else f"≤ {limit:g}",
            met,
        )

    return [
        latency("p50", 4),
        latency("p95", 12),
        latency("max", None),
        Row(
            section,
            "throughput (candidates/s), batched",
            fmt(many.per_second),
            fmt(p.per_second),
            f"{speedup:.1f}×",
            "≥ 3× plain" + ("" if shared else ", ≥ 500/s"),
            verdict(speedup >= 3 and (shared or many.per_second >= 500)),
        ),
        Row(
            section,
            "throughput (candidates/s), one at a time",
            fmt(one.per_second),
            fmt(p.per_second),
            ratio(p.per_second, one.per_second),
        ),
        Row(
            section,
            "claim→verdict p50 / p95 (ms), batched",
            f"{fmt(waited['p50'])} / {fmt(waited['p95'])}",
            "",
            "",
            "",
            "",
        ),
        Row(
            section,
            "objects written per landing",
            " / ".join(fmt(v) for v in result.objects_per_landing.values()),
            " / ".join(result.objects_per_landing),
        ),
        Row(section, "daemon startup (s)", fmt(many.startup_s, 2)),
        Row(section, "peak RSS (MB)", fmt(max(many.peak_rss_mb, one.peak_rss_mb))),
        Row(
            section,
            "decisions",
            ", ".join(f"{k} {v}" for k, v in sorted(many.decisions.items())),
            f"{len(p.landed)} landed" + (f", {p.conflicts} conflicts" if p.conflicts else ""),
        ),
        _correctness(section, result),
    ]


def remote_rows(remote: RemoteResult, local: FleetResult) -> list[Row]:
    """The same fleet drained over a loopback git daemon, against the local batched drain."""
    run, here = remote.run, local.batched
    section = f"fleet over a remote, {local.files:,} files, {local.candidates} candidates"
    waited = summary(run.latencies_ms)
    return [
        Row(
            section,
            "throughput (candidates/s), batched",
            fmt(run.per_second),
            fmt(here.per_second) + " local",
            f"{run.per_second / here.per_second:.2f}× local" if here.per_second else "-",
            "≥ 0.8× local",
            verdict(bool(here.per_second) and run.per_second / here.per_second >= 0.8),
        ),
        Row(
            section,
            "claim→verdict p50 / p95 (ms), batched",
            f"{fmt(waited['p50'])} / {fmt(waited['p95'])}",
        ),
        Row(
            section,
            "pushes per landed candidate",
            fmt(remote.pushes_per_landing, 2),
            f"{remote.pushes} pushes, {remote.landed} landed",
        ),
        Row(
            section,
            "per batch: fetches / pushes / round trips",
            " / ".join(
                fmt(v, 2)
                for v in (
                    remote.per_batch("fetches"),
                    remote.per_batch("pushes"),
                    remote.round_trips_per_batch,
                )
            ),
            f"{remote.batches} batches; a round trip is one connection to the server",
            "",
            "≤ 1 fetch, ≤ 1 push",
            verdict(remote.per_batch("fetches") <= 1 and remote.per_batch("pushes") <= 1),
        ),
        Row(
            section,
            "decisions",
            ", ".join(f"{k} {v}" for k, v in sorted(run.decisions.items())),
        ),
        Row(
            section,
            "server's queue = git merge-tree",
            f"{remote.check.checked - len(remote.check.mismatches)}/{local.candidates}",
            "",
            "",
            "all",
            verdict(remote.check.ok and remote.check.checked == local.candidates),
        ),
    ]


def stale_rows(run: DaemonRun, submissions: int, floors: list[FloorRun]) -> list[Row]:
    section = f"stale flood, {submissions:,} submissions"
    accepted = run.decisions.get("ACCEPTED", 0)
    codes = ", ".join(f"{k} {v}" for k, v in sorted(run.codes.items()))
    # What each fenced submission costs the file system before any deciding: its held ref
    # and the spool's moves (bench/baseline.py), and the rate that alone would allow.
    io = sum(
        f.per_transaction_ms for f in floors if "held ref" in f.settings or "spool" in f.settings
    )
    floor = [
        Row(
            section,
            "file-system floor per submission (ms): held ref + spool moves",
            fmt(1000 / run.per_second if run.per_second else None, 2),
            fmt(io, 2),
            f"at most {fmt(1000 / io, 0)}/s on this disk" if io else "",
        )
    ]
    return [
        Row(
            section,
            "decisions/s",
            fmt(run.per_second, 0),
            "",
            "",
            "≥ 2,000",
            verdict(run.per_second >= 2000),
        ),
        Row(
            section,
            "accepted",
            str(accepted),
            codes,
            "",
            "0",
            verdict(accepted == 0 and run.decided == submissions),
        ),
        Row(
            section,
            "claim→verdict p50 / max (ms), batched",
            f"{fmt(summary(run.latencies_ms)['p50'], 2)} / {fmt(max(run.latencies_ms, default=0), 1)}",
        ),
        Row(
            section,
            "peak RSS (MB)",
            fmt(run.peak_rss_mb),
            "",
            "",
            "≤ 150",
            verdict(run.peak_rss_mb <= 150),
        ),
        *floor,
    ]


def scaling_rows(results: list[FleetResult]) -> list[Row]:
    if not results:
        return []
    count, rounds = results[0].candidates, len(results[0].checks)
    section = f"scaling, {count} candidates × {rounds} rounds per size, one at a time"
    rows: list[Row] = []
    p50 = {r.files: summary(r.single.latencies_ms)["p50"] for r in results}
    for r in results:
        s = summary(r.single.latencies_ms)
        rows.append(
            Row(
                section,
                f"p50 / p95 (ms) at {r.files:,} files",
                f"{fmt(s['p50'])} / {fmt(s['p95'])}",
                "trees = merge-tree" if r.correct else "TREES DIFFER",
            )
        )
    small, large = min(p50), max(p50)
    if small != large:
        growth = p50[large] / p50[small]
        rows.append(
            Row(
                section,
                f"p50 {large:,} / p50 {small:,}",
                f"{growth:.2f}",
                "",
                "",
                "≤ 1.5" if (large, small) == (100_000, 1_000) else "",
                verdict(growth <= 1.5) if (large, small) == (100_000, 1_000) else "",
            )
        )
    return rows


def floor_rows(floors: list[FloorRun], fleet: FleetResult) -> list[Row]:
    section = "floors: 2-ref transaction (long-lived update-ref --stdin); one loose object; a held ref; spool moves"
    p50 = summary(fleet.single.latencies_ms)["p50"]
    objects = fleet.objects_per_landing.get("one at a time", 0.0)
    out = []
    for f in floors:
        if f.per_transaction_ms <= 0:
            note = ""
        elif "held ref" in f.settings or "spool" in f.settings:
            note = "per fenced submission (see the stale flood)"
        elif "object" in f.settings:
            # Landings write their objects as one pack per batch, not as loose files: this
            # is what the same objects would cost written one file each.
            note = f"× {objects:.1f} objects per landing, if loose = {objects * f.per_transaction_ms:.1f} ms"
        else:
            note = f"fleet p50 = {p50 / f.per_transaction_ms:.1f}× this"
        out.append(Row(section, f"{f.settings} (ms)", "", fmt(f.per_transaction_ms, 2), note))
    return out


def peer_rows(peer: PeerResult) -> list[Row]:
    section = f"mergetrain, {peer.branches} branches, {peer.files:,} files"
    mt = peer.mergetrain
    if mt.wall_s is None:
        return [
            Row(section, "not measured", "", "", "", "≥ 10×", "-"),
            Row(section, "why", mt.note),
        ]
    ours = peer.integrator_wall_s
    ahead = mt.wall_s / ours if ours else 0.0
    same = (
        "identical" if not peer.tree_differences else f"{len(peer.tree_differences)} paths differ"
    )
    queued = (ours - peer.integrator_serve_s) if ours and peer.integrator_serve_s else None
    return [
        Row(
            section,
            "all landed, end to end (s)",
            fmt(ours, 2),
            fmt(mt.wall_s, 2),
            f"{ahead:.1f}×",
            "≥ 10×",
            verdict(ahead >= 10),
        ),
        Row(
            section,
            "  queueing: submit / enqueue (s)",
            fmt(queued, 2),
            fmt(mt.enqueue_s, 2),
            ratio(queued, mt.enqueue_s),
        ),
        Row(
            section,
            "  landing: serve --once / deploy (s)",
            fmt(peer.integrator_serve_s, 2),
            fmt(mt.deploy_s, 2),
            ratio(peer.integrator_serve_s, mt.deploy_s),
        ),
        Row(section, "final trees", same),
    ]


def startup_rows(result: StartupResult) -> list[Row]:
    """The guard per hook event against `python -c pass`; `integrator gate` against git."""
    section = "start-up of per-event commands (p50 of interleaved runs)"
    out = []
    for event, timing in result.guard.items():
        share = ratio_of(timing)
        out.append(
            Row(
                section,
                f"integrator guard, {event} → {result.answers[event]} (ms)",
                fmt(timing.p50),
                f"{fmt(timing.baseline_p50)} python -c pass",
                f"{share:.1f}× (CPU {timing.cpu_ratio:.1f}×)",
                "≤ 2.5× python -c pass",
                verdict(share <= 2.5),
            )
        )
    over = result.serve.p50 - result.serve.baseline_p50
    out.append(
        Row(
            section,
            "integrator serve --once, empty spool (ms)",
            fmt(result.serve.p50),
            f"{fmt(result.serve.baseline_p50)} python -c pass",
            f"+{fmt(over / 1000, 3)} s (CPU {result.serve.cpu_ratio:.1f}×)",
            "≤ +0.2 s",
            verdict(over <= 200),
        )
    )
    for name, timing in result.cli.items():
        over = timing.p50 - timing.baseline_p50
        target = name in CLI_ROWS
        out.append(
            Row(
                section,
                f"integrator {name} (ms)",
                fmt(timing.p50),
                f"{fmt(timing.baseline_p50)} python -c pass",
                f"+{fmt(over)} ms (CPU {timing.cpu_ratio:.1f}×)",
                f"≤ +{CLI_OVER_PYTHON_MS} ms" if target else "(for comparison)",
                verdict(over <= CLI_OVER_PYTHON_MS) if target else "",
            )
        )
    share = ratio_of(result.gate)
    out.append(
        Row(
            section,
            f"integrator gate, 10-file commit of a {result.gate_files:,}-file real tree (ms)",
            fmt(result.gate.p50),
            f"{fmt(result.gate.baseline_p50)} git diff-tree -M + merge-tree",
            f"{share:.1f}× (CPU {result.gate.cpu_ratio:.1f}×)",
            "≤ 2× git",
            verdict(share <= 2),
        )
    )
    return out


def validation_rows(result: ValidationResult) -> list[Row]:
    """Landings promoted per second with validation by `true`, against no validation."""
    section = f"validation by `true`, {result.files:,} files, {result.candidates} candidates"
    plain = result.plain.per_second
    rows = [
        Row(
            section,
            f"landed and promoted per second, max_batch {v.batch}, checkouts on {v.scratch}",
            fmt(v.run.per_second),
            f"{fmt(plain)} landed, no validation",
            f"{v.run.per_second / plain:.2f}× no validation" if plain else "-",
            "",
            "" if v.promoted else "NOT ALL PROMOTED",
        )
        for v in result.runs
    ]
    for scratch in dict.fromkeys(v.scratch for v in result.runs):
        mine = [v for v in result.runs if v.scratch == scratch]
        batches = " / ".join(str(v.batch) for v in mine)
        rows.append(
            Row(
                section,
                f"validations run, max_batch {batches}, on {scratch}",
                " / ".join(str(v.validations) for v in mine),
            )
        )
        rows.append(
            Row(
                section,
                f"one validation (checkout + `true`), mean s, max_batch {batches}, on {scratch}",
                " / ".join(fmt(v.mean_validation_s, 3) for v in mine),
            )
        )
    return rows


def workers_rows(runs: list[WorkersRun], files: int) -> list[Row]:
    """Batched drains with evaluation in the daemon (0 workers) and in one worker."""
    section = f"evaluation workers, batched fleet, {files:,} files, median of rounds"
    by = {(r.cores, r.workers): r for r in runs}
    out: list[Row] = []
    for cores in ("all", "1"):
        alone, pooled = by.get((cores, 0)), by.get((cores, 1))
        if alone is None or pooled is None:
            continue
        where = "every core" if cores == "all" else "pinned to one core"
        for label, pick in (("whole drain", "rates"), ("after the first batch", "steady")):
            mine, theirs = median(getattr(pooled, pick)), median(getattr(alone, pick))
            out.append(
                Row(
                    section,
                    f"candidates/s, {where}, {label}: 1 worker",
                    fmt(mine),
                    f"{fmt(theirs)} in the daemon",
                    f"{mine / theirs:.2f}×" if theirs else "-",
                )
            )
        out.append(
            Row(
                section,
                f"CPU s per drain, {where}: 1 worker",
                fmt(median(pooled.cpu_s), 2),
                f"{fmt(median(alone.cpu_s), 2)} in the daemon",
                f"chunks of 4 by the worker: {', '.join(map(str, pooled.chunks_by_workers))}",
            )
        )
    ok = all(r.trees_ok for r in runs)
    out.append(
        Row(
            section,
            "landed trees = git merge-tree",
            "every run" if ok else "NO",
            "",
            "",
            "all",
            verdict(ok),
        )
    )
    return out
