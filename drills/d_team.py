"""Drill 9: the whole team at once — server, three hosts, agents, a release manager, faults.

A `git daemon` on 127.0.0.1 serves the canonical bare repository and an intake. Three
integrator hosts, each with its own mirror and spool, run `integrator serve --intake` (and
with it a promoter: `[validation]` is on, with a command that fails for exactly one
culprit). A coordinator issues every contract on its own mirror (`contract issue -o FILE`,
the attempt key beside it); agents in their own clones submit through
`integrator submit --intake`, one through `integrator mcp --intake` over stdio. In the
middle one host is SIGKILLed (and restarted), and the git server is stopped by its PID for
a few seconds (and started again on the same port) while an agent tries to submit. One
agent's lease lapses before its submission is decided; the coordinator reclaims the task
and the release manager approves the held candidate on the review pages, over HTTP
(logged in with the token, the form posted with its CSRF token); another candidate that
wrote outside its contract is rejected there. One promoted landing is reverted
(`integrator revert`).

Then, from the records only: every submission has one final state that every channel
reports alike (`status --intake`, also `--until promoted`; `status --spool` on each host
that filed it; `history --json`; MCP `read_verdict`) and that its scenario leads to; the
target only ever pointed at trees the validation script passed; nothing landed twice and
nothing that no one sent; one verdict per submission on the intake, no submit ref left;
no ref on the server (or a mirror) that the run does not explain.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from drills.context import Context
from drills.procs import DrillError, wait_until
from drills.registry import drill
from drills.team import Host, TeamWorld
from drills.team_checks import (
    Sub,
    check_authority_signed,
    check_channels,
    check_intake,
    check_queue,
    check_server_refs,
    check_target,
    read_channels,
)
from drills.team_faces import ReviewPage, bind_contract, mcp_calls

MARKER = "BROKEN"
# The validation command: fails when a file named BROKEN is in the checkout, and appends
# "<tree> pass|fail" to a log outside it either way: the drill's own witness of what passed.
CHECK_SCRIPT = f"""#!/bin/sh
log="$1"
found=$(find . -name {MARKER} | head -n 1)
if [ -n "$found" ]; then
    echo "$INTEGRATOR_VALIDATION_TREE fail" >> "$log"
    echo "check: marker $found is present in head $INTEGRATOR_VALIDATION_HEAD"
    exit 1
fi
echo "$INTEGRATOR_VALIDATION_TREE pass" >> "$log"
echo "check: ok"
"""
HOSTS = ("host-a", "host-b", "host-c")
SPECIAL = ("cul", "rej", "lap", "mcp")  # the culprit, the rejected, the lapsed, the MCP agent


def _policy(runs: str) -> str:
    return (
        "version = 1\n\n[validation]\n"
        f'command = ["sh", "ci/check.sh", "{runs}"]\ntimeout = 120\nmax_batch = 4\n'
    )


def _sizes(full: bool) -> dict[str, int]:
    """Ordinary agents per wave (t00, the first, is the one reverted) and the outage."""
    if full:
        return {"wave1": 6, "wave2": 6, "outage": 2, "wave3": 6, "outage_seconds": 8}
    return {"wave1": 1, "wave2": 1, "outage": 1, "wave3": 0, "outage_seconds": 3}


class Team:
    """The scenario's state: the world, the submissions so far, the faults injected."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.sizes = _sizes(ctx.full)
        count = sum(self.sizes[k] for k in ("wave1", "wave2", "outage", "wave3"))
        tasks = [f"t{i:02d}" for i in range(count)]
        self.tasks = [*tasks, *SPECIAL]
        self.runs = ctx.dir / "team" / "runs.log"
        files = {f"{t}/f.txt": f"{t}\n" for t in self.tasks}
        files |= {"ci/check.sh": CHECK_SCRIPT, "shared/config.txt": "shared\n"}
        self.world = TeamWorld(ctx, files, _policy(str(self.runs)))
        self.hosts = [self.world.add_host(name) for name in HOSTS]
        self.subs: list[Sub] = []
        self.faults: Counter[str] = Counter()
        self.mcp: dict[str, tuple[int, Any]] = {}

    def send(self, label: str, task: str, files: dict[str, str], expected: str) -> Sub:
        """Issue the task's contract, commit the agent's work in its clone, submit it."""
        w = self.world
        agent = w.agent(label, w.issue(task, [f"{task}/**"]), files)
        return self.submitted(label, agent, w.submit(agent).json()["submission"], expected)

    def submitted(self, label: str, agent: Any, sid: str, expected: str, via: str = "cli") -> Sub:
        sub = Sub(label, agent, sid, via, expected)
        self.subs.append(sub)
        return sub

    def ordinary(self, tasks: list[str]) -> None:
        for task in tasks:
            expected = "reverted/1" if task == "t00" else "promoted/0"
            self.send(task, task, {f"{task}/f.txt": f"{task} changed\n"}, expected)

    def published(self) -> set[str]:
        return {
            ref.rsplit("/", 1)[-1]
            for ref in self.world.server.refs("intake", "refs/integrator/verdicts/")
        }

    def holder(self, sub: Sub, timeout: float = 120) -> Host:
        """A host whose spool holds the submission in fenced/ (to act on it there)."""

        def found() -> Host | None:
            return next((h for h in self.hosts if (h.spool / "fenced" / sub.sid).is_dir()), None)

        return wait_until(found, timeout, f"a host holding {sub.label} ({sub.sid})",
                          [h.spool for h in self.hosts], interval=0.1)  # fmt: skip


@drill(
    name="team",
    group="9",
    title="the whole team: git server, 3 hosts, intake, validation with a culprit, review "
    "page, CLI and MCP agents, a revert, a server outage and a host SIGKILLed",
    gate="every submission one final state, the same on every channel; target only on "
    "validated trees; nothing twice, nothing lost, no ref left behind",
)
def team(ctx: Context) -> str:  # noqa: PLR0915 — one scenario, step by step
    started = time.perf_counter()
    t = Team(ctx)
    w, sizes, hosts = t.world, t.sizes, t.hosts
    for served in [w.serve(host, ready=False) for host in hosts]:  # started together
        served.wait_event("daemon.ready", 1, timeout=60)
    ordinary = [task for task in t.tasks if task not in SPECIAL]
    first, second = sizes["wave1"], sizes["wave1"] + sizes["wave2"]
    late_start = second + sizes["outage"]

    # The lapsed agent: a two-second lease; its work is handed in well after it ran out.
    lapsed = w.agent("lapsed", w.issue("lap", ["lap/**"], lease="2s"), {"lap/f.txt": "late\n"})

    # -- wave 1: ordinary agents, the culprit, one out of its contract, the MCP agent --------
    w.note("wave 1")
    t.ordinary(ordinary[:first])
    t.send("culprit", "cul", {"cul/f.txt": "cul changed\n", f"cul/{MARKER}": "breaks the build\n"},
           "ejected/1")  # fmt: skip
    rejected = t.send("rejected", "rej", {"rej/f.txt": "rej changed\n",
                                          "shared/config.txt": "mine now\n"}, "FENCED/1")  # fmt: skip
    mcp_agent = w.agent("mcp", w.issue("mcp", ["mcp/**"]), {"mcp/f.txt": "mcp changed\n"})
    key = bind_contract(mcp_agent.clone, mcp_agent.contract.path)
    code, doc, text = mcp_calls(w, mcp_agent.clone, key, [("submit", {})])[0]
    if code != 0 or "submission" not in doc:
        raise DrillError(f"MCP submit answered {code}: {text[:300]}", [w.commands])
    mcp_sub = t.submitted("mcp", mcp_agent, str(doc["submission"]), "promoted/0", via="mcp")

    # -- wave 2, and host B SIGKILLed while it has taken some of it ----------------------
    w.note("wave 2")
    b = hosts[1]
    taken = len(b.events("intake.taken"))
    t.ordinary(ordinary[first:second])
    wave2 = {s.sid for s in t.subs[-sizes["wave2"] :]}
    wait_until(lambda: len(b.events("intake.taken")) > taken or wave2 <= t.published(), 60,
               "host-b to take wave 2 (or the others to answer it)", [b.runs[-1].log],
               interval=0.05)  # fmt: skip
    took = len(b.events("intake.taken")) > taken
    w.kill(b)
    t.faults["host SIGKILL"] += 1
    w.serve(b)  # the same mirror and spool, as systemd would restart it

    # -- the git server down by its PID for a few seconds, an agent trying meanwhile --------
    waiting = [
        w.agent(task, w.issue(task, [f"{task}/**"]), {f"{task}/f.txt": f"{task} changed\n"})
        for task in ordinary[second:late_start]
    ]  # the coordinator issued and the agents cloned while the server was up
    port = w.server.port
    w.note(f"git server stopped (pid {w.server.proc.pid if w.server.proc else '?'})")
    down = time.perf_counter()
    w.server.stop()
    t.faults["server outage"] += 1
    for agent in waiting:
        w.submit(agent, expect=(4,))  # the push cannot reach the server: retry later
        t.faults["submit refused (exit 4) during the outage"] += 1
    time.sleep(max(0.0, sizes["outage_seconds"] - (time.perf_counter() - down)))
    w.server.start(port)
    w.note(f"git server back on port {port} after {time.perf_counter() - down:.1f} s")
    for agent in waiting:
        t.submitted(agent.name, agent, w.submit(agent).json()["submission"], "promoted/0")

    # -- wave 3, and the lapsed agent's late submission ----------------------------------
    w.note("wave 3")
    t.ordinary(ordinary[late_start:])
    late = t.submitted("lapsed", lapsed, w.submit(lapsed).json()["submission"], "promoted/0")
    late.apart = (
        "the release manager's approval on one host's page is what every channel reports "
        "(intake, every host's spool and registry)"
    )
    every = {s.sid for s in t.subs}
    wait_until(lambda: every <= t.published(), 240, "a verdict for every submission",
               [h.runs[-1].log for h in hosts], interval=0.25)  # fmt: skip

    # -- the release manager, on the review pages over HTTP ------------------------------
    w.note("release manager")
    late_host, rejected_host = t.holder(late), t.holder(rejected)
    w.reclaim("lap", str(lapsed.contract.doc["baseCommit"]))
    pages = {h.name: ReviewPage(w, h) for h in {late_host.name: late_host,
                                                rejected_host.name: rejected_host}.values()}  # fmt: skip
    for page in pages.values():
        page.login()
    approved = pages[late_host.name].act(late.sid, "approve", "the lease ran out in CI; reclaimed")
    refused_page = pages[rejected_host.name].act(rejected.sid, "reject", "writes shared/config.txt")
    for page in pages.values():
        page.close()
    ctx.equal("the release manager's approval on the page lands the lapsed candidate",
              (200, "ACCEPTED"), approved, [w.commands])  # fmt: skip
    ctx.equal("the release manager's rejection on the page archives the other",
              (200, "ARCHIVED"), refused_page, [w.commands])  # fmt: skip

    # -- a revert of a promoted landing --------------------------------------------------
    w.note("revert")
    first_sub = t.subs[0]
    promoted = w.cli("status", "--intake", w.intake, "--submission", first_sub.sid,
                     "--task", first_sub.task, "--repo", str(first_sub.agent.clone),
                     "--until", "promoted", "--wait", "240", "--json", label="wait-promoted")  # fmt: skip
    staging = str(promoted.json()["landing"]["stagingCommit"])
    w.cli("revert", "--repo", str(hosts[0].mirror), staging, "--reason", "t00 broke the demo",
          "--json", label="revert")  # fmt: skip

    # -- settle, stop the hosts, read every channel ----------------------------------------
    w.quiet(every, 300)
    stopped = w.stop_hosts()
    ctx.equal("every host stops cleanly on SIGTERM", dict.fromkeys(HOSTS, 0), stopped,
              [r.log for h in hosts for r in h.runs])  # fmt: skip
    code, doc, _ = mcp_calls(w, mcp_agent.clone, key,
                             [("read_verdict", {"submission": mcp_sub.sid})])[0]  # fmt: skip
    t.mcp[mcp_sub.sid] = (code, doc)
    read_channels(w, t.subs, t.mcp, every=ctx.full)
    states = check_channels(ctx, w, t.subs)
    moves = check_target(ctx, w, t.runs, MARKER)
    landings = check_queue(ctx, w, [s.agent.candidate for s in t.subs])
    check_intake(ctx, w, t.subs)
    held = {s.sid for s in t.subs if s.expected.startswith("ejected")}
    check_server_refs(ctx, w, t.tasks, t.subs, held)
    check_authority_signed(ctx, w)
    _host_facts(t, took)

    wall = time.perf_counter() - started
    w.meta.update({"submissions": len(t.subs), "faults": dict(t.faults), "states": dict(states),
                   "wallSeconds": round(wall, 1), "targetMoves": moves, "landings": landings})  # fmt: skip
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(states.items()))
    faults = ", ".join(f"{n} {k}" for k, n in t.faults.items())
    return (
        f"{len(t.subs)} submissions (1 via MCP) on 3 hosts; on the intake: {kinds}; faults: "
        f"{faults}; {landings} landings, {moves} target moves; {wall:.0f} s"
    )


def _host_facts(t: Team, took: bool) -> None:
    """What the hosts' logs say of the faults: the killed host had work, the others
    retried through the outage, and no submission was rejected for a host's trouble."""
    w = t.world
    retries = sum(len(h.events("daemon.retry_later")) + len(h.events("intake.unavailable"))
                  for h in t.hosts)  # fmt: skip
    rejected = [s.label for s in t.subs if s.seen.get("intake", "").startswith("REJECTED")]
    t.ctx.expect(
        "host and server trouble never decided a submission",
        not rejected and retries > 0,
        expected="no submission REJECTED; the hosts logged the outage and retried",
        actual=f"rejected: {rejected or 'none'}; {retries} retry/unavailable events; "
        f"host-b had taken wave 2 when killed: {took}",
        evidence=[r.log for h in t.hosts for r in h.runs] + [str(w.commands)],
    )
