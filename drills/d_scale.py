"""The two quantitative drills: a flood of stale submissions, and CAS races between processes.

Setup (claims, superseded generations, candidates) is done in-process with integrator's
library, because the coordinator is not what these drills measure; what they measure runs
as real processes: the daemon draining the flood, N `integrate` processes racing.
"""

from __future__ import annotations

import json
import subprocess
import time
from datetime import timedelta
from typing import Any

from drills.context import Context
from drills.harness import World
from drills.procs import DrillError, is_stopped, resume, wait_until
from drills.records import Contract, Decision
from drills.registry import drill
from drills.repo import QUEUE, make_commit
from integrator.documents.contract import OwnershipContract
from integrator.landing.engine import Integrator
from integrator.records.canonical import Canonical
from integrator.records.claims import Claims, IssueRequest

FLOOD_FULL, FLOOD_QUICK = 10_000, 300
RACES_FULL, RACES_QUICK = 5, 1


def _contract_file(w: World, contract: OwnershipContract, label: str) -> Contract:
    path = w.contracts / f"{label}.json"
    path.write_text(contract.to_json())
    return Contract(path, json.loads(contract.to_json()))


@drill(
    name="stale-flood",
    group="gate",
    title="submissions from superseded generations flood the daemon (serve --once)",
    gate="0 accepted; every one FENCED STALE_GENERATION; live controls still land",
)
def stale_flood(ctx: Context) -> str:
    size = FLOOD_FULL if ctx.full else FLOOD_QUICK
    tasks = 12
    w = World(ctx, "world", {f"area{k}/f.txt": "0\n" for k in range(tasks)}, tags=["stale-flood"])
    old: list[tuple[dict[str, Any], str]] = []
    live: list[OwnershipContract] = []
    with Canonical(w.repo) as canonical:
        claims = Claims(canonical)
        for k in range(tasks):
            task = f"t{k}"
            request = IssueRequest(task_id=task, paths=(f"area{k}/**",), lease=timedelta(hours=2))
            contract = claims.issue(request)
            for gen in range(1, 4):
                files = {f"area{k}/f.txt": f"attempt of generation {gen}\n"}
                cand = make_commit(
                    w.repo, files, parent=contract.base_commit, message=f"{task} g{gen}"
                )
                old.append((json.loads(contract.to_json()), cand))
                if k % 3 == 0 and gen == 1:
                    # This generation landed before it was superseded: replaying it is stale too.
                    landing = Integrator(canonical).integrate(contract.to_json().encode(), cand)
                    w.keep(f"setup-{task}", landing.wire(), json.loads(contract.to_json()),
                           ["in-process Integrator.integrate"], landing.exit_code)  # fmt: skip
                    if landing.decision.value != "ACCEPTED":
                        raise DrillError(f"setup landing of {task} was {landing.decision}")
                contract = claims.reclaim(task, force=True, holder=f"agent-{gen + 1}",
                                          lease=timedelta(hours=2))  # fmt: skip
            live.append(contract)
    started = time.perf_counter()
    flood = [w.publish(*old[n % len(old)]) for n in range(size)]
    fill = time.perf_counter() - started
    controls = []
    for k, contract in enumerate(live):
        cand = make_commit(w.repo, {f"area{k}/g.txt": "live\n"}, parent=contract.base_commit,
                           message=f"t{k} live")  # fmt: skip
        controls.append(w.publish(json.loads(contract.to_json()), cand))
    head = w.ref(QUEUE)
    w.meta.update(floodHead=head, flood=flood, controls=controls)
    w.save_meta()
    started = time.perf_counter()
    w.serve_once()
    drain = time.perf_counter() - started
    w.settle(timeout=120)
    accepted = fenced_stale = 0
    for sid in flood:
        folder, verdict = w.verdict_of(sid)
        accepted += folder == "accepted"
        codes = [v["code"] for v in verdict.get("violations", [])]
        fenced_stale += folder == "fenced" and "STALE_GENERATION" in codes
    ctx.equal("old-generation submissions accepted", 0, accepted, [w.spool.root / "accepted"])
    ctx.equal("old-generation submissions FENCED with STALE_GENERATION", size, fenced_stale,
              [w.spool.root / "fenced"])  # fmt: skip
    ok = [w.verdict_of(s)[0] for s in controls].count("accepted")
    ctx.equal("live controls accepted after the flood", len(controls), ok, [w.spool.root])
    landed_after = w.landed()[-len(controls) :]
    ctx.equal("the queue moved only for the controls", len(controls), len(landed_after))
    rate = size / drain if drain else 0.0
    return (
        f"{accepted}/{size} stale accepted ({fenced_stale} FENCED STALE_GENERATION); "
        f"{ok}/{len(controls)} live controls landed; "
        f"fill {fill:.1f} s, drain {drain:.1f} s ({rate:.0f}/s)"
    )


def _race_contracts(w: World, size: int, race: int) -> list[tuple[str, Contract, str]]:
    """(label, contract, candidate) for `size` processes: disjoint tasks, one claim twice,
    and one task that clashes textually with the first disjoint one."""
    head = w.ref(QUEUE)
    out: list[tuple[str, Contract, str]] = []
    with Canonical(w.repo) as canonical:
        claims = Claims(canonical)

        def issue(task: str, paths: tuple[str, ...], force: bool = False) -> Contract:
            request = IssueRequest(task_id=task, paths=paths, lease=timedelta(hours=2))
            return _contract_file(w, claims.issue(request, force_shared=force), task)

        for i in range(size - 3):
            c = issue(f"r{race}-d{i}", (f"area{i}/**",))
            out.append((f"d{i}", c, make_commit(w.repo, {f"area{i}/f.txt": f"race {race} by d{i}\n"},
                                                parent=head, message=f"r{race} d{i}")))  # fmt: skip
        dup = issue(f"r{race}-dup", ("dup/**",))
        for n in (1, 2):
            cand = make_commit(
                w.repo, {f"dup/{race}-{n}.txt": "x\n"}, parent=head, message=f"dup {n}"
            )
            out.append((f"dup{n}", dup, cand))
        clash = issue(f"r{race}-clash", ("area0/**",), force=True)
        cand = make_commit(w.repo, {"area0/f.txt": f"race {race} by clash\n"}, parent=head,
                           message=f"r{race} clash")  # fmt: skip
        out.append(("clash", clash, cand))
    return out


def _revoke_leftovers(w: World, tasks: set[str]) -> None:
    """The coordinator retires the fenced attempts' claims, so the next race can claim again."""
    with Canonical(w.repo) as canonical:
        claims = Claims(canonical)
        for claim in canonical.claims():
            if claim.view.task_id in tasks and claim.view.state == "live":
                claims.revoke(claim.view.task_id, "fenced in a race drill; retired")


def _release_rounds(
    procs: list[subprocess.Popen[bytes]], w: World, timeout: float
) -> list[tuple[str, int]]:
    """Release every stopped process at once, again and again, until all have exited.

    Each integrate stops itself at before-transaction (its staging commit written, no ref
    touched); when every live one is stopped, all have read the same queue head, and one
    SIGCONT each starts a race on it. Returns (head raced on, processes released) per round.
    """
    heads: list[tuple[str, int]] = []
    deadline = time.monotonic() + timeout
    while any(p.poll() is None for p in procs):

        def all_parked() -> bool:
            return all(p.poll() is not None or is_stopped(p) for p in procs)

        wait_until(all_parked, max(1.0, deadline - time.monotonic()), "racers to park")
        stopped = [p for p in procs if is_stopped(p)]
        if not stopped:
            continue
        heads.append((w.ref(QUEUE) or "", len(stopped)))
        # SIGCONT takes effect inside kill(): once sent, a racer is runnable, not parked.
        for p in stopped:
            resume(p)
    return heads


@drill(
    name="cas-race",
    group="gate",
    title="4 and 8 integrate processes released together against the same queue head",
    gate="≤ 1 successful CAS per read head; every candidate ACCEPTED once or FENCED with a reason",
)
def cas_race(ctx: Context) -> str:
    rounds = RACES_FULL if ctx.full else RACES_QUICK
    summary = []
    for size in (4, 8):
        files = {f"area{i}/f.txt": "0\n" for i in range(size)}
        w = World(ctx, f"race{size}", files, tags=["race"])
        races = []
        accepted = fenced = 0
        for race in range(rounds):
            entries = _race_contracts(w, size, race)
            start = w.ref(QUEUE)
            procs = [w.start_integrate(c, cand, fault="stop:before-transaction")
                     for _, c, cand in entries]  # fmt: skip
            heads = _release_rounds(procs, w, timeout=180)
            decisions: list[Decision] = [
                w.finish_integrate(p, c, f"race{race}-{label}")
                for p, (label, c, _) in zip(procs, entries, strict=True)
            ]
            races.append({
                "size": size,
                "start": start,
                "heads": [head for head, _ in heads],
                "released": [n for _, n in heads],
                "processes": [
                    {"label": label, "task": c.task, "candidate": cand,
                     "exit": d.code, "verdict": str(d.file)}
                    for (label, c, cand), d in zip(entries, decisions, strict=True)
                ],
            })  # fmt: skip
            won = sum(d.decision == "ACCEPTED" for d in decisions)
            lost = sum(d.decision == "FENCED" and bool(d.codes) for d in decisions)
            accepted += won
            fenced += lost
            ctx.equal(f"race {size}×{race}: landed", size - 2, won, [d.file for d in decisions])
            ctx.equal(f"race {size}×{race}: fenced with a reason", 2, lost,
                      [d.file for d in decisions])  # fmt: skip
            _revoke_leftovers(w, {c.task for _, c, _ in entries})
        w.meta["races"] = races
        w.save_meta()
        ctx.equal(f"{size} processes: queue length", accepted, len(w.chain()), w.evidence())
        summary.append(f"{rounds}×{size}: {accepted} landed, {fenced} fenced")
    return "; ".join(summary)
