"""`python -m drills [--full] [--only NAME ...] [--json PATH] [--list]`.

Runs the selected drills (all by default, at quick sizes unless `--full`), computes the
quantitative gates from what they recorded, prints the table and writes it as JSON. Exits
1 when any drill or gate fails, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from drills import gates, report
from drills.catalog import ordered
from drills.registry import Record, run_drill

KEEP_RUNS = 6  # older run folders under the output folder are removed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m drills",
        description="Fault drills against the real CLI and daemon, and the quantitative gates.",
    )
    parser.add_argument("--full", action="store_true", help="full sizes (what `make drills` runs)")
    parser.add_argument(
        "--only", nargs="+", action="extend", metavar="NAME", help="run only these drills"
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the report here")
    parser.add_argument("--list", action="store_true", help="list the drills and exit")
    parser.add_argument(
        "--out", type=Path, default=Path("drills-out"), metavar="DIR", help="default drills-out"
    )
    args = parser.parse_args(argv)
    catalogue = ordered()
    if args.list:
        for entry in catalogue:
            print(f"{entry.name:22} {entry.group:>4}  {entry.title}")
        return 0
    names = [e.name for e in catalogue]
    unknown = [n for n in args.only or [] if n not in names]
    if unknown:
        print(f"unknown drill(s): {', '.join(unknown)}; known: {', '.join(names)}", file=sys.stderr)
        return 2
    selected = [e for e in catalogue if not args.only or e.name in args.only]
    alone = [e for e in selected if e.alone and not args.only]
    left_out = [e for e in selected if e.full_only and not args.full and not args.only]
    selected = [e for e in selected if e not in left_out and e not in alone]
    for entry in left_out:
        print(f"not in a quick run: {entry.name} ({entry.full_only})", file=sys.stderr)
    for entry in alone:
        print(f"run on its own: {entry.name} ({entry.alone})", file=sys.stderr)
    mode = "full" if args.full else "quick"
    out = args.out.resolve()
    run_dir = out / f"{time.strftime('%Y%m%dT%H%M%S')}-{mode}-{os.getpid()}"
    run_dir.mkdir(parents=True)
    _prune(out, run_dir)
    started = time.perf_counter()
    records: list[Record] = []
    for n, entry in enumerate(selected, 1):
        print(f"[{n}/{len(selected)}] {entry.name} …", end="", file=sys.stderr, flush=True)
        record = run_drill(entry, run_dir / entry.name, full=args.full)
        records.append(record)
        word = report.result_word(record.passed)
        print(f" {word} ({record.seconds:.1f} s)", file=sys.stderr, flush=True)
    records.extend(gates.compute(run_dir, [e.name for e in selected], full=args.full))
    wall = time.perf_counter() - started
    print(report.table(records))
    print(f"\n{mode} run, {len(selected)} drills, {wall:.1f} s wall on {os.cpu_count()} cores")
    extra = report.notes(records)
    if extra:
        print(extra)
    failed = report.failures(records)
    if failed:
        print("\n" + failed)
    meta = {
        "mode": mode,
        "wallSeconds": round(wall, 1),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "runDir": str(run_dir),
    }
    report.write_json(run_dir / "report.json", records, meta)
    if args.json is not None:
        report.write_json(args.json, records, meta)
    print(f"report: {args.json or run_dir / 'report.json'}")
    return 1 if any(r.passed is False for r in records) else 0


def _prune(out: Path, keep: Path) -> None:
    """Keep the newest runs only: a full run's spool holds tens of thousands of folders."""
    runs = sorted((p for p in out.iterdir() if p.is_dir() and p != keep), key=lambda p: p.name)
    for old in runs[: max(0, len(runs) - (KEEP_RUNS - 1))]:
        shutil.rmtree(old, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
