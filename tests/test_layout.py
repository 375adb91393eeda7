"""The package's shape: floors that only look down, no import cycles, no oversized modules,
empty subpackage inits, and commands that only the command line imports."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("integrator", "drills", "bench")
MODULE_LIMIT = 500


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {
        _module_name(path): path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    }


def _imports(path: Path, name: str, known: set[str]) -> set[str]:
    """Every project module `path` imports, wherever the import stands (type-checking
    blocks and function bodies included: a cycle hidden in a function is still one)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            # `from a import b` imports the module a.b where there is one, else a.
            targets = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        else:
            continue
        found.update(t for t in targets if t in known and t != name)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return out


def test_no_import_cycles() -> None:
    """No module of the package, the drills or the benchmark imports itself round a loop."""
    modules = _modules()
    known = set(modules)
    graph = {name: _imports(path, name, known) for name, path in modules.items()}
    # A package's __init__ is not a dependency of its modules' siblings.
    for deps in graph.values():
        deps -= {name for name in known if modules[name].name == "__init__.py"}
    assert _cycles(graph) == []


# The floors, lowest first (README, "Layout"). A module may import its own floor's package
# and any package on a lower floor; never one above, and never a different package of its
# own floor (peers stay independent). Top-level modules other than the entry points are the
# base floor; `root` is `integrator/__init__.py`, the public API's lazy facade.
FLOORS: tuple[frozenset[str], ...] = tuple(
    frozenset(floor.split())
    for floor in (
        "base",
        "documents",
        "store",
        "plumbing",
        "fence",
        "serverhook",
        "report",
        "records",
        "landing review",
        "fleet promotion rollout",
        "daemon",
        "web mcp",
        "commands",
        "cli api demo",
        "__main__ root",
    )
)
ENTRY_MODULES = frozenset({"cli", "api", "__main__"})


def _unit(module: str) -> str:
    """The floor unit a module of `integrator` belongs to: its subpackage, `base` for a
    top-level helper module, the module itself for an entry point, `root` for the package."""
    parts = module.split(".")
    if parts == ["integrator"]:
        return "root"
    if len(parts) == 2 and (ROOT / "integrator" / f"{parts[1]}.py").exists():
        return parts[1] if parts[1] in ENTRY_MODULES else "base"
    return parts[1]


def _floor_of(unit: str) -> int:
    for level, floor in enumerate(FLOORS):
        if unit in floor:
            return level
    raise AssertionError(f"{unit} is on no floor: add it to FLOORS and the README's layout")


def _package_graph() -> dict[str, set[str]]:
    """Module → the project modules it imports, for `integrator` only."""
    modules = {
        name: path for name, path in _modules().items() if name.split(".")[0] == "integrator"
    }
    return {name: _imports(path, name, set(modules)) for name, path in modules.items()}


def test_every_subpackage_has_a_floor() -> None:
    units = {_unit(name) for name in _package_graph()}
    assert sorted(u for u in units if not any(u in floor for floor in FLOORS)) == []


def test_imports_only_look_down() -> None:
    """No import runs from a lower floor to a higher one, or sideways between two packages
    of one floor."""
    bad = sorted(
        f"{name} -> {target}"
        for name, targets in _package_graph().items()
        for target in targets
        if _unit(target) != _unit(name) and _floor_of(_unit(target)) >= _floor_of(_unit(name))
    )
    assert bad == []


def test_no_cycles_between_subpackages() -> None:
    graph: dict[str, set[str]] = {}
    for name, targets in _package_graph().items():
        graph.setdefault(_unit(name), set()).update(
            _unit(t) for t in targets if _unit(t) != _unit(name)
        )
    for unit in list(graph):
        for target in graph[unit]:
            graph.setdefault(target, set())
    assert _cycles(graph) == []


def test_only_the_command_line_imports_commands() -> None:
    """`integrator.commands` turns argv into calls and results into text; nothing but
    `integrator.cli` may depend on it (the MCP server calls the services below it)."""
    importers = sorted(
        name
        for name, targets in _package_graph().items()
        if _unit(name) != "commands"
        and any(_unit(t) == "commands" for t in targets)
        and name != "integrator.cli"
    )
    assert importers == []


def test_no_module_past_the_limit() -> None:
    """One concept per module: none of the package's modules is longer than 500 lines."""
    long = {
        str(path.relative_to(ROOT)): n
        for path in (ROOT / "integrator").rglob("*.py")
        if (n := len(path.read_text("utf-8").splitlines())) > MODULE_LIMIT
    }
    assert long == {}


def test_subpackage_inits_are_empty() -> None:
    """A subpackage's __init__ does no work: importing one module imports no others."""
    busy = [
        str(path.relative_to(ROOT))
        for path in (ROOT / "integrator").rglob("__init__.py")
        if path.parent != ROOT / "integrator" and path.read_text("utf-8").strip()
    ]
    assert busy == []


def test_every_folder_is_a_package() -> None:
    """Every folder of modules has its __init__.py: setuptools' `find` (not the namespace
    variant) leaves a folder without one out of a wheel, and its commands would fail only
    after installation."""
    bare = sorted(
        str(folder.relative_to(ROOT))
        for folder in {path.parent for path in (ROOT / "integrator").rglob("*.py")}
        if not (folder / "__init__.py").exists()
    )
    assert bare == []
