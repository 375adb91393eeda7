"""`integrator plan DIR` — write sets, blocking edges, the ready set and the partition ceiling."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from integrator.commands._common import say

if TYPE_CHECKING:
    from integrator.fleet.planner import Edge, Plan


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "plan",
        help="derive blocking edges, the ready set and the partition ceiling of task files",
        description=(
            "Expand each task's `owns` into its write set (edits, regenerated outputs, "
            "repo-wide files), add a blocking edge for every overlapping pair, and report "
            "what is ready and how many tasks can run at once. DIR is a folder of task "
            "files, or a queue folder (.agents) with inbox/claimed/done."
        ),
    )
    parser.add_argument("dir", type=Path, help="folder of task files, or a queue folder")
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    parser.add_argument(
        "--format", choices=("text", "mermaid", "dot"), default="text", help="output format"
    )
    parser.add_argument("--fleet", type=int, metavar="N", help="agents you intend to run")
    parser.add_argument("--policy", type=Path, metavar="FILE", help="policy TOML to plan with")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from integrator.fleet.plans import load_plan, plan_json, planning_policy

    plan = load_plan(args.dir, planning_policy(args.dir, args.policy), args.fleet)
    if args.json:
        print(json.dumps(plan_json(plan), indent=2, ensure_ascii=False))
    elif args.format == "mermaid":
        print(mermaid(plan), end="")
    elif args.format == "dot":
        print(dot(plan), end="")
    else:
        say(text(plan), end="")
    return 0


def text(plan: Plan) -> str:
    from integrator.fleet.plans import state_of

    running = f" ({len(plan.running)} running)" if plan.running else ""
    lines = [
        f"plan: {len(plan.order)} tasks{running}, {len(plan.edges)} blocking edges, "
        f"partition ceiling {plan.ceiling}"
        + (f" for a fleet of {plan.fleet}" if plan.fleet else ""),
        f"ready ({len(plan.ready)}): {', '.join(plan.ready) or '-'}",
    ]
    waiting = [t for t in plan.order if state_of(plan, t) == "waiting"]
    if waiting:
        lines.append("waiting:")
        lines += [f"  {t}: {'; '.join(plan.waiting.get(t, ()))}" for t in waiting]
    lines.append("write sets:")
    for t in plan.order:
        entries = plan.writesets[t].entries
        shown = ", ".join(
            e.pattern + ("" if e.origin == "owned" else f" ({e.origin})") for e in entries
        )
        lines.append(f"  {t}: {shown or '(none: lock mode none)'}")
    if plan.split:
        lines.append(f"split to reach {plan.fleet} (ceiling {plan.ceiling}):")
        lines += [
            f"  {h.pattern!r} in {h.pairs} overlapping pair{'' if h.pairs == 1 else 's'} "
            f"({', '.join(h.tasks)}): {h.advice}"
            for h in plan.split
        ]
    lines += [f"warning: {w}" for w in plan.warnings]
    return "\n".join(lines) + "\n"


def reduced_edges(plan: Plan) -> list[Edge]:
    """Edges minus those implied by a longer path (for drawing; the JSON lists all)."""
    succ: dict[str, set[str]] = {t: set() for t in plan.order}
    for e in plan.edges:
        succ[e.blocker].add(e.blocked)
    reach: dict[str, set[str]] = {}
    for node in reversed(plan.order):
        reach[node] = set().union(*({n} | reach[n] for n in succ[node])) if succ[node] else set()
    return [
        e
        for e in plan.edges
        if not any(e.blocked in reach[w] for w in succ[e.blocker] if w != e.blocked)
    ]


def _label(plan: Plan, task_id: str) -> str:
    return f"{task_id}: {plan.tasks[task_id].title}"


def mermaid(plan: Plan) -> str:
    from integrator.fleet.plans import state_of

    ids = {t: f"n{i}" for i, t in enumerate(plan.order)}
    lines = ["flowchart TD"]
    for t in plan.order:
        label = _label(plan, t).replace('"', "#quot;")
        lines.append(f'  {ids[t]}["{label}"]:::{state_of(plan, t)}')
    for e in reduced_edges(plan):
        arrow = "-->" if e.declared else "-. overlap .->"
        lines.append(f"  {ids[e.blocker]} {arrow} {ids[e.blocked]}")
    lines += [
        "  classDef ready fill:#d8f5d8,stroke:#2b8a3e",
        "  classDef running fill:#dbe8ff,stroke:#1c5fd4",
        "  classDef waiting fill:#f1f1f1,stroke:#888",
    ]
    return "\n".join(lines) + "\n"


def dot(plan: Plan) -> str:
    from integrator.fleet.plans import state_of

    colours = {"ready": "palegreen", "running": "lightblue", "waiting": "lightgrey"}
    lines = ["digraph plan {", "  rankdir=LR;", "  node [shape=box, style=filled];"]
    for t in plan.order:
        label = json.dumps(_label(plan, t))
        lines.append(f"  {json.dumps(t)} [label={label}, fillcolor={colours[state_of(plan, t)]}];")
    for e in reduced_edges(plan):
        style = "solid" if e.declared else "dashed"
        tooltip = json.dumps(e.reason())
        edge = f"{json.dumps(e.blocker)} -> {json.dumps(e.blocked)}"
        lines.append(f"  {edge} [style={style}, tooltip={tooltip}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
