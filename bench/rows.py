"""The rows of the benchmark table, built from the phases' results, with the issue's targets."""

from __future__ import annotations

from bench.baseline import FloorRun
from bench.daemon_run import DaemonRun
from bench.phases import FleetResult, PeerResult
from bench.report import Row, fmt, ratio, summary, verdict

TARGET_FILES = 100_000


def _at_target_size(files: int, ok: bool) -> str:
    return verdict(ok) if files >= TARGET_FILES else "n/a (target at 100k)"


def _correctness(section: str, result: FleetResult) -> Row:
    check = result.check
    matched = check.checked - len(check.mismatches)
    same = not result.sequence_problems and bool(result.plain.landed)
    compared = (
        "pipeline's trees: " + ("identical" if same else "DIFFER") if result.plain.landed else ""
    )
    return Row(
        section,
        "landed trees = git merge-tree",
        f"{matched}/{result.candidates}",
        compared,
        "",
        "all",
        verdict(check.ok and matched == result.candidates and (same or not result.plain.landed)),
    )


def fleet_rows(result: FleetResult, *, shared: bool) -> list[Row]:
    d, p = result.daemon, result.plain
    ours, theirs = summary(d.latencies_ms), summary(p.latencies_ms)
    label = "fleet + shared CHANGELOG" if shared else "fleet"
    section = f"{label}, {result.files:,} files, {result.candidates} candidates"
    speedup = d.per_second / p.per_second if p.per_second else 0.0
    return [
        Row(
            section,
            "latency p50 (ms)",
            fmt(ours["p50"]),
            fmt(theirs["p50"]),
            ratio(ours["p50"], theirs["p50"]),
            "" if shared else "≤ 4",
            "" if shared else _at_target_size(result.files, ours["p50"] <= 4),
        ),
        Row(
            section,
            "latency p95 (ms)",
            fmt(ours["p95"]),
            fmt(theirs["p95"]),
            ratio(ours["p95"], theirs["p95"]),
            "" if shared else "≤ 12",
            "" if shared else _at_target_size(result.files, ours["p95"] <= 12),
        ),
        Row(
            section,
            "latency max (ms)",
            fmt(ours["max"]),
            fmt(theirs["max"]),
            ratio(ours["max"], theirs["max"]),
        ),
        Row(
            section,
            "throughput (candidates/s)",
            fmt(d.per_second),
            fmt(p.per_second),
            f"{speedup:.1f}×",
            "≥ 3× plain" + ("" if shared else ", ≥ 500/s"),
            verdict(speedup >= 3 and (shared or d.per_second >= 500)),
        ),
        Row(section, "daemon startup (s)", fmt(d.startup_s, 2)),
        Row(section, "peak RSS (MB)", fmt(d.peak_rss_mb)),
        Row(
            section,
            "decisions",
            ", ".join(f"{k} {v}" for k, v in sorted(d.decisions.items())),
            f"{len(p.landed)} landed" + (f", {p.conflicts} conflicts" if p.conflicts else ""),
        ),
        _correctness(section, result),
    ]


def stale_rows(run: DaemonRun, submissions: int) -> list[Row]:
    section = f"stale flood, {submissions:,} submissions"
    accepted = run.decisions.get("ACCEPTED", 0)
    codes = ", ".join(f"{k} {v}" for k, v in sorted(run.codes.items()))
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
            "latency p50 / max (ms)",
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
    ]


def scaling_rows(results: list[FleetResult]) -> list[Row]:
    if not results:
        return []
    count = results[0].candidates
    section = f"scaling, {count} candidates each"
    rows: list[Row] = []
    p50 = {r.files: summary(r.daemon.latencies_ms)["p50"] for r in results}
    for r in results:
        s = summary(r.daemon.latencies_ms)
        rows.append(
            Row(
                section,
                f"p50 / p95 (ms) at {r.files:,} files",
                f"{fmt(s['p50'])} / {fmt(s['p95'])}",
                "",
                "",
                "",
                verdict(r.check.ok),
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


def floor_rows(floors: list[FloorRun], fleet_p50: float) -> list[Row]:
    section = "floor: 2-ref transaction, long-lived update-ref --stdin"
    return [
        Row(
            section,
            f"{f.settings} (ms/transaction)",
            "",
            fmt(f.per_transaction_ms, 2),
            f"fleet p50 = {fleet_p50 / f.per_transaction_ms:.1f}× this"
            if f.per_transaction_ms
            else "",
        )
        for f in floors
    ]


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
