"""The partition planner: write sets, blocking edges, the ready set, the ceiling.

Concurrency is decided when the work is cut, not when it runs. Each task's `owns` is
expanded into its write set — what it edits, what the build regenerates from that (policy
`[[writeset]]` rules: `pyproject.toml` → its lockfile) and the repo-wide files every task
touches (`[planner] repo_wide`). Every pair of tasks whose write sets overlap under THE
conservative rule of `overlap.py` gets a blocking edge from the earlier task in a stable
order (a topological order of the declared `blocked-by` edges, ties broken by id), so the
edges can never form a cycle and the queue never offers both tasks at once.

Everything here is pure: tasks and a policy in, a frozen `Plan` out.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

from integrator import paths
from integrator.documents.policy import Policy
from integrator.errors import UsageError
from integrator.fence.overlap import Overlap, find_overlaps, patterns_overlap
from integrator.fence.resources import resources_of_path
from integrator.fleet.tasks import Task, ownership_problem

Origin = Literal["owned", "generated", "repo-wide"]


class PlanError(UsageError):
    """The tasks cannot be planned as written; `problems` lists every reason."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("cannot plan: " + "; ".join(problems))
        self.problems = list(problems)


# --- write sets ------------------------------------------------------------------------


@dataclass(frozen=True)
class WriteEntry:
    pattern: str
    origin: Origin
    because: str


@dataclass(frozen=True)
class WriteSet:
    """A task's complete write set, each pattern with why it is in it."""

    entries: tuple[WriteEntry, ...] = ()
    resources: tuple[str, ...] = ()

    @property
    def patterns(self) -> tuple[str, ...]:
        return tuple(e.pattern for e in self.entries)

    def entry(self, pattern: str) -> WriteEntry | None:
        return next((e for e in self.entries if e.pattern == pattern), None)


def anchored(pattern: str) -> bool:
    """gitignore: a pattern with a slash (other than a trailing one) is rooted."""
    return "/" in pattern.strip().rstrip("/")


@dataclass(frozen=True)
class _Witness:
    folder: str | None  # where a shared file lives; None: at any depth
    exact: bool  # True: in `folder` itself; False: somewhere below it


def _example(pattern: str) -> str:
    """A concrete name a glob matches (`*.proto` → `x.proto`)."""
    text = re.sub(r"\[!?\^?(.)[^\]]*\]", r"\1", pattern.strip().strip("/"))
    return re.sub(r"\*\*|\*|\?", "x", text)


def _covers(pattern: str, path: str) -> bool:
    return paths.PathMatcher.of([pattern]).covers(path)


def _witness(owned: str, rule_input: str) -> _Witness | None:  # noqa: PLR0911 — one return per shape of pattern pair
    """Where a file matched by both `owned` and `rule_input` would live, or None if disjoint.

    Heuristic, but never too narrow: patterns we cannot reason about count as meeting.
    """
    if anchored(rule_input):
        if paths.is_literal(rule_input):
            path = rule_input.strip().strip("/")
            return _Witness(_parent(path), True) if _covers(owned, path) else None
        if not patterns_overlap(owned, rule_input):
            return None
        prefixes = (paths.literal_prefix(owned), paths.literal_prefix(rule_input))
        return _Witness(max(prefixes, key=lambda p: p.count("/") + bool(p)), False)
    if not anchored(owned):
        meets = _covers(owned, _example(rule_input)) or _covers(rule_input, _example(owned))
        return _Witness(None, False) if meets or _opaque(owned) else None
    if paths.is_literal(owned):
        path = owned.strip().strip("/")
        if _covers(rule_input, path):
            return _Witness(_parent(path), True)
        if "." in path.rpartition("/")[2]:
            return None  # names a file (it has an extension), not a folder of inputs
    prefix = paths.literal_prefix(owned)
    name = _example(rule_input)
    for depth in range(4):
        candidate = "/".join(p for p in (prefix, *(["x"] * depth), name) if p)
        if _covers(owned, candidate) and _covers(rule_input, candidate):
            return _Witness(prefix, False)
    return _Witness(prefix, False) if _opaque(owned) else None


def _opaque(pattern: str) -> bool:
    # Character classes and `?` defeat the example-based test: assume they meet.
    return any(ch in pattern for ch in "[?\\")


def _parent(path: str) -> str:
    return path.rpartition("/")[0]


def _place(output: str, where: _Witness) -> str:
    """An output pattern placed beside the input that regenerates it."""
    if anchored(output) or where.folder is None:
        return output
    name = output.strip().strip("/")
    if where.exact:
        return f"{where.folder}/{name}" if where.folder else f"/{name}"
    return f"{where.folder}/**/{name}" if where.folder else f"/**/{name}"


def _within(inner: str, outer: str) -> bool:
    """Is every path `inner` matches also matched by `outer` (`dir/**` or a literal `dir`)?"""
    if inner == outer:
        return True
    if not (anchored(outer) and anchored(inner)):
        return False
    base = outer.strip().strip("/").removesuffix("/**")
    if any(ch in base for ch in "*?[\\"):
        return False
    return inner.strip().lstrip("/").startswith(base + "/")


def expand_writeset(task: Task, policy: Policy) -> WriteSet:
    """`owns` ∪ outputs the build regenerates from them ∪ repo-wide files (cognitive: empty)."""
    if not task.writes:
        return WriteSet()
    owns = list(task.meta.owns)
    entries: dict[str, WriteEntry] = {p: WriteEntry(p, "owned", "owned by the task") for p in owns}
    for entry in _generated(owns, policy):
        if entry.pattern not in entries and not any(_within(entry.pattern, o) for o in owns):
            entries[entry.pattern] = entry
    for pattern in policy.planner.repo_wide:
        if pattern not in entries:
            entries[pattern] = WriteEntry(
                pattern, "repo-wide", "repo-wide file every task writes (policy planner.repo_wide)"
            )
    resources = list(task.meta.resources)
    for entry in entries.values():
        if paths.is_literal(entry.pattern):
            for resource, _unknown in resources_of_path(policy, entry.pattern.strip().strip("/")):
                if resource not in resources:
                    resources.append(resource)
    return WriteSet(tuple(entries.values()), tuple(resources))


def _generated(owns: Sequence[str], policy: Policy) -> Iterator[WriteEntry]:
    """Outputs the policy's write-set rules regenerate from what the task owns, in order."""
    for owned in owns:
        for rule in policy.writeset:
            for rule_input in rule.inputs:
                where = _witness(owned, rule_input)
                if where is None:
                    continue
                for output in rule.outputs:
                    yield WriteEntry(
                        _place(output, where),
                        "generated",
                        f"regenerated from {rule_input!r} (owned through {owned!r})",
                    )


# --- the plan --------------------------------------------------------------------------


@dataclass(frozen=True)
class Edge:
    """`blocked` waits for `blocker`: declared in a task file, derived from overlap, or both."""

    blocker: str
    blocked: str
    declared: bool
    overlaps: tuple[Overlap, ...] = ()

    def reason(self) -> str:
        parts = ["declared blocked-by"] if self.declared else []
        parts += [o.describe() for o in self.overlaps[:3]]
        if len(self.overlaps) > 3:
            parts.append(f"and {len(self.overlaps) - 3} more overlaps")
        return "; ".join(parts)


@dataclass(frozen=True)
class HotPath:
    pattern: str
    pairs: int
    tasks: tuple[str, ...]
    advice: str


@dataclass(frozen=True)
class Plan:
    order: tuple[str, ...]
    tasks: dict[str, Task]
    writesets: dict[str, WriteSet]
    edges: tuple[Edge, ...]
    ready: tuple[str, ...]
    waiting: dict[str, tuple[str, ...]]
    running: tuple[str, ...]
    ceiling: int
    fleet: int | None = None
    split: tuple[HotPath, ...] = ()
    warnings: tuple[str, ...] = field(default=())


def plan_problems(tasks: Iterable[Task], known: Iterable[str] = ()) -> list[str]:
    """Every reason the tasks cannot be planned: duplicates, undecomposed tasks, unknown ids."""
    problems: list[str] = []
    seen: set[str] = set()
    listed = list(tasks)
    ids = {t.id for t in listed} | set(known)
    for task in listed:
        if task.id in seen:
            problems.append(f"task id {task.id} appears twice")
        seen.add(task.id)
        problem = ownership_problem(task)
        if problem:
            problems.append(problem)
        for other in (*task.meta.blocked_by, *task.meta.blocking):
            if other not in ids:
                problems.append(f"task {task.id} names unknown task {other} in blocked-by/blocking")
    return problems


def _stable_order(
    tasks: dict[str, Task], declared: set[tuple[str, str]], first: set[str]
) -> tuple[list[str], list[str]]:
    """Kahn's order over declared edges, ties by (running first, id); and ids left in cycles."""
    indegree = dict.fromkeys(tasks, 0)
    successors: dict[str, list[str]] = {t: [] for t in tasks}
    for blocker, blocked in declared:
        successors[blocker].append(blocked)
        indegree[blocked] += 1
    heap = [(0 if t in first else 1, t) for t, d in indegree.items() if d == 0]
    heapq.heapify(heap)
    order: list[str] = []
    while heap:
        _, current = heapq.heappop(heap)
        order.append(current)
        for nxt in successors[current]:
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                heapq.heappush(heap, (0 if nxt in first else 1, nxt))
    return order, sorted(t for t, d in indegree.items() if d > 0)


def build_plan(
    pending: Sequence[Task],
    policy: Policy,
    *,
    running: Sequence[Task] = (),
    done: Iterable[str] = (),
    fleet: int | None = None,
    strict: bool = True,
) -> Plan:
    """Plan `pending` tasks while `running` ones hold their write sets and `done` ones resolve.

    strict: refuse any problem (PlanError). Not strict (the queue): a task with a problem is
    left out of the plan and reported in `waiting`, so one bad file cannot stall the rest.
    """
    done_ids = set(done)
    everything = [*running, *pending]
    problems = plan_problems(everything, done_ids)
    if strict and problems:
        raise PlanError(problems)
    waiting: dict[str, list[str]] = {}
    tasks = _plannable(everything, running, done_ids, waiting)
    running_ids = {t.id for t in running if t.id in tasks}
    writesets = {t: expand_writeset(task, policy) for t, task in tasks.items()}
    declared = _declared_edges(tasks)
    order, cyclic = _stable_order(tasks, declared, running_ids)
    if cyclic:
        if strict:
            raise PlanError([f"blocked-by edges form a cycle through {', '.join(cyclic)}"])
        for t in cyclic:
            waiting.setdefault(t, []).append("in or behind a cycle of blocked-by edges")
            tasks.pop(t)
    edges = _edges(order, writesets, declared, policy.shared.resources)
    _note_waits(order, tasks, edges, running_ids, done_ids, waiting)
    ready = tuple(t for t in order if t not in running_ids and t not in waiting)
    ceiling = width(order, [(e.blocker, e.blocked) for e in edges])
    split = hot_paths(edges, writesets) if fleet is not None and ceiling < fleet else ()
    warnings = tuple(
        f"task {t}: {e.pattern!r} has no '/' so it matches at any depth and overlaps every "
        f"other task; write '/{e.pattern.strip().strip('/')}' for the root file"
        for t in order
        for e in writesets[t].entries
        if not anchored(e.pattern) and e.origin != "generated"
    )
    return Plan(
        order=tuple(order),
        tasks={t: tasks[t] for t in order},
        writesets={t: writesets[t] for t in order},
        edges=tuple(edges),
        ready=ready,
        waiting={k: tuple(v) for k, v in waiting.items()},
        running=tuple(t for t in order if t in running_ids),
        ceiling=ceiling,
        fleet=fleet,
        split=split,
        warnings=warnings,
    )


def _plannable(
    everything: Sequence[Task],
    running: Sequence[Task],
    done_ids: set[str],
    waiting: dict[str, list[str]],
) -> dict[str, Task]:
    """The tasks that can be planned; each other one waits with its problems."""
    tasks: dict[str, Task] = {}
    known = {t.id for t in everything} | done_ids
    for task in everything:
        problem = plan_problems([task], known)
        if task.id in tasks or (problem and task not in running):
            waiting.setdefault(task.id, []).extend(problem or ["task id appears twice"])
            continue
        tasks[task.id] = task
    return tasks


def _declared_edges(tasks: dict[str, Task]) -> set[tuple[str, str]]:
    """(blocker, blocked) pairs the task files declare, between tasks of the plan."""
    declared: set[tuple[str, str]] = set()
    for task in tasks.values():
        declared.update((b, task.id) for b in task.meta.blocked_by if b in tasks)
        declared.update((task.id, b) for b in task.meta.blocking if b in tasks)
    return declared


def _edges(
    order: Sequence[str],
    writesets: dict[str, WriteSet],
    declared: set[tuple[str, str]],
    shared: Sequence[str],
) -> list[Edge]:
    """An edge between every ordered pair that overlaps or was declared."""
    edges: list[Edge] = []
    for i, a in enumerate(order):
        for b in order[i + 1 :]:
            wa, wb = writesets[a], writesets[b]
            found = tuple(
                find_overlaps(
                    wa.patterns, wa.resources, wb.patterns, wb.resources, shared_resources=shared
                )
            )
            if found or (a, b) in declared:
                edges.append(Edge(a, b, (a, b) in declared, found))
    return edges


def _note_waits(
    order: Sequence[str],
    tasks: dict[str, Task],
    edges: Sequence[Edge],
    running_ids: set[str],
    done_ids: set[str],
    waiting: dict[str, list[str]],
) -> None:
    """Why each task that cannot start yet waits: an unfinished blocker or an edge."""
    for a in order:
        for unknown in tasks[a].meta.blocked_by:
            if unknown not in tasks and unknown not in done_ids:
                waiting.setdefault(a, []).append(f"blocked by {unknown}, which is not done")
    for edge in edges:
        if edge.blocked not in running_ids:
            waiting.setdefault(edge.blocked, []).append(
                f"blocked by {edge.blocker}: {edge.reason()}"
            )
    for r in running_ids:
        for edge in edges:
            if edge.blocker not in running_ids and edge.blocked == r and edge.overlaps:
                # A later-added task ordered before a running one must still wait for it.
                waiting.setdefault(edge.blocker, []).append(
                    f"overlaps running task {r}: {edge.reason()}"
                )


def width(nodes: Sequence[str], edges: Iterable[tuple[str, str]]) -> int:
    """The most tasks that can run at once: the largest antichain of the DAG.

    Dilworth: width = nodes − maximum matching between "u" and "v" over u < v in the
    transitive closure (a minimum chain cover), found with augmenting paths.
    """
    succ: dict[str, set[str]] = {n: set() for n in nodes}
    for a, b in edges:
        succ[a].add(b)
    reach: dict[str, set[str]] = {}
    for node in reversed(nodes):  # `nodes` is topological, so successors are done first
        closure: set[str] = set()
        for nxt in succ[node]:
            closure.add(nxt)
            closure |= reach.get(nxt, set())
        reach[node] = closure
    match_of: dict[str, str] = {}

    def augment(u: str, seen: set[str]) -> bool:
        for v in reach[u]:
            if v in seen:
                continue
            seen.add(v)
            if v not in match_of or augment(match_of[v], seen):
                match_of[v] = u
                return True
        return False

    matched = sum(augment(u, set()) for u in nodes)
    return len(nodes) - matched


def hot_paths(
    edges: Iterable[Edge], writesets: dict[str, WriteSet], top: int = 5
) -> tuple[HotPath, ...]:
    """The write-set patterns behind the most overlap edges, with what to do about each.

    Ties go to repo-wide files, then owned patterns, then generated outputs: splitting
    the input usually removes the generated overlap with it.
    """
    edges_of: dict[str, set[tuple[str, str]]] = {}
    involved: dict[str, set[str]] = {}
    for edge in edges:
        for overlap in edge.overlaps:
            if overlap.kind != "path":
                continue
            for task, pattern in ((edge.blocker, overlap.mine), (edge.blocked, overlap.theirs)):
                edges_of.setdefault(pattern, set()).add((edge.blocker, edge.blocked))
                involved.setdefault(pattern, set()).add(task)
    origin_rank = {"repo-wide": 0, "owned": 1, "generated": 2}

    def entry_of(pattern: str) -> WriteEntry | None:
        return next((ws.entry(pattern) for ws in writesets.values() if ws.entry(pattern)), None)

    def rank(pattern: str) -> tuple[int, int, str]:
        entry = entry_of(pattern)
        return (-len(edges_of[pattern]), origin_rank[entry.origin] if entry else 1, pattern)

    return tuple(
        HotPath(p, len(edges_of[p]), tuple(sorted(involved[p])), _advice(p, entry_of(p)))
        for p in sorted(edges_of, key=rank)[:top]
    )


def _advice(pattern: str, entry: WriteEntry | None) -> str:
    if entry is not None and entry.origin == "repo-wide":
        return "exclude it from task commits and regenerate it in one downstream task"
    if entry is not None and entry.origin == "generated":
        return f"{entry.because}: give the regeneration its own task, or split the input"
    if not anchored(pattern):
        return "it matches at any depth; anchor it (a leading '/' or a folder) or narrow it"
    if paths.is_literal(pattern):
        return "one file, one writer at a time: give all its edits to one task"
    return "split this module so that tasks own disjoint parts of it"
