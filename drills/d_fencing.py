"""Drills 1 and 5: paused holders and a policy that moves under an integration.

A lease alone cannot exclude a holder that pauses past it; the fence is the generation and
the policy checked inside the ref transaction. These drills pause real processes with
SIGSTOP at the worst moments and show that the canonical ref never moves for them.
"""

from __future__ import annotations

import json
import time
from datetime import datetime

from drills.context import Context
from drills.harness import PY, World
from drills.procs import pause, resume, wait_stopped, wait_until
from drills.registry import drill
from drills.repo import MAIN, QUEUE, git_dir, merge_tree
from integrator.records.canonical import Canonical
from integrator.records.claims import Claims

INVOICE = "".join(f"line {i}: invoice logic\n" for i in range(20))
FILES = {
    "billing/invoice.py": INVOICE,
    "billing/tax.py": "tax = 1\n",
    "docs/index.md": "# docs\n",
}
LEASE_SECONDS = 3


def _bump(world: World, task: str, generations: int) -> None:
    """Earlier attempts taken over by the coordinator, so the next attempt has a high generation."""
    with Canonical(world.repo) as canonical:
        claims = Claims(canonical)
        for n in range(generations):
            claims.reclaim(task, force=True, holder=f"agent-{n + 1}")


@drill(
    name="paused-agent",
    group="1",
    title="A (gen 7) SIGSTOPped past its lease, B = 8 lands, A resumes and submits",
    gate="A FENCED (STALE_GENERATION), held; canonical ref never moves for A",
)
def paused_agent(ctx: Context) -> str:
    w = World(ctx, "world", FILES, tags=["live"])
    w.contract("billing", ["billing/**"], holder="agent-0")
    _bump(w, "billing", 5)
    a = w.reclaim("billing", holder="agent-A", lease=f"{LEASE_SECONDS}s", force=True)
    ctx.equal("A's contract generation", 7, a.generation, [a.path])
    w.serve()
    ready, go, out = w.root / "a.ready", w.root / "a.go", w.root / "a.out"
    argv = [PY, "-m", "drills.agent", "--repo", str(w.repo), "--spool", str(w.spool.root)]
    argv += ["--contract", str(a.path), "--files", json.dumps({"billing/tax.py": "tax = 2\n"})]
    argv += ["--ready", str(ready), "--go", str(go), "--out", str(out)]
    agent = ctx.spawn(argv, log=w.logs / "agent-a.log")
    cand_a = str(wait_until(lambda: ready.exists() and ready.read_text().strip(), 30, "A ready"))
    pause(agent)
    expires = datetime.fromisoformat(a.doc["lease"]["expiresAt"].replace("Z", "+00:00"))
    time.sleep(max(0.0, expires.timestamp() - time.time()) + 0.3)
    # The coordinator reclaims without --force: that only works once A's lease is over.
    b = w.reclaim("billing", holder="agent-B", lease="10m")
    ctx.equal("B's contract generation", 8, b.generation, [b.path])
    cand_b = w.commit({"billing/invoice.py": INVOICE + "b = 8\n"}, parent=b.doc["baseCommit"])
    sub_b = w.cli(
        "submit", "--spool", str(w.spool.root), "--contract", str(b.path),
        "--candidate", cand_b, "--repo", str(w.repo), "--wait", "60", "--json",
        expect=(0, 1, 3), label="submit-B",
    )  # fmt: skip
    w.published.append(sub_b.json()["submission"])
    ctx.equal("B's verdict", "ACCEPTED", sub_b.json()["verdict"]["decision"], [w.commands])
    head_b = w.ref(QUEUE)
    ctx.expect(
        "A was still paused while B landed",
        agent.poll() is None and not out.exists(),
        expected="A stopped, nothing submitted",
        actual=f"exit {agent.poll()}, output {out.exists()}",
    )
    go.write_text("done\n")
    resume(agent)
    code = agent.wait(timeout=90)
    doc = json.loads(out.read_text()) if out.exists() and out.read_text().strip() else {}
    sid = doc.get("submission", "")
    if sid:
        w.published.append(sid)
    w.settle()
    verdict = doc.get("verdict", {})
    codes = [v["code"] for v in verdict.get("violations", [])]
    ctx.equal("A's submit exit status", 1, code, [out, w.logs / "agent-a.log"])
    ctx.expect(
        "A's verdict",
        verdict.get("decision") == "FENCED" and "STALE_GENERATION" in codes,
        expected="FENCED with STALE_GENERATION",
        actual=f"{verdict.get('decision')} {codes}",
        evidence=[out],
    )
    ctx.equal("queue head after A", head_b, w.ref(QUEUE), w.evidence())
    ctx.equal("main after A", head_b, w.ref(MAIN), w.evidence())
    ctx.expect(
        "A's candidate never on the queue",
        cand_a not in w.landed() and cand_b in w.landed(),
        expected=f"landed = [{cand_b[:12]}] only",
        actual=str([c[:12] for c in w.landed()]),
        evidence=w.evidence(),
    )
    held = w.ref(f"refs/integrator/held/{sid}") if sid else None
    ctx.expect(
        "A's candidate is kept for review",
        held is not None and w.filed(sid) is not None and w.filed(sid)[0] == "fenced",  # type: ignore[index]
        expected=f"fenced/{sid} and refs/integrator/held/{sid}",
        actual=f"{w.filed(sid) if sid else None}, held {held}",
        evidence=[w.spool.root],
    )
    assert head_b is not None
    clean, _ = merge_tree(w.repo, a.doc["baseCommit"], head_b, cand_a)
    ctx.expect(
        "A's stale patch would have merged cleanly (the fence, not a conflict, stopped it)",
        clean,
        expected="git merge-tree clean",
        actual="clean" if clean else "conflict",
    )
    return f"A gen {a.generation} → {verdict.get('decision')} {','.join(codes)}; B gen {b.generation} ACCEPTED"


@drill(
    name="paused-integrator",
    group="1",
    title="A's integrate SIGSTOPped before its transaction; coordinator reclaims, B lands",
    gate="A FENCED (REF_MOVED, STALE_GENERATION) via integrate and via the daemon; queue +B only",
)
def paused_integrator(ctx: Context) -> str:
    w = World(ctx, "world", FILES)
    a = w.contract("billing", ["billing/**"], holder="agent-A", lease="10m")
    cand_a = w.commit({"billing/tax.py": "tax = 2\n"}, parent=a.doc["baseCommit"])
    proc = w.start_integrate(a, cand_a, fault="stop:before-transaction")
    wait_stopped(proc, 60, "A's integrate at before-transaction")
    # A's lease is still valid: the coordinator takes the attempt back on purpose (--force).
    b = w.reclaim("billing", holder="agent-B", force=True)
    cand_b = w.commit({"billing/invoice.py": INVOICE + "b\n"}, parent=b.doc["baseCommit"])
    got_b = w.integrate(b, cand_b, label="integrate-B")
    ctx.equal("B's verdict", "ACCEPTED", got_b.decision, [got_b.file])
    head_b = w.ref(QUEUE)
    resume(proc)
    got_a = w.finish_integrate(proc, a, "integrate-A-resumed")
    ctx.expect(
        "A's verdict after resuming",
        got_a.decision == "FENCED" and "REF_MOVED" in got_a.codes,
        expected="FENCED with REF_MOVED (the claim moved) and STALE_GENERATION",
        actual=f"{got_a.decision} {got_a.codes}",
        evidence=[got_a.file],
    )
    ctx.expect(
        "A's verdict names the stale generation",
        "STALE_GENERATION" in got_a.codes,
        expected="STALE_GENERATION among the codes",
        actual=str(got_a.codes),
        evidence=[got_a.file],
    )
    ctx.equal("queue head after A", head_b, w.ref(QUEUE), w.evidence())
    ctx.equal("landed candidates", [cand_b], w.landed(), w.evidence())
    # The same pause inside the daemon, which lands through the same engine.
    d = w.setup_contract("docs", ["docs/**"])
    sid = w.publish(d, w.commit({"docs/index.md": "# d2\n"}, parent=d.doc["baseCommit"]))
    served = w.serve("--once", env={"INTEGRATOR_FAULT": "stop:before-transaction"})
    wait_stopped(served.proc, 60, "the daemon at before-transaction")
    w.reclaim("docs", holder="agent-D2", force=True)
    resume(served.proc)
    ctx.equal("the daemon exits after draining", 0, served.proc.wait(timeout=60), [served.log])
    w.settle()
    folder, verdict = w.verdict_of(sid)
    codes = [v["code"] for v in verdict.get("violations", [])]
    ctx.expect(
        "the daemon's verdict after its pause",
        folder == "fenced" and {"REF_MOVED", "STALE_GENERATION"} <= set(codes),
        expected="FENCED with REF_MOVED and STALE_GENERATION",
        actual=f"{folder} {codes}",
        evidence=[w.spool.root / folder / sid, served.log],
    )
    ctx.equal("queue head after the daemon's pause", head_b, w.ref(QUEUE), w.evidence())
    return (
        f"integrate: A → {got_a.decision} {','.join(got_a.codes)}; "
        f"daemon: → {folder.upper()} {','.join(codes)}; queue +1 (B only)"
    )


def _new_policy(world: World, marker: str) -> str:
    text = world.cli("policy", "init").out
    path = world.root / f"policy-{marker}.toml"
    path.write_text(text.replace('ci = [".github/**"', f'ci = [".github/**", "{marker}/**"'))
    return str(path)


@drill(
    name="policy-upgrade",
    group="5",
    title="policy set while integrate is stopped after the check / before the transaction",
    gate="FENCED (POLICY_CHANGED, REF_MOVED), queue unchanged; a prepared transaction blocks it",
)
def policy_upgrade(ctx: Context) -> str:
    w = World(ctx, "world", FILES)
    outcomes = []
    for n, point in enumerate(("after-check", "before-transaction")):
        task = f"t{n}"
        c = w.setup_contract(task, [f"area{n}/**"])
        cand = w.commit({f"area{n}/f.txt": "new\n"}, parent=c.doc["baseCommit"])
        before = (w.ref(QUEUE), w.ref(MAIN))
        proc = w.start_integrate(c, cand, fault=f"stop:{point}")
        wait_stopped(proc, 60, f"integrate stopped at {point}")
        w.cli("policy", "set", "--repo", str(w.repo), _new_policy(w, f"ci{n}"))
        resume(proc)
        got = w.finish_integrate(proc, c, f"integrate-{point}")
        outcomes.append(f"{point}: {got.decision} {','.join(dict.fromkeys(got.codes))}")
        ctx.expect(
            f"verdict when the policy moved at {point}",
            got.decision == "FENCED" and {"POLICY_CHANGED", "REF_MOVED"} <= set(got.codes),
            expected="FENCED with POLICY_CHANGED and REF_MOVED",
            actual=f"{got.decision} {got.codes}",
            evidence=[got.file],
        )
        ctx.equal(f"queue and main after {point}", before, (w.ref(QUEUE), w.ref(MAIN)))
    # Stopped with the transaction prepared, the integrator holds the policy ref's lock:
    # the upgrade cannot slip in between, it fails and is retried after the commit.
    c = w.setup_contract("late", ["late/**"])
    cand = w.commit({"late/f.txt": "new\n"}, parent=c.doc["baseCommit"])
    proc = w.start_integrate(c, cand, fault="stop:after-prepare")
    wait_stopped(proc, 60, "integrate stopped at after-prepare")
    locks = sorted(str(p) for p in (git_dir(w.repo) / "refs").rglob("*.lock"))
    blocked = w.cli(
        "policy", "set", "--repo", str(w.repo), _new_policy(w, "ci9"), expect=None, label="blocked"
    )
    ctx.expect(
        "policy set while a transaction is prepared",
        blocked.code == 4 and ".lock" in blocked.err,
        expected="refused, exit 4, naming the held .lock",
        actual=f"exit {blocked.code}: {blocked.err.strip()[-200:]}",
        evidence=[w.commands, *locks],
    )
    resume(proc)
    got = w.finish_integrate(proc, c, "integrate-after-prepare")
    ctx.equal("the prepared integration commits", "ACCEPTED", got.decision, [got.file])
    retry = w.cli("policy", "set", "--repo", str(w.repo), _new_policy(w, "ci9"), "--json")
    ctx.equal("policy set after the commit revokes nothing", [], retry.json()["revoked"])
    ctx.equal("landed", [cand], w.landed(), w.evidence())
    outcomes.append(f"after-prepare: policy set exit {blocked.code}, then {got.decision}")
    return "; ".join(outcomes)
