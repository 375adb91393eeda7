"""The team world: a git server on loopback, integrator hosts, a coordinator, agents.

Everything runs as the team would run it, as processes: a `git daemon` on 127.0.0.1
serving the canonical bare repository and an intake, a coordinator's mirror
(`integrator init --remote`), hosts that each keep their own mirror and spool and run
`integrator serve --intake … --remote`, and agents in their own clones pushing through
`integrator submit --intake`. Every command, its exit status and output go to the world's
`commands.log`; each host's JSON log to `logs/`. When the drill ends the world writes the
server's refs, the queue and the target's history and reflog beside it (`snapshot`).

This world is kept out of the enforcement-stage gates (`team.json`, not `world.json`):
in remote mode the candidate commits never reach the server, which those gates read.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drills.commands import CommandLog
from drills.context import Context
from drills.procs import DrillError, Served, wait_until
from drills.records import Contract, Result
from drills.repo import MAIN, QUEUE, git
from drills.server import GitServer

PY = sys.executable
POLL = "0.5"  # seconds between a host's looks at the intake: three hosts share two cores


@dataclass
class Host:
    """One integrator host: its mirror, its spool, and the `serve` runs it had."""

    name: str
    mirror: Path
    spool: Path
    runs: list[Served] = field(default_factory=list)

    @property
    def served(self) -> Served | None:
        return self.runs[-1] if self.runs else None

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        return [e for run in self.runs for e in run.events(name)]

    def alive(self) -> bool:
        return self.served is not None and self.served.proc.poll() is None


@dataclass(frozen=True)
class Agent:
    """An agent's clone and the candidate it committed there."""

    name: str
    clone: Path
    contract: Contract
    candidate: str


class TeamWorld(CommandLog):
    """The server, the coordinator's mirror, the hosts, and the records of every step."""

    def __init__(self, ctx: Context, files: Mapping[str, str], policy: str) -> None:
        self.ctx = ctx
        ctx.worlds.append(self)
        self.root = ctx.dir / "team"
        self.logs = self.root / "logs"
        self.contracts = self.root / "contracts"
        self.agents_dir = self.root / "agents"
        for folder in (self.logs, self.contracts, self.agents_dir):
            folder.mkdir(parents=True, exist_ok=True)
        self.commands = self.root / "commands.log"
        self._seq = 0
        self.server = GitServer(self.root / "srv", ctx.procs)
        self.canon = self.server.bare("canon")
        self.intake_repo = self.server.bare("intake")
        self.server.start()
        self.hosts: list[Host] = []
        self.meta: dict[str, Any] = {"schema": "drills.team.v1", "drill": ctx.name}
        seed = self.root / "seed"
        git("init", "-q", "-b", "main", str(seed), cwd=self.root)
        for path, text in files.items():
            (seed / path).parent.mkdir(parents=True, exist_ok=True)
            (seed / path).write_text(text)
        git("add", "-A", cwd=seed)
        git("commit", "-qm", "base", cwd=seed)
        git("push", "-q", self.url, "HEAD:refs/heads/main", cwd=seed)
        policy_file = self.root / "policy.toml"
        policy_file.write_text(policy)
        self.coordinator = self.root / "coordinator.git"
        # One verdict key for the team's hosts: each signs what it publishes on the intake,
        # the coordinator trusts it, and every agent's key file carries it.
        # One authority key, too: every claim, policy and control record is signed, and
        # every mirror believes no other (docs/security.md, "Authority keys").
        self.verdict_key = self.root / "verdict.key"
        self.authority_key = self.root / "authority.key"
        self.cli("init", "--repo", str(self.coordinator), "--remote", self.url,
                 "--policy", str(policy_file), "--verdict-key", str(self.verdict_key),
                 "--authority-key", str(self.authority_key),
                 label="init-coordinator")  # fmt: skip
        initial = self.server_ref(QUEUE)
        assert initial is not None
        self.initial = initial

    # -- addresses and records ---------------------------------------------------------------

    @property
    def url(self) -> str:
        return self.server.url("canon")

    @property
    def intake(self) -> str:
        return self.server.url("intake")

    def server_ref(self, name: str) -> str | None:
        out = git("rev-parse", "--verify", "-q", name, cwd=self.canon, check=False)
        return out.strip() or None

    def save_meta(self) -> None:
        (self.root / "team.json").write_text(json.dumps(self.meta, indent=2) + "\n")

    def note(self, text: str) -> None:
        """A line in commands.log between the commands (a fault injected, a phase)."""
        with self.commands.open("a", encoding="utf-8") as fh:
            fh.write(f"## {time.strftime('%H:%M:%S')} {text}\n\n")

    def evidence(self, *extra: Path | str) -> list[str]:
        return [str(p) for p in extra] + [
            str(self.root / "server-refs.txt"),
            str(self.root / "target.txt"),
            str(self.commands),
        ]

    def snapshot(self) -> None:
        """The server's refs (canonical and intake), the queue, the target and its reflog."""
        lines = [f"{oid} {ref}" for ref, oid in sorted(self.server.refs("canon").items())]
        lines += ["", "# intake"]
        lines += [f"{oid} {ref}" for ref, oid in sorted(self.server.refs("intake").items())]
        (self.root / "server-refs.txt").write_text("\n".join(lines) + "\n")
        queue = git(
            "log", "--first-parent", "--format=%H %T %s%n%(trailers:key=Integrator-Candidate)",
            f"{self.initial}..{QUEUE}", cwd=self.canon, check=False,
        )  # fmt: skip
        main = git("log", "--first-parent", "--format=%H %T %s", MAIN, cwd=self.canon, check=False)
        reflog = git("reflog", "show", "--format=%H %T %gs", MAIN, cwd=self.canon, check=False)
        (self.root / "target.txt").write_text(
            f"# queue\n{queue}\n\n# main (first parent)\n{main}\n\n# main's reflog\n{reflog}\n"
        )
        self.save_meta()

    # -- commands ----------------------------------------------------------------------------

    def cli(
        self,
        *args: str,
        expect: int | Collection[int] | None = 0,
        env: Mapping[str, str] | None = None,
        label: str | None = None,
        timeout: float = 120,
    ) -> Result:
        return self.run(
            [PY, "-m", "integrator", *args], expect=expect, env=env,
            label=self._seqname(label or args[0]), timeout=timeout,
        )  # fmt: skip

    # -- the coordinator ---------------------------------------------------------------------

    def issue(self, task: str, paths: Sequence[str], *, lease: str = "2h") -> Contract:
        """`contract issue` on the coordinator's mirror, based on the target; the attempt key
        lands beside the contract (`FILE.key`), where `integrator submit` finds it."""
        out = self.contracts / f"{task}.json"
        args = ["contract", "issue", "--repo", str(self.coordinator), "--task", task,
                "--base", "main", "--lease", lease, "--holder", f"agent-{task}", "-o", str(out)]  # fmt: skip
        args += [f"--path={p}" for p in paths]
        self.cli(*args, label=f"issue-{task}")
        return Contract(out, json.loads(out.read_text()))

    def reclaim(self, task: str, base: str) -> Contract:
        out = self.contracts / f"{task}-reclaimed.json"
        self.cli("contract", "reclaim", "--repo", str(self.coordinator), "--task", task,
                 "--base", base, "--lease", "2h", "-o", str(out), label=f"reclaim-{task}")  # fmt: skip
        return Contract(out, json.loads(out.read_text()))

    # -- the hosts ---------------------------------------------------------------------------

    def add_host(self, name: str) -> Host:
        mirror = self.root / f"{name}.git"
        self.cli("init", "--repo", str(mirror), "--remote", self.url, "--verdict-key",
                 str(self.verdict_key), "--authority-key", str(self.authority_key),
                 label=f"init-{name}")  # fmt: skip
        host = Host(name, mirror, self.root / f"spool-{name}")
        self.hosts.append(host)
        return host

    def serve(self, host: Host, *, ready: bool = True, timeout: float = 60) -> Served:
        """Start (or restart) `integrator serve --intake` on the host, and with `ready` wait
        until it says so; its log is `logs/<host>-N.log`."""
        log = self.logs / f"{host.name}-{len(host.runs) + 1}.log"
        argv = [PY, "-m", "integrator", "serve", "--repo", str(host.mirror), "--spool",
                str(host.spool), "--intake", self.intake, "--poll", POLL,
                "--log-format", "json"]  # fmt: skip
        served = Served(self.ctx.spawn(argv, log=log), log)
        host.runs.append(served)
        self.note(f"{host.name}: serve started (pid {served.proc.pid}, log {log.name})")
        if ready:
            served.wait_event("daemon.ready", 1, timeout=timeout)
        return served

    def kill(self, host: Host) -> None:
        """SIGKILL the host's daemon (by its PID): no batch finished, nothing filed."""
        served = host.served
        if served is None or served.proc.poll() is not None:
            raise DrillError(f"{host.name} was not running when the drill meant to kill it")
        served.proc.send_signal(signal.SIGKILL)
        served.proc.wait(timeout=30)
        self.note(f"{host.name}: SIGKILL (pid {served.proc.pid})")

    def stop_hosts(self) -> dict[str, int]:
        """SIGTERM every running daemon (each finishes its batch); their exit statuses."""
        codes = {}
        for host in self.hosts:
            if host.alive():
                assert host.served is not None
                codes[host.name] = host.served.stop(timeout=60)
        self.note(f"hosts stopped: {codes}")
        return codes

    # -- agents ------------------------------------------------------------------------------

    def agent(self, name: str, contract: Contract, files: Mapping[str, str]) -> Agent:
        """A clone of the canonical repository on the contract's base, with one commit."""
        clone = self.agents_dir / name
        git("clone", "-q", self.url, str(clone), cwd=self.agents_dir)
        git("checkout", "-q", "--detach", str(contract.doc["baseCommit"]), cwd=clone)
        for path, text in files.items():
            (clone / path).parent.mkdir(parents=True, exist_ok=True)
            (clone / path).write_text(text)
        git("add", "-A", cwd=clone)
        git("commit", "-qm", f"{name}: work on {contract.task}", cwd=clone)
        return Agent(name, clone, contract, git("rev-parse", "HEAD", cwd=clone))

    def submit(self, agent: Agent, *, expect: int | Collection[int] = 0) -> Result:
        """`integrator submit --intake` from the agent's clone (signed with CONTRACT.key)."""
        return self.cli(
            "submit", "--intake", self.intake, "--contract", str(agent.contract.path),
            "--candidate", "HEAD", "--repo", str(agent.clone), "--json",
            expect=expect, label=f"submit-{agent.name}",
        )  # fmt: skip

    # -- waiting -----------------------------------------------------------------------------

    def quiet(self, sids: Collection[str], timeout: float) -> None:
        """The settle barrier of the team: every submission has a verdict on the intake
        and no submit ref is left there; every host's spool has nothing in new/ or work/;
        the target is the queue head and no validation is in progress on the server; every
        running host's mirror holds no copy of a submission ref (it has polled since the
        last answer); and all of that held for two looks a second apart (reflecting
        ejections takes a poll)."""
        last: list[str | None] = [None]

        def state() -> str | None:
            intake = self.server.refs("intake")
            if any(ref.startswith("refs/integrator/submit/") for ref in intake):
                return None
            published = {ref.rsplit("/", 1)[-1] for ref in intake}
            if not set(sids) <= published:
                return None
            if any(_busy(host) for host in self.hosts):
                return None
            canon = self.server.refs("canon")
            if canon.get(MAIN) != canon.get(QUEUE):
                return None
            running = [
                r
                for r in canon
                if r.startswith("refs/integrator/validations/") and "/cache/" not in r
            ]  # the result cache stays; runs must not
            if running:
                return None
            return json.dumps([sorted(canon.items()), sorted(intake.items())])

        def settled() -> bool:
            now = state()
            same = now is not None and now == last[0]
            last[0] = now
            if not same:
                time.sleep(1.0)
            return same

        logs = [run.log for host in self.hosts for run in host.runs]
        wait_until(settled, timeout, "the team to settle (verdicts out, target = queue)",
                   [*logs, self.root / "srv"])  # fmt: skip


def _busy(host: Host) -> bool:
    """Whether a host has work in hand (its spool's new/ or work/), or — running — has not
    polled since the intake's last answer: its mirror's copies of the intake's submission
    refs are pruned at its next poll, up to its backoff away."""
    if any(any((host.spool / folder).glob("*")) for folder in ("new", "work")):
        return True
    mirrored = git("for-each-ref", "--format=%(refname)", "refs/integrator/intake/submit/",
                   cwd=host.mirror)  # fmt: skip
    return host.alive() and bool(mirrored)
