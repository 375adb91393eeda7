"""`python -m bench.replay --source REPO`: a real history landed through the gate, every
commit claimed path by path, with the default limits.

For each commit of the source's first-parent history in the range asked for (oldest
first), the coordinator issues a contract naming every path the commit changes against its
first parent — both ends of every rename — each as an anchored literal glob (`/path`,
wildcards escaped), and the resources those changes touch; then the commit is integrated:
the gate recomputes the diff, proves every path inside the contract and lands it on the
queue. The queue starts at the first replayed commit's parent and each landing's tree is
the next commit's base's, so every commit lands, or the replay says why it did not.

The canonical repository borrows the source's objects (`objects/info/alternates`): nothing is
copied. Run against git's own history (`git clone --bare https://github.com/git/git`):

    .venv/bin/python -m bench.replay --source git.git --around 0cc13007e5d5 --window 50
    .venv/bin/python -m bench.replay --source git.git --largest 40
    .venv/bin/python -m bench.replay --source git.git --all        # every first-parent commit

`--largest N` replays the N first-parent commits that change the most paths, each on its
own (the queue is reset to its parent), so the widest claims are measured without the
history between them.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path

import pygit2

from integrator.documents.verdict import Decision
from integrator.fence.diff import recompute
from integrator.fence.resources import touched_resources
from integrator.landing.engine import Integrator
from integrator.limits import DEFAULT_MAX_PATCH_BYTES, MAX_GLOBS
from integrator.plumbing import git
from integrator.records.canonical import Canonical
from integrator.records.claims import Claims, IssueRequest
from integrator.records.prepare import prepare
from integrator.rollout.revert import literal_glob

TASK = "replay"


@dataclass
class Outcome:
    commit: str
    paths: int
    resources: int
    contract_bytes: int
    decision: str
    codes: list[str]
    issue_ms: float
    integrate_ms: float
    patch_bytes: int
    why: str = ""


def _git(source: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=source, capture_output=True, check=True, env=git.git_env()
    )
    return done.stdout.decode()


def _commits(source: Path, args: argparse.Namespace) -> list[str]:
    """The first-parent commits to replay, oldest first."""
    first_parent = _git(source, "rev-list", "--first-parent", "--reverse", args.head).split()
    if args.around:
        at = first_parent.index(_git(source, "rev-parse", args.around).strip())
        return first_parent[max(1, at - args.window) : at + args.window + 1]
    if args.count:
        return first_parent[-args.count :]
    return first_parent[1:]  # the root commit has no parent to claim against


def _largest(source: Path, head: str, n: int) -> list[str]:
    """The n first-parent commits of `head` changing the most paths (against parent 1)."""
    out = _git(
        source, "log", "--first-parent", "-m", "--no-renames", "--format=@%H", "--shortstat", head
    )
    sizes: list[tuple[int, str]] = []
    commit = ""
    for line in out.splitlines():
        if line.startswith("@"):
            commit = line[1:]
        elif "changed" in line and commit:
            sizes.append((int(line.split()[0]), commit))
            commit = ""
    return [c for _, c in sorted(sizes, reverse=True)[:n]]


def canonical_for(source: Path, work: Path, start: str) -> Path:
    """A bare canonical repository at `work` borrowing `source`'s objects, its target at
    `start`, prepared with the default policy."""
    if work.exists():
        shutil.rmtree(work)
    subprocess.run(["git", "init", "-q", "--bare", str(work)], check=True, env=git.git_env())
    objects = Path(_git(source, "rev-parse", "--path-format=absolute", "--git-path", "objects"))
    (work / "objects" / "info" / "alternates").write_text(str(objects).strip() + "\n")
    subprocess.run(
        ["git", "update-ref", "refs/heads/main", start], cwd=work, check=True, env=git.git_env()
    )
    prepare(work, target="main")
    return work


def rebased(canonical: Canonical, commit: str) -> tuple[str, str]:
    """(the queue head, a commit on it with `commit`'s tree): what an agent submits after
    rebasing onto the queue. The queue head's tree is `commit`'s first parent's, so the
    candidate changes what `commit` changed against its first parent (a merge: its topic)."""
    head = canonical.ref(canonical.queue_ref)
    assert head is not None
    original = canonical.commit(commit)
    sig = pygit2.Signature("replay", "replay@example.invalid", original.commit_time, 0)
    message = f"replay {commit}\n"
    oid = canonical.repo.create_commit(
        None, sig, sig, message, original.tree_id, [pygit2.Oid(hex=head)]
    )
    return head, str(oid)


def replay_one(canonical: Canonical, engine: Integrator, commit: str) -> Outcome:
    """Claim `commit`'s changes path by path on the queue head, and integrate it there."""
    base, candidate = rebased(canonical, commit)
    policy = canonical.policy_state().policy
    diff = recompute(
        canonical.repo,
        canonical.commit(base).tree,
        canonical.commit(candidate).tree,
        rename_limit=policy.integration.rename_limit,
    )
    paths = tuple(dict.fromkeys(p for change in diff.changes for p in change.paths))
    resources = tuple(
        t.resource for t in touched_resources(policy, diff.changes, diff.reconfigured)
    )
    started = time.perf_counter()
    try:
        contract = Claims(canonical).issue(
            IssueRequest(
                task_id=TASK,
                paths=tuple(literal_glob(p) for p in paths) or ("/.replay-empty",),
                resources=resources,
                base=base,
                lease=timedelta(hours=1),
                holder="replay",
                max_patch_bytes=max(DEFAULT_MAX_PATCH_BYTES, diff.patch_bytes),
            )
        )
    except Exception as err:
        ms = (time.perf_counter() - started) * 1000
        return Outcome(commit, len(paths), len(resources), 0, "NOT_ISSUED", [], ms, 0.0,
                       diff.patch_bytes, f"{type(err).__name__}: {err}"[:500])  # fmt: skip
    issued = time.perf_counter()
    data = contract.to_json().encode()
    verdict = engine.integrate(data, candidate)
    done = time.perf_counter()
    why = ""
    if verdict.decision is not Decision.ACCEPTED:
        why = verdict.violations[0].detail[:500] if verdict.violations else ""
        Claims(canonical).revoke(TASK, "replay: not accepted")  # the next one claims again
    return Outcome(
        commit, len(paths), len(resources), len(data), verdict.decision.value,
        [c.value for c in verdict.codes], (issued - started) * 1000, (done - issued) * 1000,
        diff.patch_bytes, why,
    )  # fmt: skip


def run(
    source: Path, work: Path, commits: Sequence[str], *, separately: bool, log: Path
) -> tuple[list[Outcome], str]:
    """Replay `commits` in order, with one canonical repository and one engine (as a
    daemon keeps them); `separately`: each on a canonical repository at its own parent.
    Each outcome is appended to `log` (JSON lines) as it is decided. Returns the outcomes
    and what went wrong closing the repository, if anything (every landing was committed
    by then: the queue says what landed)."""
    out: list[Outcome] = []
    canonical: Canonical | None = None
    engine: Integrator | None = None
    trouble = ""
    with log.open("w") as lines:
        try:
            for index, commit in enumerate(commits):
                if canonical is None or separately:
                    if canonical is not None:
                        canonical.close()
                    parent = _git(source, "rev-parse", f"{commit}^1").strip()
                    canonical = Canonical(canonical_for(source, work, parent))
                    engine = Integrator(canonical)
                assert engine is not None
                outcome = replay_one(canonical, engine, commit)
                out.append(outcome)
                lines.write(json.dumps(asdict(outcome)) + "\n")
                if outcome.decision != "ACCEPTED" or outcome.paths >= 500:
                    print(
                        f"{commit[:12]} {outcome.paths:5d} paths {outcome.contract_bytes:7d} B "
                        f"{outcome.decision} {','.join(outcome.codes)} issue "
                        f"{outcome.issue_ms:.0f} ms integrate {outcome.integrate_ms:.0f} ms "
                        f"{outcome.why}",
                        flush=True,
                    )
                if index % 1000 == 999:
                    lines.flush()
                    print(f"... {index + 1} of {len(commits)}", flush=True)
        finally:
            if canonical is not None:
                try:
                    canonical.close()
                except Exception as err:
                    trouble = f"{type(err).__name__}: {err}"
    return out, trouble


def landed_on_queue(work: Path, start: str) -> dict[str, object]:
    """What the queue of the replay's canonical repository holds at its end: the landings
    since `start` (where it began) and its tree."""
    head = _git(work, "rev-parse", "refs/integrator/queue/main").strip()
    return {
        "landings": int(_git(work, "rev-list", "--first-parent", "--count", f"{start}..{head}")),
        "queue_tree": _git(work, "rev-parse", f"{head}^{{tree}}").strip(),
    }


def summary(outcomes: Sequence[Outcome]) -> dict[str, object]:
    accepted = [o for o in outcomes if o.decision == "ACCEPTED"]
    widest = max(outcomes, key=lambda o: o.paths, default=None)

    def pct(values: list[float], q: float) -> float:
        return round(sorted(values)[int(q * (len(values) - 1))], 1) if values else 0.0

    issue = [o.issue_ms for o in outcomes]
    land = [o.integrate_ms for o in accepted]
    return {
        "commits": len(outcomes),
        "accepted": len(accepted),
        "not_accepted": [asdict(o) for o in outcomes if o.decision != "ACCEPTED"],
        "widest": asdict(widest) if widest else None,
        "max_globs_default": MAX_GLOBS,
        "over_default_patch_budget": sum(o.patch_bytes > DEFAULT_MAX_PATCH_BYTES for o in outcomes),
        "issue_ms": {"p50": pct(issue, 0.5), "p95": pct(issue, 0.95), "max": pct(issue, 1.0)},
        "integrate_ms": {"p50": pct(land, 0.5), "p95": pct(land, 0.95), "max": pct(land, 1.0)},
        "mean_integrate_ms": round(statistics.fmean(land), 1) if land else 0.0,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.replay", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--source", type=Path, required=True, help="a clone of the history")
    parser.add_argument("--head", default="HEAD", help="the history's tip (default HEAD)")
    parser.add_argument("--around", help="replay the commits around this one ...")
    parser.add_argument("--window", type=int, default=50, help="... this many each side")
    parser.add_argument("--count", type=int, help="replay the newest N first-parent commits")
    parser.add_argument("--largest", type=int, help="replay the N widest, each on its own")
    parser.add_argument("--all", action="store_true", help="every first-parent commit")
    parser.add_argument("--out", type=Path, default=Path("bench-out"), help="default bench-out/")
    args = parser.parse_args(argv)
    if not (args.around or args.count or args.largest or args.all):
        parser.error("name what to replay: --around REV, --count N, --largest N or --all")
    source = args.source.resolve()
    commits = _largest(source, args.head, args.largest) if args.largest else _commits(source, args)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    work = args.out / "replay.git"
    outcomes, trouble = run(
        source, work, commits, separately=bool(args.largest), log=args.out / "replay.jsonl"
    )
    result = {**summary(outcomes), "seconds": round(time.perf_counter() - started, 1)}
    result["source"], result["head"] = str(source), _git(source, "rev-parse", args.head).strip()
    if commits and not args.largest:
        result.update(landed_on_queue(work, _git(source, "rev-parse", f"{commits[0]}^1").strip()))
        result["last_tree"] = _git(source, "rev-parse", f"{commits[-1]}^{{tree}}").strip()
    if trouble:
        result["close_error"] = trouble
    (args.out / "replay.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "not_accepted"}, indent=2))
    return 0 if result["accepted"] == result["commits"] else 1


if __name__ == "__main__":
    sys.exit(main())
