"""Drill 6: the integrator is killed right after its ref transaction commits.

Recovery must confirm the earlier result by candidate OID (the consumed claim names the
staging commit, whose trailer names the candidate) and never merge a second time, for a
one-shot `integrate` and for the daemon mid-batch. A kill with the transaction prepared
leaves git's lock files, which are reported and never deleted by integrator.
"""

from __future__ import annotations

import signal

from drills.context import Context
from drills.harness import World
from drills.registry import drill
from drills.repo import QUEUE, git, git_dir, message
from integrator.documents.trailers import trailers

FILES = {f"area{i}/f.txt": f"{i}\n" for i in range(6)}


@drill(
    name="kill-after-commit",
    group="6",
    title="SIGKILL right after the ref transaction commits (CLI and daemon), and when prepared",
    gate="recovery reports the landing by candidate OID; one staging commit per candidate",
)
def kill_after_commit(ctx: Context) -> str:
    w = World(ctx, "world", FILES)
    # One-shot integrate, killed after commit, then run again.
    c = w.setup_contract("t0", ["area0/**"])
    cand = w.commit({"area0/f.txt": "changed\n"}, parent=c.doc["baseCommit"])
    killed = w.integrate(c, cand, fault="kill:after-commit", expect=(-signal.SIGKILL,),
                         label="integrate-killed")  # fmt: skip
    chain = w.chain()
    ctx.expect(
        "the killed integrate had landed its candidate",
        len(chain) == 1 and trailers(message(w.repo, chain[0])).get("Integrator-Candidate") == cand,
        expected=f"one staging commit naming {cand[:12]}",
        actual=str(chain),
        evidence=[killed.file, *w.evidence()],
    )
    again = w.integrate(c, cand, label="integrate-rerun")
    ctx.expect(
        "the rerun confirms the earlier landing",
        again.decision == "ACCEPTED"
        and again.verdict.get("recovered") is True
        and again.verdict.get("stagingCommit") == (chain[0] if chain else None),
        expected=f"ACCEPTED, recovered, stagingCommit {chain[0][:12] if chain else '?'}",
        actual=f"{again.decision} recovered={again.verdict.get('recovered')} "
        f"staging={again.verdict.get('stagingCommit')}",
        evidence=[again.file],
    )
    ctx.equal("no second merge (CLI)", chain, w.chain(), w.evidence())
    # The daemon, batches of two, killed after committing the first batch.
    tasks = [w.setup_contract(f"t{i}", [f"area{i}/**"]) for i in range(1, 5)]
    cands = [w.commit({f"area{i}/f.txt": "changed\n"}, parent=t.doc["baseCommit"])
             for i, t in enumerate(tasks, 1)]  # fmt: skip
    sids = [w.publish(t, cand) for t, cand in zip(tasks, cands, strict=True)]
    config = w.config("[serve]\nbatch-size = 2\n")
    w.serve_once("--config", str(config), env={"INTEGRATOR_FAULT": "kill:after-commit"},
                 expect=-signal.SIGKILL)  # fmt: skip
    ctx.equal("after the kill: landed, not yet filed", sids[:2], w.spool.entries("work"))
    w.serve_once()
    w.settle()
    recovered = [w.verdict_of(s)[1].get("recovered") is True for s in sids]
    ctx.equal("recovered flags (the first batch had landed)", [True, True, False, False],
              recovered, [w.spool.root])  # fmt: skip
    landed = w.landed()
    ctx.equal("each candidate landed exactly once", [cand, *cands], landed, w.evidence())
    # Killed with the transaction prepared: the locks stay, the rerun names them, moves nothing.
    late = w.setup_contract("t5", ["area5/**"])
    cand5 = w.commit({"area5/f.txt": "changed\n"}, parent=late.doc["baseCommit"])
    head = w.ref(QUEUE)
    w.integrate(late, cand5, fault="kill:after-prepare", expect=(-signal.SIGKILL,),
                label="integrate-killed-prepared")  # fmt: skip
    # git locks HEAD too when it moves the branch HEAD points at: look in the whole git dir.
    locks = sorted(p for p in git_dir(w.repo).rglob("*.lock") if "objects" not in p.parts)
    blocked = w.integrate(late, cand5, expect=(4,), label="integrate-blocked")
    ctx.expect(
        "a prepared-then-killed transaction leaves its locks, reported not removed",
        bool(locks) and all(p.exists() for p in locks) and w.ref(QUEUE) == head,
        expected="lock files present, exit 4, queue unchanged",
        actual=f"locks {[str(p) for p in locks]}, exit {blocked.code}, queue {w.ref(QUEUE)}",
        evidence=[w.commands],
    )
    for lock in locks:  # the operator checked that no integrator runs
        lock.unlink()
    done = w.integrate(late, cand5, label="integrate-after-unlock")
    ctx.equal("after the locks are cleared it lands once", "ACCEPTED", done.decision, [done.file])
    final = w.landed()
    ctx.equal("landed in order, each once", [cand, *cands, cand5], final, w.evidence())
    claim_log = git("log", "-1", "--format=%s", "refs/integrator/claims/t0", cwd=w.repo)
    ctx.expect(
        "the claim names its single consumption",
        claim_log.startswith("consume: t0"),
        expected="consume: t0 …",
        actual=claim_log,
    )
    return f"CLI kill → recovered {again.decision}; daemon kill → {sum(recovered)}/4 recovered; {len(final)} landings, 0 duplicates"
