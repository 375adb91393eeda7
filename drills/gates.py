"""The quantitative gates (docs/drills.md), measured on the history the drills recorded.

Each gate walks every world a drill left under the run folder: the queue's staging commits
and their trailers, the claim refs' histories, the queue's reflog, the verdict files in the
spools and under `verdicts/`, and the daemons' JSON logs. A gate whose drills did not run
in this invocation is reported `n/a`, never passed by default.
"""

from __future__ import annotations

import json
import math
import sys
import traceback
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.report import percentile
from drills import report
from drills.history import World, load, touched_resources
from drills.registry import Record
from drills.repo import MAIN, QUEUE, ZERO, merge_tree, parents, reflog, rev
from integrator.paths import PathMatcher

LATENCY_BAR_MS = 2000.0
DETERMINED = {"OWNED", "SHARED", "UNKNOWN", "NOT_OWNED"}


def _record(name: str, title: str, gate: str) -> Record:
    return Record(name=name, kind="gate", title=title, figure="", gate=gate, passed=None)


def _fail(record: Record, problems: list[str], evidence: list[str]) -> None:
    record.passed = not problems
    record.expected = record.gate
    record.actual = "; ".join(problems[:8]) + (
        f" (+{len(problems) - 8} more)" if len(problems) > 8 else ""
    )
    record.evidence = list(dict.fromkeys(evidence))[:12]
    if not problems:
        record.actual = record.figure


def coverage(worlds: Sequence[World]) -> Record:
    """Every diff path and both ends of every rename of every accepted candidate is claimed."""
    rec = _record("gate:coverage", "claims cover accepted diffs", "100% of paths and rename ends")
    paths = ends = covered = candidates = 0
    problems: list[str] = []
    evidence: list[str] = []
    for w in worlds:
        seen: set[str] = set()
        items: list[tuple[str, str, Mapping[str, Any], str | None, str]] = []
        for staging in w.chain:
            t = w.trailers(staging)
            found = w.consumed.get(staging)
            if found is None:  # landed without consuming a claim: no path of it is claimed
                problems.append(f"{w.root.name}: staging {staging[:12]} consumed no claim")
                evidence.append(str(w.root / "claims.txt"))
            contract: Mapping[str, Any] = found[1] if found else {}
            items.append((t["Integrator-Base"], t["Integrator-Candidate"], contract,
                          t.get("Integrator-Policy-Digest"), staging))  # fmt: skip
        for d in w.decisions:  # accepted but not landed: CI gate runs
            cand = str(d.verdict.get("candidate"))
            if d.decision == "ACCEPTED" and not d.verdict.get("stagingCommit"):
                items.append((str(d.verdict["base"]), cand, d.contract,
                              d.verdict.get("policyDigest"), str(d.source)))  # fmt: skip
        for base, cand, contract, digest, where in items:
            if cand in seen:
                continue
            seen.add(cand)
            candidates += 1
            matcher = _matcher(contract)
            policy = w.policy(str(digest))
            for change in w.diff(base, cand):
                for n, path in enumerate(change.paths):
                    is_end = change.status == "R"
                    paths += 1
                    ends += is_end
                    ok = matcher.covers(path) or (policy is not None and policy.shared.covers(path))
                    covered += ok
                    if not ok:
                        side = ("old", "new")[n] if is_end else "path"
                        problems.append(f"{w.drill}: {cand[:12]} {side} {path} not claimed")
                        evidence.append(where)
    rec.figure = (
        f"{covered}/{paths} paths ({ends} rename ends) claimed in {candidates} accepted candidates"
    )
    _fail(rec, problems, evidence)
    if not candidates and not problems:
        rec.passed = None  # nothing landed in this run: the gate has nothing to measure
    return rec


def _matcher(contract: Mapping[str, Any]) -> PathMatcher:
    return PathMatcher.of(contract.get("paths", []), contract.get("deny", []))


def determinations(worlds: Sequence[World]) -> Record:
    """Every touched semantic resource got a determination; none unowned was accepted."""
    rec = _record(
        "gate:determinations", "resource determinations", "100% OWNED/SHARED/UNKNOWN(/NOT_OWNED)"
    )
    counts: Counter[str] = Counter()
    touched = verdicts = 0
    problems: list[str] = []
    evidence: list[str] = []
    for w in worlds:
        for d in w.decisions:
            v = d.verdict
            if v.get("changes") is None or v.get("recovered"):
                continue  # decided before the diff (stale, invalid): nothing was touched yet
            verdicts += 1
            policy = w.policy(v.get("policyDigest"))
            if policy is None:
                problems.append(f"{d.source.name}: policy {v.get('policyDigest')} not in history")
                evidence.append(str(d.source))
                continue
            given = {r["resource"]: r["determination"] for r in v.get("resources", [])}
            for resource in sorted(
                touched_resources(policy, w.diff(v["base"], v["candidate"], renames=False))
            ):
                touched += 1
                det = given.get(resource)
                counts[det or "MISSING"] += 1
                if det not in DETERMINED:
                    problems.append(f"{w.drill}: {resource} has no determination")
                    evidence.append(str(d.source))
                elif v["decision"] == "ACCEPTED" and det not in ("OWNED", "SHARED"):
                    problems.append(f"{w.drill}: {resource} {det} but ACCEPTED")
                    evidence.append(str(d.source))
    shown = ", ".join(f"{k} {n}" for k, n in sorted(counts.items())) or "none touched"
    rec.figure = (
        f"{touched - counts['MISSING']}/{touched} determined ({shown}) in {verdicts} verdicts"
    )
    _fail(rec, problems, evidence)
    if not touched and not problems:
        rec.passed = None  # no drill of this run touched a semantic resource
    return rec


def stale(worlds: Sequence[World], *, full: bool) -> Record:
    """Old-generation submissions accepted (flood), and landings by a superseded generation."""
    rec = _record(
        "gate:stale-accepted", "stale submissions accepted", "0 accepted of ≥ 10,000 (full)"
    )
    need = 10_000 if full else 1
    total = accepted = superseded = landings = 0
    problems: list[str] = []
    evidence: list[str] = []
    for w in worlds:
        for staging in w.chain:
            landings += 1
            t = w.trailers(staging)
            found = w.consumed.get(staging)
            before = found[2] if found else None
            if (
                before is None
                or before.get("state") != "live"
                or str(before.get("generation")) != t.get("Integrator-Generation")
                or before.get("attemptId") != t.get("Integrator-Attempt")
            ):
                superseded += 1
                problems.append(f"{w.drill}: staging {staging[:12]} not from the live generation")
                evidence.append(str(w.root / "claims.txt"))
        if not w.tagged("stale-flood"):
            continue
        for sid in w.meta.get("flood", []):
            total += 1
            verdict_file = next(w.spool.glob(f"*/{sid}/verdict.json"), None)
            decision = json.loads(verdict_file.read_text())["decision"] if verdict_file else "LOST"
            if decision != "FENCED":
                problems.append(f"{sid}: {decision}")
                evidence.append(str(verdict_file or w.spool))
            accepted += decision == "ACCEPTED"
        flood_head = w.meta.get("floodHead")
        allowed = len(w.meta.get("controls", []))
        after = w.chain[w.chain.index(flood_head) + 1 :] if flood_head in w.chain else w.chain
        if len(after) > allowed:
            problems.append(
                f"{w.drill}: queue moved {len(after)} times during the flood, {allowed} controls"
            )
    rec.figure = (
        f"{accepted}/{total} old-generation submissions accepted; "
        f"{superseded}/{landings} landings from a superseded generation"
    )
    if total < need:
        problems.append(f"only {total} stale submissions (need {need})")
    _fail(rec, problems, evidence)
    if total == 0:
        rec.passed = None if not full else False
    return rec


def _race_outcome(proc: dict[str, Any], chain: Counter[str | None]) -> str:
    """ "landed" (accepted, on the queue once), "fenced" (refused with reasons, not on the
    queue), or what went wrong with this contender."""
    doc = json.loads(Path(proc["verdict"]).read_text())
    verdict = doc.get("verdict") or {}
    on_queue = chain[proc["candidate"]]
    if verdict.get("decision") == "ACCEPTED" and on_queue == 1:
        return "landed"
    if (
        verdict.get("decision") in ("FENCED", "REVIEW")
        and verdict.get("violations")
        and not on_queue
    ):
        return "fenced"
    return f"{proc['label']}: exit {proc['exit']}, {verdict.get('decision')}, on queue {on_queue}×"


def races(worlds: Sequence[World]) -> Record:  # noqa: PLR0912 — one branch per kind of evidence
    """At most one successful CAS per queue head read; no candidate lost."""
    rec = _record("gate:cas-race", "concurrent integrations", "≤ 1 CAS per race, 0 lost")
    problems: list[str] = []
    evidence: list[str] = []
    count = rounds = landed = fenced = lost = 0
    contenders: list[int] = []
    worst = 0
    for w in (w for w in worlds if w.tagged("race")):
        log = [(old, new) for old, new in reflog(w.repo, QUEUE) if old != ZERO]
        per_head = Counter(old for old, _ in log)
        worst = max([worst, *per_head.values()])
        if len(log) != len(w.chain):  # every landing is one recorded compare-and-swap
            problems.append(f"{w.root.name}: {len(log)} queue updates for {len(w.chain)} landings")
        for old, new in log:
            if parents(w.repo, new) != [old]:
                problems.append(
                    f"{w.root.name}: update {old[:10]}→{new[:10]} is not one staging commit"
                )
        chain = Counter(w.trailers(s).get("Integrator-Candidate") for s in w.chain)
        for race in w.meta.get("races", []):
            count += 1
            rounds += len(race["heads"])
            contenders.extend(race.get("released", []))
            for head in race["heads"]:
                if per_head[head] > 1:
                    problems.append(f"{w.root.name}: {per_head[head]} CAS from {head[:10]}")
            for proc in race["processes"]:
                outcome = _race_outcome(proc, chain)
                if outcome == "landed":
                    landed += 1
                elif outcome == "fenced":
                    fenced += 1
                else:
                    lost += 1
                    problems.append(outcome)
                    evidence.append(proc["verdict"])
        evidence.append(str(w.root / "queue.txt"))
    spread = f" ({min(contenders)}–{max(contenders)} racers each)" if contenders else ""
    rec.figure = (
        f"{count} races, {rounds} rounds{spread}: max {worst} CAS per head; "
        f"{landed} landed once, {fenced} fenced with a reason, {lost} lost"
    )
    if worst > 1:
        problems.append(f"{worst} successful CAS from one queue head")
    _fail(rec, problems, evidence)
    if count == 0:
        rec.passed = None
    return rec


def trees(worlds: Sequence[World]) -> Record:
    """Each staging tree is git's merge of its candidate onto its parent; main is the queue."""
    rec = _record("gate:canonical-tree", "canonical tree = approved merge", "100% of drills")
    problems: list[str] = []
    evidence: list[str] = []
    commits = 0
    drills_ok: dict[str, bool] = {}
    for w in worlds:
        ok = True
        accepted = {
            str(d.verdict.get("stagingCommit")): d for d in w.decisions if d.decision == "ACCEPTED"
        }
        for staging in w.chain:
            commits += 1
            t = w.trailers(staging)
            head = parents(w.repo, staging)
            clean, tree = merge_tree(
                w.repo, t["Integrator-Base"], head[0], t["Integrator-Candidate"]
            )
            actual = rev(w.repo, f"{staging}^{{tree}}")
            problem = None
            if len(head) != 1:
                problem = f"{staging[:12]} has {len(head)} parents"
            elif not clean or tree != actual:
                problem = f"{staging[:12]} tree {actual} ≠ git merge-tree {tree}"
            elif staging not in accepted:
                problem = f"{staging[:12]} landed without a recorded ACCEPTED verdict"
            elif accepted[staging].verdict.get("tree") not in (None, actual):
                problem = f"{staging[:12]} verdict tree ≠ staging tree"
            if problem:
                ok = False
                problems.append(f"{w.drill}/{w.root.name}: {problem}")
                evidence.append(str(w.root / "queue.txt"))
        if rev(w.repo, MAIN) != rev(w.repo, QUEUE):
            ok = False
            problems.append(f"{w.drill}/{w.root.name}: main ≠ queue head")
        drills_ok[w.drill] = drills_ok.get(w.drill, True) and ok
    good = sum(drills_ok.values())
    rec.figure = (
        f"{good}/{len(drills_ok)} drills; {commits} staging trees = git merge-tree; main = queue"
    )
    _fail(rec, problems, evidence)
    if not drills_ok:
        rec.passed = None
    return rec


def _stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _sid_time(sid: str) -> float:
    return datetime.strptime(sid.split("-", 1)[0] + "+0000", "%Y%m%dT%H%M%S%fZ%z").timestamp()


def _ms(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.0f} ms"


def latency(worlds: Sequence[World]) -> Record:
    """p95 of the daemon's claim→verdict latency, and of submission→verdict on live daemons."""
    rec = _record("gate:fence-latency", "fence latency p95", f"< {LATENCY_BAR_MS / 1000:g} s")
    inside: list[float] = []
    e2e: list[float] = []
    for w in worlds:
        for log in sorted((w.root / "logs").glob("*serve*.log")):
            ready = None
            for line in log.read_text(errors="replace").splitlines():
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if event.get("event") == "daemon.ready":
                    ready = _stamp(event["timestamp"]) if not event.get("once") else None
                if event.get("event") != "decision" or event.get("latency_ms") is None:
                    continue
                inside.append(float(event["latency_ms"]))
                submitted = _sid_time(event["submission"])
                if w.tagged("live") and ready is not None and submitted >= ready:
                    e2e.append((_stamp(event["timestamp"]) - submitted) * 1000)
    p_in, p_e2e = percentile(inside, 95), percentile(e2e, 95)
    rec.figure = (
        f"daemon p95 {_ms(p_in)} (n={len(inside)}); submit→verdict p95 {_ms(p_e2e)} (n={len(e2e)})"
    )
    problems = [f"{name} p95 {p:.0f} ms ≥ {LATENCY_BAR_MS:.0f}" for name, p in (("daemon", p_in), ("end-to-end", p_e2e))
                if not math.isnan(p) and p >= LATENCY_BAR_MS]  # fmt: skip
    _fail(rec, problems, [])
    if not inside:
        rec.passed = None
    return rec


def compute(run_dir: Path, names: Sequence[str], *, full: bool) -> list[Record]:
    """Every gate over the worlds under `run_dir` (the drills named `names` ran)."""
    worlds = load(run_dir)
    flood = full and "stale-flood" in names
    gates: list[tuple[str, Callable[[], Record]]] = [
        ("gate:coverage", lambda: coverage(worlds)),
        ("gate:determinations", lambda: determinations(worlds)),
        ("gate:stale-accepted", lambda: stale(worlds, full=flood)),
        ("gate:cas-race", lambda: races(worlds)),
        ("gate:canonical-tree", lambda: trees(worlds)),
        ("gate:fence-latency", lambda: latency(worlds)),
    ]
    out = []
    for name, gate in gates:
        try:
            out.append(gate())
        except Exception as err:  # a gate that cannot be computed fails, with its traceback
            trace = run_dir / f"{name.replace(':', '-')}-error.txt"
            trace.write_text(traceback.format_exc())
            record = _record(name, name, "computable from the recorded history")
            _fail(record, [f"{type(err).__name__}: {err}"], [str(trace)])
            record.figure = "(not computed)"
            out.append(record)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m drills.gates RUN_DIR [--full]`: recompute the gates of an earlier run."""
    args = list(sys.argv[1:] if argv is None else argv)
    full = "--full" in args
    run_dir = Path(next(a for a in args if a != "--full"))
    names = [p.name for p in run_dir.iterdir() if p.is_dir()]
    records = compute(run_dir, names, full=full)
    print(report.table(records))
    failed = report.failures(records)
    if failed:
        print("\n" + failed)
    return 1 if any(r.passed is False for r in records) else 0


if __name__ == "__main__":
    raise SystemExit(main())
