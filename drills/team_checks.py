"""What the team drill checks once the team has settled, read from the records only.

Every channel is asked about every submission as its users ask: `status --intake` (with
and without `--until promoted`) from the agent's own clone, `status --spool` on each host
whose spool filed it, `history --json` of each host, and MCP's `read_verdict` for the
agent that submitted through MCP. Each answer is reduced to one *final state* — the
landing's state (`promoted`, `ejected`, `reverted`, …) when it landed, else the decision —
and its exit code. The git records are read with plain `git` on the server's own
repositories: the target's reflog against what the validation script itself saw
(`runs.log`), the queue's trailers, every ref on the canonical repository and the intake.
"""

from __future__ import annotations

import itertools
import json
import subprocess
from collections import Counter
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drills.context import Context
from drills.repo import MAIN, QUEUE, ZERO, environment, git
from drills.team import Agent, TeamWorld

DECIDED = ("accepted", "fenced", "review", "rejected", "archived")


@dataclass
class Sub:
    """One submission of the drill: who sent it, how, and the final state it must reach."""

    label: str
    agent: Agent
    sid: str
    via: str  # "cli" or "mcp"
    expected: str  # e.g. "promoted/0", "ejected/1", "FENCED/1"
    # A scenario checked on its own (its own row of checks, every host's spool read even in
    # quick runs): what the check says, e.g. "an approval on one host's page is told everywhere".
    apart: str | None = None
    seen: dict[str, str] = field(default_factory=dict)  # channel → "state/exit"
    docs: dict[str, Any] = field(default_factory=dict)

    @property
    def task(self) -> str:
        return self.agent.contract.task


def final_state(doc: Mapping[str, Any], code: int | None) -> str:
    """A channel's answer as one final state: the landing's state when there is one, else
    the decision (REJECTED for a rejection), with the exit code when the channel has one."""
    landing = doc.get("landing")
    verdict = doc.get("verdict")
    if isinstance(landing, dict) and landing.get("state"):
        state = str(landing["state"])
    elif isinstance(verdict, dict):
        state = str(verdict.get("decision", "?"))
    elif isinstance(doc.get("decision"), str):
        state = str(doc["decision"])
    elif "reason" in doc:
        state = "REJECTED"
    else:
        state = "none"
    return state if code is None else f"{state}/{code}"


def _status(world: TeamWorld, sub: Sub, *args: str) -> tuple[str, Any]:
    result = world.cli("status", *args, "--submission", sub.sid, "--json", expect=None,
                       label=f"status-{sub.label}")  # fmt: skip
    try:
        doc = json.loads(result.out) if result.out.strip() else {}
    except ValueError:
        doc = {"unreadable": result.out[-200:]}
    return final_state(doc, result.code), doc


def read_channels(
    world: TeamWorld, subs: list[Sub], mcp: Mapping[str, tuple[int, Any]], *, every: bool
) -> None:
    """Ask every channel about every submission (three at a time: each read is a process
    and most of them a fetch from the server). With `every` (full runs) also
    `status --intake --until promoted`, and `status --spool` on every host that filed the
    submission, not only on the one that decided it first."""
    jobs: list[tuple[Sub, str, list[str]]] = []
    for sub in subs:
        intake = ["--intake", world.intake, "--task", sub.task, "--repo", str(sub.agent.clone)]
        jobs.append((sub, "intake", intake))
        if every:
            jobs.append((sub, "intake --until promoted", [*intake, "--until", "promoted"]))
        filed = [h for h in world.hosts if _filed(h.spool, sub.sid)]
        deciders = [h for h in filed if not _filed(h.spool, sub.sid, recovered=True)]
        for host in filed if every or sub.apart else (deciders or filed)[:1]:
            jobs.append((sub, f"spool {host.name}", ["--spool", str(host.spool)]))
    with ThreadPoolExecutor(max_workers=3) as pool:
        answers = list(pool.map(lambda job: _status(world, job[0], *job[2]), jobs))
    for (sub, channel, _), (state, doc) in zip(jobs, answers, strict=True):
        sub.seen[channel] = state
        sub.docs[channel] = doc
    for host in world.hosts:
        result = world.cli("history", "--spool", str(host.spool), "--json", expect=None,
                           label=f"history-{host.name}")  # fmt: skip
        rows = json.loads(result.out) if result.code == 0 and result.out.strip() else []
        for sub in subs:
            mine = [r for r in rows if r.get("submission") == sub.sid]
            newest = _history_state(mine)
            if newest is not None:
                sub.seen[f"history {host.name}"] = newest
                sub.docs[f"history {host.name}"] = mine
    for sub in subs:
        if sub.sid in mcp:
            code, doc = mcp[sub.sid]
            sub.seen["mcp read_verdict"] = final_state(doc, code)
            sub.docs["mcp read_verdict"] = doc


def _filed(spool: Path, sid: str, *, recovered: bool = False) -> bool:
    """Whether the spool filed `sid` (with `recovered`: as a landing another host made)."""
    for folder in DECIDED:
        path = spool / folder / sid
        if path.is_dir():
            if not recovered:
                return True
            try:
                return bool(json.loads((path / "verdict.json").read_text()).get("recovered"))
            except (OSError, ValueError):
                return False
    return False


def _history_state(rows: list[dict[str, Any]]) -> str | None:
    """A host registry's newest word on a submission: its decision row, or a later review
    row that decided it again (an approval; an ejection's hold), with where the landing is
    now. A rejection's row decides nothing new."""
    state = None
    for row in rows:
        if row.get("kind") not in ("decision", "review"):
            continue
        if row.get("action") == "eject":
            state = "ejected"
        elif row.get("landing") or row.get("decision"):
            state = final_state(row, None)
    return state


def check_channels(ctx: Context, world: TeamWorld, subs: list[Sub]) -> Counter[str]:
    """One final state per submission, the same on every channel, the one the scenario
    leads to (a submission checked apart gets its own check); the states by kind (as the
    intake reports them)."""
    (world.root / "channels.json").write_text(
        json.dumps({s.sid: {"label": s.label, "expected": s.expected, "seen": s.seen,
                            "docs": s.docs} for s in subs}, indent=2, default=str) + "\n"
    )  # fmt: skip
    where = [world.root / "channels.json", world.commands]
    common = [s for s in subs if s.apart is None]
    disagree = [f"{s.label} {s.sid}: {s.seen}" for s in common if not _agree(s)]
    ctx.expect(
        "every channel reports one and the same final state for each submission",
        not disagree,
        expected=f"{len(common)} submissions, each one state and one exit code on every channel",
        actual="; ".join(disagree) or f"{len(common)} agree",
        evidence=where,
    )
    wrong = [f"{s.label}: expected {s.expected}, the intake says {s.seen.get('intake')}"
             for s in common if s.seen.get("intake") != s.expected]  # fmt: skip
    ctx.expect(
        "each submission reached the state its scenario leads to",
        not wrong,
        expected="; ".join(f"{s.label} {s.expected}" for s in common),
        actual="; ".join(wrong) or "as expected",
        evidence=where,
    )
    for sub in subs:
        if sub.apart is not None:
            state = sub.expected.split("/")[0]  # what a channel without exit codes says
            off = {ch: st for ch, st in sub.seen.items() if st not in (sub.expected, state)}
            ctx.expect(
                sub.apart,
                not off and _agree(sub),
                expected=f"{sub.label} {sub.sid}: {sub.expected} on every channel",
                actual=f"differs on {off}; all: {sub.seen}" if off else f"{sub.seen}",
                evidence=where,
            )
    return Counter(s.seen.get("intake", "none") for s in subs)


def _agree(sub: Sub) -> bool:
    states = {s.split("/")[0] for s in sub.seen.values()}
    codes = {s.split("/")[1] for s in sub.seen.values() if "/" in s}
    return len(states) == 1 and len(codes) <= 1


def _passed_trees(runs: Path) -> tuple[set[str], set[str]]:
    lines = runs.read_text().split("\n") if runs.exists() else []
    pairs = [line.split() for line in lines if len(line.split()) == 2]
    return {t for t, r in pairs if r == "pass"}, {t for t, r in pairs if r == "fail"}


def check_target(ctx: Context, world: TeamWorld, runs: Path, marker: str) -> int:
    """Every value the target took on the server (its reflog, after the seed) is a tree the
    validation script itself passed (runs.log), that a promotion record names with a
    passing final validation result, that holds no marker, is on the queue's first-parent
    chain and descends from the value before; returns how many moves there were."""
    log = world.canon / "logs" / MAIN
    moves = [line.split()[1] for line in log.read_text().splitlines()] if log.exists() else []
    passed, failed = _passed_trees(runs)
    recorded = _promoted_passing(world.canon)
    problems = []
    for before, after in itertools.pairwise(moves):
        if not _is_ancestor(world.canon, before, after):
            problems.append(f"{after[:12]} does not descend from {before[:12]}")
    queue_chain = set(git("rev-list", "--first-parent", QUEUE, cwd=world.canon).split())
    for oid in moves[1:]:
        tree = git("rev-parse", f"{oid}^{{tree}}", cwd=world.canon)
        if tree not in passed:
            problems.append(
                f"target took {oid[:12]} (tree {tree[:12]}), which the script never passed"
            )
        if oid not in recorded:
            problems.append(f"no promotion record with a passing result names {oid[:12]}")
        listing = git("ls-tree", "-r", "--name-only", oid, cwd=world.canon).splitlines()
        if marker in {p.rsplit("/", 1)[-1] for p in listing}:
            problems.append(f"target took {oid[:12]}, which holds the culprit's {marker}")
        if oid not in queue_chain:  # a rebuild only replaces landings past the target
            problems.append(f"target value {oid[:12]} is not on the queue's first-parent chain")
    ctx.expect(
        "the target only ever pointed at validated trees",
        not problems and len(moves) > 1 and bool(failed),
        expected="every target value after the seed passed the validation script (runs.log) "
        "and its promotion record's result; none holds the marker; each moves forward along "
        "the queue; the culprit's head failed",
        actual="; ".join(problems)
        or f"{len(moves) - 1} moves, all passed ({len(passed)} passing, {len(failed)} failing runs)",
        evidence=[log, runs, world.root / "target.txt"],
    )
    return len(moves) - 1


def _promoted_passing(repo: Path) -> set[str]:
    """Heads the promotion records say the target was moved to, each resting on a final
    passing validation result of that very head (docs/validation.md, "Records in git")."""
    out: set[str] = set()
    for commit in git("rev-list", "refs/integrator/promotion/main", cwd=repo).split():
        record = _json_at(repo, commit, "promotion.json")
        if record is None or record.get("action") != "promote":
            continue
        for result_commit in record.get("validations", []):
            result = _json_at(repo, str(result_commit), "result.json") or {}
            if (result.get("head"), result.get("status"), result.get("final")) == (
                record.get("after"), "pass", True,
            ):  # fmt: skip
                out.add(str(record["after"]))
    return out


def _json_at(repo: Path, commit: str, name: str) -> dict[str, Any] | None:
    text = git("show", f"{commit}:{name}", cwd=repo, check=False)
    try:
        doc = json.loads(text) if text else None
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _is_ancestor(repo: Path, older: str, newer: str) -> bool:
    proc = subprocess.run(
        ["git", "merge-base", "--is-ancestor", older, newer], cwd=repo, env=environment(),
        capture_output=True, check=False,
    )  # fmt: skip
    return proc.returncode == 0


def check_queue(ctx: Context, world: TeamWorld, candidates: Iterable[str]) -> int:
    """No landing twice on the queue (by candidate and by landing name), nothing on it that
    no one submitted; returns how many landings the queue holds."""
    out = git(
        "log", "--first-parent", "--reverse",
        "--format=%H%x09%(trailers:key=Integrator-Candidate,valueonly,separator=)%x09"
        "%(trailers:key=Integrator-Landing,valueonly,separator=)%x09"
        "%(trailers:key=Integrator-Reverts,valueonly,separator=)",
        f"{world.initial}..{QUEUE}", cwd=world.canon,
    )  # fmt: skip
    rows = [line.split("\t") for line in out.splitlines() if line.strip()]
    known = set(candidates)
    by_candidate = Counter(r[1] for r in rows)
    by_landing = Counter(r[2] or r[0] for r in rows)
    problems = [f"candidate {c[:12]} landed {n} times" for c, n in by_candidate.items() if n > 1]
    problems += [
        f"landing {x[:12]} is on the queue {n} times" for x, n in by_landing.items() if n > 1
    ]
    problems += [f"{r[0][:12]} landed candidate {r[1][:12]}, which no agent submitted"
                 for r in rows if r[1] not in known and not r[3]]  # fmt: skip
    ctx.expect(
        "nothing landed twice, nothing landed that no one sent",
        not problems and bool(rows),
        expected="each candidate and each landing at most once on the queue's first-parent chain",
        actual="; ".join(problems) or f"{len(rows)} landings, each once",
        evidence=[world.root / "target.txt"],
    )
    return len(rows)


def check_intake(ctx: Context, world: TeamWorld, subs: list[Sub]) -> None:
    """Exactly one verdict ref per submission, under its own task, created once; no submit
    ref left; nothing else on the intake."""
    refs = world.server.refs("intake")
    expected = {f"refs/integrator/verdicts/{s.task}/{s.sid}" for s in subs}
    problems = [f"stray {ref}" for ref in sorted(set(refs) - expected)]
    problems += [f"no verdict at {ref}" for ref in sorted(expected - set(refs))]
    for ref in sorted(expected & set(refs)):
        log = world.intake_repo / "logs" / ref
        lines = log.read_text().splitlines() if log.exists() else []
        created = sum(1 for line in lines if line.split(" ", 1)[0] == ZERO)
        if created != 1:
            problems.append(f"{ref} was created {created} times")
        signed = git("cat-file", "-t", f"{ref}:verdict.sig", cwd=world.intake_repo, check=False)
        if signed.strip() != "blob":
            problems.append(f"{ref} is not signed (no verdict.sig)")
    ctx.expect(
        "every submission got exactly one verdict on the intake, and no submit ref is left",
        not problems,
        expected=f"{len(expected)} verdict refs, one per submission, each created once and "
        "signed with the team's verdict key; nothing else",
        actual="; ".join(problems) or f"{len(expected)} verdicts, no submit refs",
        evidence=[world.root / "server-refs.txt"],
    )


AUTHORITY_FAMILIES = ("claims/", "claims-index", "policy", "pause", "queue-control/")


def check_authority_signed(ctx: Context, world: TeamWorld) -> None:
    """Every claim, claims index, policy, pause and queue-control ref on the server ends in
    a commit the team's authority key signed for that very ref."""
    from integrator.documents.authority_key import parse_authority_key, signature_problem
    from integrator.plumbing.git import open_repo, repo_identity

    public = parse_authority_key(world.authority_key.read_bytes()).public
    identity = repo_identity(open_repo(world.server.root / "canon.git"), MAIN) or ""
    problems, seen = [], 0
    for ref, oid in sorted(world.server.refs("canon").items()):
        if not ref.removeprefix("refs/integrator/").startswith(AUTHORITY_FAMILIES):
            continue
        seen += 1
        raw = subprocess.run(["git", "cat-file", "commit", oid], cwd=world.server.root / "canon.git",
                             capture_output=True, check=True).stdout  # the bytes signed  # fmt: skip
        problem = signature_problem(frozenset({public}), raw, ref, identity)
        if problem is not None:
            problems.append(f"{ref}: {problem}")
    ctx.expect(
        "every claim, policy and control record on the server is signed",
        not problems and seen > 0,
        expected="each such ref's commit signed by the team's authority key for that ref",
        actual="; ".join(problems) or f"{seen} records, each signed",
        evidence=[world.root / "server-refs.txt"],
    )


def check_server_refs(
    ctx: Context, world: TeamWorld, tasks: Iterable[str], subs: list[Sub], held: Iterable[str]
) -> None:
    """Every ref on the canonical repository is one the run explains: the target, the
    queue, the policy, a claim of a task the coordinator issued (or a revert's), the claims
    index, the promotion record, an ejection, a host's probe, the held and archived records
    of the submissions that were held; no validation left running, nothing else."""
    tasks, sids = set(tasks), {s.sid for s in subs}
    held = set(held)
    stray = []
    for ref in sorted(world.server.refs("canon")):
        name = ref.removeprefix("refs/integrator/")
        family, _, rest = name.partition("/")
        ok = (
            ref in (MAIN, QUEUE, "refs/integrator/policy", "refs/integrator/claims-index",
                    "refs/integrator/promotion/main")
            or (family == "claims" and (rest in tasks or rest.startswith("revert-")))
            or (family == "ejected" and rest.startswith("main/"))
            or family == "probe"  # per machine (its hostname): the drill's hosts share one
            or (family == "held" and rest in held)
            or (family == "archived" and rest in sids)
            or (family == "validations" and rest.startswith("main/cache/"))  # result cache
        )  # fmt: skip
        if not ok:
            stray.append(ref)
    for host in world.hosts:
        local = git("for-each-ref", "--format=%(refname)", "refs/integrator/quarantine/",
                    "refs/integrator/intake/submit/", cwd=host.mirror)  # fmt: skip
        stray += [f"{host.name}: {r}" for r in local.splitlines() if r]
    ctx.expect(
        "no ref left behind on the server or a host's mirror",
        not stray,
        expected="only the target, queue, policy, claims, index, promotion, ejection, probe, "
        "held and archived records the run explains; no quarantine or intake refs on a mirror",
        actual="; ".join(stray) or "none stray",
        evidence=[world.root / "server-refs.txt"],
    )
