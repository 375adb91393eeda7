"""The system soak: the team drill's workload, continuously, with random faults.

`make soak-system DURATION=…` (seconds, or with a unit: `90s`, `30m`) runs the world of
the team drill — a `git daemon` on 127.0.0.1 with the canonical repository and an intake,
a coordinator, three `serve --intake` hosts with validation on — and for DURATION sends one
agent after another through `submit --intake`: most change their own task's folder, a few
are culprits (the validation script fails on them: ejected) and a few write outside their
contract (FENCED). Meanwhile, at random moments (seeded: `SOAK_SEED`), one fault at a time, every kind once
in a shuffled order before any comes again:

- a host SIGKILLed and restarted on the same mirror and spool;
- the git server stopped by its PID for 2–4 s and started again on the same port;
- a full disk: host C's spool is a small tmpfs, filled to the last byte for a few seconds;
- a read-only mirror: host B's mirror bind-mounted read-only for a few seconds.

The last two need mount(2) (root on Linux); without it they are left out and said so.
Then the team settles, and the team drill's checks run on everything sent: one final state
per submission, the same on every channel, the one its kind leads to; the target only on
validated trees; nothing landed twice or lost; one verdict per submission; no ref left
behind. Sampled every few seconds: each daemon's resident memory and the refs on the
server and the mirrors — flat memory and refs bounded by the submissions are checks too.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drills.context import Context
from drills.d_team import CHECK_SCRIPT, HOSTS, MARKER, _policy
from drills.registry import drill
from drills.repo import git
from drills.team import TeamWorld
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

DEFAULT_SECONDS = 120.0
KINDS = ("ordinary", "culprit", "outside")
WEIGHTS = (0.9, 0.05, 0.05)
EXPECTED = {"ordinary": "promoted/0", "culprit": "ejected/1", "outside": "FENCED/1"}
FAULT_GAP = (8.0, 20.0)  # seconds between two faults, drawn uniformly
SPOOL_TMPFS = "48m"  # host C's spool, when it can be a tmpfs (the full-disk fault)


def duration(text: str | None) -> float:
    """`120`, `90s`, `30m`, `1h` as seconds (the soak's DURATION)."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text or "")
    if found is None:
        raise ValueError(f"not a duration: {text!r} (seconds, or 90s, 30m, 1h)")
    return float(found.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[found.group(2)]


def _run(*argv: str) -> bool:
    return subprocess.run(list(argv), capture_output=True, check=False).returncode == 0


@dataclass
class Mounts:
    """The mounts the soak made (undone at the end whatever happens)."""

    made: list[Path] = field(default_factory=list)

    def tmpfs(self, path: Path, size: str) -> bool:
        path.mkdir(parents=True, exist_ok=True)
        if not _run("mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)):
            return False
        self.made.append(path)
        return True

    def read_only(self, path: Path) -> bool:
        if not _run("mount", "--bind", str(path), str(path)):
            return False
        self.made.append(path)
        if not _run("mount", "-o", "remount,bind,ro", str(path)):
            self.undo(path)
            return False
        return True

    def undo(self, path: Path) -> None:
        if path in self.made:
            _run("umount", "-l", str(path))
            self.made.remove(path)

    def undo_all(self) -> None:
        for path in reversed(list(self.made)):
            self.undo(path)


def _memory_kib(pid: int) -> dict[str, int]:
    """The process's resident memory in KiB: all of it, and its anonymous and file-backed
    parts (`/proc/<pid>/status`); empty when the process is gone."""
    wanted = {"VmRSS:": "rss_kib", "RssAnon:": "anon_kib", "RssFile:": "file_kib"}
    out: dict[str, int] = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            words = line.split()  # "VmRSS:", "72840", "kB"
            if len(words) == 3 and words[0] in wanted:
                out[wanted[words[0]]] = int(words[1])
    return out


class Soak:
    """The workload, the faults and the samples of one soak."""

    def __init__(self, ctx: Context, seconds: float, seed: int) -> None:
        self.ctx, self.seconds = ctx, seconds
        self.rng = random.Random(seed)
        self.runs = ctx.dir / "team" / "runs.log"
        files = {"ci/check.sh": CHECK_SCRIPT, "shared/config.txt": "shared\n"}
        self.world = TeamWorld(ctx, files, _policy(str(self.runs)))
        self.hosts = [self.world.add_host(name) for name in HOSTS]
        self.mounts = Mounts()
        self.faults: Counter[str] = Counter()
        self.deck: list[str] = []
        self.left_out: list[str] = []
        self.subs: list[Sub] = []
        self.tasks: list[str] = []
        self.samples: list[dict[str, Any]] = []
        self.started = time.monotonic()
        self.disk = self.hosts[2]
        if not self.mounts.tmpfs(self.disk.spool, SPOOL_TMPFS):
            self.left_out.append("full disk (no tmpfs could be mounted)")
            self.disk = None  # type: ignore[assignment]

    # -- the workload ------------------------------------------------------------------------

    def send_one(self) -> None:
        w = self.world
        task = f"s{len(self.tasks):04d}"
        self.tasks.append(task)
        # The third is a culprit and the fifth writes outside, whatever the draw: a short
        # soak checks ejection and fencing too.
        kind = {2: "culprit", 4: "outside"}.get(len(self.tasks) - 1)
        kind = kind or self.rng.choices(KINDS, WEIGHTS)[0]
        files = {f"{task}/f.txt": f"{task} by its agent\n"}
        if kind == "culprit":
            files[f"{task}/{MARKER}"] = "breaks the build\n"
        elif kind == "outside":
            files["shared/config.txt"] = f"{task} was here\n"
        agent = w.agent(task, w.issue(task, [f"{task}/**"]), files)
        result = w.submit(agent, expect=(0, 4))
        while result.code == 4:  # the server is down: an agent tries again later
            self.faults["submit refused (exit 4), retried"] += 1
            time.sleep(1.0)
            result = w.submit(agent, expect=(0, 4))
        sid = str(result.json()["submission"])
        self.subs.append(Sub(task, agent, sid, "cli", EXPECTED[kind]))

    # -- the faults --------------------------------------------------------------------------

    def fault(self) -> None:
        """The next fault of a shuffled deck of every kind (each kind once before any comes
        again: a short soak has them all)."""
        if not self.deck:
            self.deck = ["kill", "server"]
            if self.disk is not None:
                self.deck.append("disk")
            if "read-only mirror" not in " ".join(self.left_out):
                self.deck.append("readonly")
            self.rng.shuffle(self.deck)
        getattr(self, f"_fault_{self.deck.pop()}")()

    def _fault_kill(self) -> None:
        # Host A is never killed: its one daemon lives through the whole soak, the witness
        # whose memory is judged (the others are restarted at random).
        host = self.rng.choice(self.hosts[1:])
        if host.alive():
            self.world.kill(host)
            self.faults["host SIGKILL"] += 1
        self.world.serve(host)

    def _fault_server(self) -> None:
        w = self.world
        port = w.server.port
        w.server.stop()
        w.note("git server stopped")
        time.sleep(self.rng.uniform(2.0, 4.0))
        w.server.start(port)
        w.note(f"git server back on port {port}")
        self.faults["server outage"] += 1

    def _fault_disk(self) -> None:
        assert self.disk is not None
        fill = self.disk.spool / "soak-fill"
        # Unbuffered, and the suppression outermost: a buffered file's close flushes what
        # the last write left and raises ENOSPC again, outside a suppression inside it.
        with contextlib.suppress(OSError), open(fill, "wb", buffering=0) as out:
            block = b"\0" * (1 << 20)
            while True:
                out.write(block)
        self.world.note(f"{self.disk.name}: spool disk full")
        self.send_one()  # work arrives while it is full
        time.sleep(self.rng.uniform(2.0, 5.0))
        fill.unlink()
        self.world.note(f"{self.disk.name}: spool disk has room again")
        self.faults["full disk"] += 1

    def _fault_readonly(self) -> None:
        host = self.hosts[1]
        if not self.mounts.read_only(host.mirror):
            self.left_out.append("read-only mirror (no bind mount could be made)")
            return
        self.world.note(f"{host.name}: mirror read-only")
        self.send_one()
        time.sleep(self.rng.uniform(2.0, 5.0))
        self.mounts.undo(host.mirror)
        self.world.note(f"{host.name}: mirror writable again")
        self.faults["read-only mirror"] += 1

    # -- the samples -------------------------------------------------------------------------

    def sample(self) -> None:
        w = self.world
        row: dict[str, Any] = {"t": round(time.monotonic() - self.started, 1),
                               "submissions": len(self.subs)}  # fmt: skip
        for host in self.hosts:
            served = host.served
            alive = served is not None and served.proc.poll() is None
            memory = _memory_kib(served.proc.pid) if alive and served else {}
            for part in ("rss_kib", "anon_kib", "file_kib"):
                row[f"{host.name}.{part}"] = memory.get(part)
            row[f"{host.name}.run"] = len(host.runs)
            out = git("for-each-ref", "--format=x", cwd=host.mirror, check=False)
            row[f"{host.name}.refs"] = len(out.splitlines())
        with contextlib.suppress(Exception):  # the server may be down for this sample
            row["server.refs"] = len(w.server.refs("canon"))
            row["intake.refs"] = len(w.server.refs("intake"))
        self.samples.append(row)

    def run(self) -> None:
        w = self.world
        for served in [w.serve(host, ready=False) for host in self.hosts]:
            served.wait_event("daemon.ready", 1, timeout=60)
        deadline = self.started + self.seconds
        next_fault = time.monotonic() + self.rng.uniform(*FAULT_GAP)
        next_sample = 0.0
        while time.monotonic() < deadline:
            if time.monotonic() >= next_sample:
                self.sample()
                next_sample = time.monotonic() + 5.0
            self.send_one()
            if time.monotonic() >= next_fault:
                self.fault()
                next_fault = time.monotonic() + self.rng.uniform(*FAULT_GAP)
        for host in self.hosts:
            if not host.alive():
                w.serve(host)
        w.quiet({s.sid for s in self.subs}, 300 + 2 * len(self.subs))
        self.sample()


def _memory_flat(soak: Soak) -> tuple[bool, str]:
    """Each daemon run that lived through at least half the soak: its resident memory at the
    end against its first sample after a warm-up quarter (≤ 1.5× + 16 MiB). Host A's one
    run must be among them."""
    out, ok = [], True
    for host in soak.hosts:
        key, run = f"{host.name}.rss_kib", f"{host.name}.run"
        last = soak.samples[-1]
        same = [s for s in soak.samples if s.get(run) == last.get(run) and s.get(key)]
        if len(same) < 4 or same[-1]["t"] - same[0]["t"] < soak.seconds / 2:
            # Host A is never killed: a soak that cannot judge its memory judged nothing.
            ok &= host is not soak.hosts[0]
            why = "restarted late" if host is not soak.hosts[0] else "too few samples read"
            out.append(f"{host.name}: {why}, not judged")
            continue
        warm = next(s for s in same if s["t"] - same[0]["t"] >= (same[-1]["t"] - same[0]["t"]) / 4)
        start, end = int(warm[key]), int(same[-1][key])
        flat = end <= start * 1.5 + 16 * 1024
        ok &= flat
        anon = f"{host.name}.anon_kib"
        part = (f" (anonymous {int(warm[anon]) // 1024} → {int(same[-1][anon]) // 1024})"
                if warm.get(anon) and same[-1].get(anon) else "")  # fmt: skip
        out.append(f"{host.name}: {start // 1024} → {end // 1024} MiB{part}")
    return ok, "; ".join(out)


@drill(
    name="soak-system",
    group="9",
    title="the team's workload for DURATION with random faults: host kills, server restarts, "
    "a full disk, a read-only mirror",
    gate="the team drill's invariants over everything sent; flat memory; refs bounded",
    alone="a soak: `make soak-system DURATION=…` (CI runs two minutes of it)",
)
def soak_system(ctx: Context) -> str:
    seconds = duration(os.environ.get("SOAK_DURATION", str(DEFAULT_SECONDS)))
    seed = int(os.environ.get("SOAK_SEED", "7"))
    soak = Soak(ctx, seconds, seed)
    try:
        return _soaked(ctx, soak, seconds, seed)
    finally:
        if soak.disk is not None and soak.disk.spool in soak.mounts.made:
            # The spool on its tmpfs is evidence: kept beside it before the unmount.
            subprocess.run(["cp", "-a", str(soak.disk.spool), f"{soak.disk.spool}.kept"],
                           capture_output=True, check=False)  # fmt: skip
        soak.mounts.undo_all()


def _soaked(ctx: Context, soak: Soak, seconds: float, seed: int) -> str:
    soak.run()
    w = soak.world
    stopped = w.stop_hosts()
    ctx.equal("every host stops cleanly on SIGTERM", dict.fromkeys(HOSTS, 0), stopped,
              [r.log for h in soak.hosts for r in h.runs])  # fmt: skip
    read_channels(w, soak.subs, {}, every=False)
    states = check_channels(ctx, w, soak.subs)
    moves = check_target(ctx, w, soak.runs, MARKER)
    landings = check_queue(ctx, w, [s.agent.candidate for s in soak.subs])
    check_intake(ctx, w, soak.subs)
    held = {s.sid for s in soak.subs if not s.expected.startswith("promoted")}
    check_server_refs(ctx, w, soak.tasks, soak.subs, held)
    check_authority_signed(ctx, w)
    flat, memory = _memory_flat(soak)
    ctx.expect("each daemon's memory stays flat", flat,
               expected="resident memory at the end ≤ 1.5× its sample after warm-up + 16 MiB",
               actual=memory, evidence=[w.root / "soak.json"])  # fmt: skip
    first, last = soak.samples[0], soak.samples[-1]
    per_sub = (last.get("server.refs", 0) - first.get("server.refs", 0)) / max(1, len(soak.subs))
    ctx.expect("refs grow with the submissions only", per_sub <= 3.0,
               expected="≤ 3 refs on the server per submission (claim, held/archived, ejection)",
               actual=f"{first.get('server.refs')} → {last.get('server.refs')} server refs, "
               f"{per_sub:.2f} per submission", evidence=[w.root / "soak.json"])  # fmt: skip
    w.meta.update({"seconds": seconds, "seed": seed, "submissions": len(soak.subs),
                   "faults": dict(soak.faults), "leftOut": soak.left_out, "states": dict(states),
                   "samples": soak.samples, "landings": landings, "targetMoves": moves})  # fmt: skip
    (w.root / "soak.json").write_text(json.dumps(w.meta, indent=2) + "\n")
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(states.items()))
    faults = ", ".join(f"{n} {k}" for k, n in sorted(soak.faults.items()))
    left = f"; left out: {'; '.join(soak.left_out)}" if soak.left_out else ""
    return (
        f"{len(soak.subs)} submissions in {seconds:.0f} s (seed {seed}); on the intake: "
        f"{kinds}; faults: {faults or 'none'}{left}; {landings} landings, {moves} target "
        f"moves; memory {memory}; refs {first.get('server.refs')} → {last.get('server.refs')}"
    )
