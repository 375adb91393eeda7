"""Plans of task folders and queues: the plan `integrator plan` and the MCP server's
`ready_tasks` compute, and its JSON document."""

from __future__ import annotations

from pathlib import Path

from integrator.documents.policy import Policy, default_policy, load_policy_file
from integrator.errors import ConfigurationError
from integrator.fleet.planner import Plan, PlanError, build_plan
from integrator.fleet.taskqueue import Queue
from integrator.fleet.tasks import Task, TaskFileError, load_task
from integrator.fleet.workspace import main_checkout
from integrator.records.canonical import Canonical


def _load(folder: Path) -> list[Task]:
    tasks, problems = [], []
    for path in sorted(folder.glob("*.md")):
        try:
            tasks.append(load_task(path))
        except TaskFileError as err:
            problems.append(str(err))
    if problems:
        raise PlanError(problems)
    return tasks


def planning_policy(folder: Path, policy_file: Path | None = None) -> Policy:
    """The policy to plan with: `policy_file`'s, else the live policy of the repository
    `folder` is in, else the default policy (a folder outside any repository)."""
    if policy_file is not None:
        return load_policy_file(policy_file)
    try:
        main = main_checkout(folder)
    except ConfigurationError:
        return default_policy()
    with Canonical(main) as canonical:
        return canonical.policy_state().policy


def load_plan(folder: Path, policy: Policy, fleet: int | None = None) -> Plan:
    """Plan a folder of task files, or a queue (claimed tasks hold, done ones resolve)."""
    if not folder.is_dir():
        raise ConfigurationError(f"{folder} is not a folder of task files")
    if (folder / "inbox").is_dir():
        queue = Queue(folder)
        snapshot = queue.snapshot()
        broken = [e.error for e in (*snapshot.inbox, *snapshot.claimed) if e.error]
        if broken:
            raise PlanError([b for b in broken if b])
        return build_plan(
            [e.task for e in snapshot.inbox if e.task],
            policy,
            running=[e.task for e in snapshot.claimed if e.task],
            done=[e.task_id for e in snapshot.done],
            fleet=fleet,
        )
    return build_plan(_load(folder), policy, fleet=fleet)


def state_of(plan: Plan, task_id: str) -> str:
    if task_id in plan.running:
        return "running"
    return "ready" if task_id in plan.ready else "waiting"


def plan_json(plan: Plan) -> dict[str, object]:
    """The plan as `integrator plan --json` prints it (the MCP server's `ready_tasks`)."""
    return {
        "tasks": [
            {
                "id": t,
                "title": plan.tasks[t].title,
                "type": plan.tasks[t].meta.type,
                "lockMode": "exclusive" if plan.tasks[t].writes else "none",
                "state": state_of(plan, t),
                "writeSet": [
                    {"pattern": e.pattern, "origin": e.origin, "because": e.because}
                    for e in plan.writesets[t].entries
                ],
                "resources": list(plan.writesets[t].resources),
                "waitingFor": list(plan.waiting.get(t, ())),
            }
            for t in plan.order
        ],
        "edges": [
            {
                "from": e.blocker,
                "to": e.blocked,
                "declared": e.declared,
                "overlaps": [{"kind": o.kind, "from": o.mine, "to": o.theirs} for o in e.overlaps],
            }
            for e in plan.edges
        ],
        "ready": list(plan.ready),
        "running": list(plan.running),
        "ceiling": plan.ceiling,
        "fleet": plan.fleet,
        "split": [
            {"pattern": h.pattern, "pairs": h.pairs, "tasks": list(h.tasks), "advice": h.advice}
            for h in plan.split
        ],
        "warnings": list(plan.warnings),
    }
