"""The merge-queue benchmark's world: a generated repository with disjoint areas, a stream
of candidates (some culprits), and a validation command whose duration and failures are
scripted (seeded culprits, seeded flaky runs, a duration scale).

Everything is real: the repository is a git repository, each candidate a commit landed by
the integrator's own engine under a contract, the promoter the integrator's own, every
validation a process run in a clean checkout of the head's tree. Only time is scaled: one
simulated second of a suite is `scale` wall seconds of `sleep`.
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pygit2

from integrator.records.canonical import Canonical
from integrator.records.claims import Claims, IssueRequest
from integrator.records.prepare import prepare

MARKER = "BROKEN"
LEASE = timedelta(days=30)  # the simulated clock of the slowest strategy runs for days

# The validation command (sh: its own start-up stays a few milliseconds). argv: log, seed,
# the full suite's simulated duration and its wall seconds, one scope's likewise, the flaky
# share of runs in ten-thousandths. It fails when the marker is in its part of the tree
# (its scope's area, or anywhere without a scope), or, for a seeded share of runs (by
# tree, scope and attempt: a rerun rolls again), for no reason at all.
SCRIPT = r"""#!/bin/sh
log="$1"; seed="$2"; full="$3"; full_wall="$4"; part="$5"; part_wall="$6"; flaky="$7"
scope="$INTEGRATOR_VALIDATION_SCOPE"
set -- $INTEGRATOR_VALIDATION_LANDINGS
landings=$#
where=.; duration="$full"; wall="$full_wall"
if [ -n "$scope" ]; then where="$scope"; duration="$part"; wall="$part_wall"; fi
roll=$(printf '%s:%s:%s:%s' "$seed" "$INTEGRATOR_VALIDATION_TREE" "$scope" \
    "$INTEGRATOR_VALIDATION_ATTEMPT" | cksum | cut -d' ' -f1)
sleep "$wall"
outcome=pass
if [ -n "$(find "$where" -name BROKEN -print 2>/dev/null | head -n 1)" ]; then
    outcome=fail
elif [ $((roll % 10000)) -lt "$flaky" ]; then
    outcome=flake
fi
echo "${scope:-*} $INTEGRATOR_VALIDATION_TREE $INTEGRATOR_VALIDATION_ATTEMPT $landings $duration $outcome" >> "$log"
[ "$outcome" = pass ]
"""


@dataclass(frozen=True)
class Shape:
    """The generated workload, the same for every strategy."""

    candidates: int = 200
    areas: int = 8
    culprit_share: float = 0.03
    flaky_share: float = 0.05
    suite_s: float = 600.0  # the full suite, simulated seconds ("10 minutes")
    scope_s: float = 600.0 * (0.1 + 0.9 / 8)  # one area's suite: a fixed tenth, its share
    interval_s: float = 4.0  # simulated seconds between two arrivals (on average)
    scale: float = 0.5 / 600.0  # wall seconds per simulated second
    seed: int = 23


@dataclass(frozen=True)
class Candidate:
    index: int
    task: str
    area: int
    culprit: bool
    arrival_s: float  # simulated seconds after the start


def plan_candidates(shape: Shape) -> list[Candidate]:
    """Which area each candidate writes, which are culprits, when each arrives (seeded)."""
    rng = random.Random(shape.seed)
    culprits = set(
        rng.sample(range(shape.candidates), max(1, round(shape.candidates * shape.culprit_share)))
    )
    out = []
    at = 0.0
    for i in range(shape.candidates):
        at += rng.expovariate(1.0 / shape.interval_s)
        out.append(Candidate(i, f"c{i:03d}", rng.randrange(shape.areas), i in culprits, at))
    return out


def area(k: int) -> str:
    return f"area{k}"


def scopes_toml(shape: Shape) -> str:
    """One `[[validation.scope]]` per area: the planner's partitions, one scope each."""
    return "".join(
        f'\n[[validation.scope]]\nname = "{area(k)}"\npaths = ["{area(k)}/**"]\n'
        for k in range(shape.areas)
    )


def command_toml(shape: Shape, script: Path, log: Path) -> str:
    argv = [
        "sh", str(script), str(log), str(shape.seed), f"{shape.suite_s:g}",
        f"{shape.suite_s * shape.scale:.4f}", f"{shape.scope_s:g}",
        f"{shape.scope_s * shape.scale:.4f}", str(round(shape.flaky_share * 10_000)),
    ]  # fmt: skip
    return f"command = {json.dumps(argv)}"


@dataclass
class World:
    """One strategy's repository, its contracts and candidate commits, ready to land."""

    repo: Path
    log: Path
    items: list[tuple[Candidate, bytes, str]]  # (candidate, contract JSON, commit)
    culprit_paths: list[str]


def build(work: Path, shape: Shape, validation: str, plan: list[Candidate]) -> World:
    """A fresh repository under `work` with the policy's `[validation]` body `validation`
    (its `{command}` filled in), the contracts issued and the candidates committed."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    script = work / "suite.sh"
    script.write_text(SCRIPT)
    log = work / "runs.log"
    log.write_text("")
    repo_path = work / "canon.git"
    repo = pygit2.init_repository(str(repo_path), bare=True)
    sig = pygit2.Signature("bench", "bench@example.invalid", 1767225600, 0)
    builder = pygit2.Index()
    for k in range(shape.areas):
        for j in range(4):
            blob = repo.create_blob(f"{area(k)} file {j}\n".encode())
            builder.add(
                pygit2.IndexEntry(f"{area(k)}/src/f{j}.txt", blob, pygit2.enums.FileMode.BLOB)
            )
    tree = builder.write_tree(repo)
    base = repo.create_commit("refs/heads/main", sig, sig, "base", tree, [])
    repo.config["core.logAllRefUpdates"] = "always"
    text = "version = 1\n\n[validation]\n" + validation.replace(
        "{command}", command_toml(shape, script, log)
    )
    prepare(repo_path, target="main", policy_text=text)
    items: list[tuple[Candidate, bytes, str]] = []
    culprit_paths = []
    with Canonical(repo_path) as canonical:
        claims = Claims(canonical)
        base_commit = canonical.commit(str(base))
        for c in plan:
            folder = f"{area(c.area)}/{c.task}"
            contract = claims.issue(
                IssueRequest(
                    task_id=c.task, paths=(f"{folder}/**",), base=str(base), lease=LEASE,
                    holder=c.task,
                ),
                force_shared=True,  # disjoint by construction
            )  # fmt: skip
            index = pygit2.Index()
            index.read_tree(base_commit.tree)
            files = {f"{folder}/change.txt": f"{c.task}\n"}
            if c.culprit:
                files[f"{folder}/{MARKER}"] = "this candidate breaks its area's suite\n"
                culprit_paths.append(f"{folder}/{MARKER}")
            for path, body in files.items():
                blob = canonical.repo.create_blob(body.encode())
                index.add(pygit2.IndexEntry(path, blob, pygit2.enums.FileMode.BLOB))
            written = index.write_tree(canonical.repo)
            oid = canonical.repo.create_commit(
                None, sig, sig, f"work on {c.task}", written, [base_commit.id]
            )
            items.append((c, contract.to_json().encode(), str(oid)))
    return World(repo_path, log, items, culprit_paths)
