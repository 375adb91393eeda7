"""One home for ref names (`integrator/refnames.py`) and one for the limits on what an agent
controls (`integrator/limits.py`), and the documents that list them."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from integrator import limits, refnames

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "integrator"
HOME = PACKAGE / "refnames.py"
SPELLING = "refs/integrator/"


def _docstrings(tree: ast.Module) -> set[int]:
    """The ids of the docstring nodes: module, class and function docstrings."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                found.add(id(body[0].value))
    return found


def _spellings(path: Path, root: Path = ROOT) -> list[str]:
    """`file:line` of every str constant (f-string parts included, docstrings not) that
    spells a ref name of the namespace."""
    tree = ast.parse(path.read_text("utf-8"))
    docstrings = _docstrings(tree)
    return [
        f"{path.relative_to(root)}:{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and SPELLING in node.value
    ]


def test_only_refnames_spells_integrator_refs() -> None:
    found = [
        hit for path in sorted(PACKAGE.rglob("*.py")) if path != HOME for hit in _spellings(path)
    ]
    assert found == [], "build these from integrator.refnames:\n" + "\n".join(found)


def test_the_walk_sees_fstrings_and_skips_docstrings(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""refs/integrator/ in a module docstring."""\n'
        "def f(x):\n"
        '    """refs/integrator/ in a function docstring."""\n'
        '    return f"refs/integrator/claims/{x}"\n'
        "class C:\n"
        '    """refs/integrator/ in a class docstring."""\n'
        '    help = "see refs/integrator/queue/"\n',
        "utf-8",
    )
    hits = sorted(hit.split(": ", 1)[1] for hit in _spellings(sample, tmp_path))
    assert hits == ["'refs/integrator/claims/'", "'see refs/integrator/queue/'"]


def _ref_constants() -> dict[str, str]:
    return {
        name: value
        for name, value in vars(refnames).items()
        if name.isupper() and isinstance(value, str) and value.startswith(refnames.ROOT)
    }


def test_ref_constants_are_the_namespace() -> None:
    constants = _ref_constants()
    assert constants["NAMESPACE"] == SPELLING
    for name, value in constants.items():
        assert value == refnames.ROOT or value.startswith(SPELLING), name
        if name != "ROOT":
            assert refnames.ref_problem(value.rstrip("/")) is None, name


def test_docs_refs_lists_every_family() -> None:
    text = (ROOT / "docs" / "refs.md").read_text("utf-8")
    missing = [
        f"{name} ({value})" for name, value in _ref_constants().items() if f"`{value}" not in text
    ]
    assert missing == [], "docs/refs.md does not list: " + ", ".join(missing)


def _limits() -> dict[str, object]:
    return {
        name: value
        for name, value in vars(limits).items()
        if name.isupper() and not name.startswith("_")
    }


def _security_table() -> dict[str, str]:
    """Name → the rest of its row, from docs/security.md's limits table."""
    text = (ROOT / "docs" / "security.md").read_text("utf-8")
    rows: dict[str, str] = {}
    for line in text.splitlines():
        match = re.match(r"^\|\s*`([A-Z][A-Z0-9_]*)`\s*\|(.*)\|\s*$", line)
        if match:
            rows[match.group(1)] = match.group(2)
    return rows


def test_docs_security_lists_every_limit() -> None:
    rows = _security_table()
    missing = [name for name in _limits() if name not in rows]
    assert missing == [], "docs/security.md's limits table does not list: " + ", ".join(missing)


def test_docs_security_lists_no_limit_that_is_gone() -> None:
    known = _limits()
    stale = [name for name in _security_table() if name not in known]
    assert stale == [], "docs/security.md lists limits integrator.limits lacks: " + ", ".join(stale)


def test_every_limit_says_what_it_bounds() -> None:
    """Each limit has a comment: on its own line, or on the line above."""
    lines = (PACKAGE / "limits.py").read_text("utf-8").splitlines()
    bare = []
    for number, line in enumerate(lines):
        match = re.match(r"^([A-Z][A-Z0-9_]*)\s*(?::[^=]*)?=", line)
        if match and "#" not in line and not lines[number - 1].lstrip().startswith("#"):
            bare.append(match.group(1))
    assert bare == []


def test_limits_import_nothing_of_the_project() -> None:
    tree = ast.parse((PACKAGE / "limits.py").read_text("utf-8"))
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        (node.module or "").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
    }
    assert imported <= {"__future__", "re"}


def _written(name: str, value: int) -> str:
    """A limit's value as docs/security.md writes it: bytes in KiB, counts with commas."""
    if name.endswith("_bytes") and value % 1024 == 0:
        return f"{value >> 10} KiB"
    return f"{value:,}"


def test_the_policy_sets_exactly_the_limits_it_names() -> None:
    """`[limits]` has one key per entry of CEILINGS, each a constant's name in lower case
    whose default is that constant; the policy model and the limits contracts are read
    under agree on them."""
    from integrator.documents.bounds import DEFAULT_LIMITS, ContractLimits
    from integrator.documents.policy import Limits

    keys = set(limits.CEILINGS)
    assert set(ContractLimits._fields) == keys
    assert set(Limits.model_fields) == keys
    for key in keys:
        default = getattr(limits, key.upper())
        assert getattr(DEFAULT_LIMITS, key) == default == Limits.model_fields[key].default, key
        assert limits.CEILINGS[key] >= default, key


def test_docs_security_says_which_limits_the_policy_sets() -> None:
    """Each row's last column: the `[limits]` key and its ceiling for the five the policy
    sets, `fixed` for every other."""
    rows = _security_table()
    for name, row in rows.items():
        policy = row.rsplit("|", 1)[-1].strip()
        key = name.lower()
        if key in limits.CEILINGS:
            expected = f"`limits.{key}`, up to {_written(key, limits.CEILINGS[key])}"
            assert policy == expected, (name, policy)
        else:
            assert policy.startswith("fixed"), (name, policy)
    ceilings = rows["CEILINGS"].split("|")[0]  # its value column
    for key, ceiling in limits.CEILINGS.items():
        assert _written(key, ceiling) in ceilings, key


def test_default_policy_lists_every_limit_it_may_set() -> None:
    """The default policy's commented `[limits]` names each key with its default and its
    ceiling, as docs/security.md's example does."""
    from integrator.documents.policy import default_policy_text

    text = default_policy_text()
    security = (ROOT / "docs" / "security.md").read_text("utf-8")
    for key, ceiling in limits.CEILINGS.items():
        default = getattr(limits, key.upper())
        line = re.search(rf"^# {key} = (\d+) .*\(ceiling (\d+)\)$", text, re.MULTILINE)
        assert line is not None, key
        assert (int(line.group(1)), int(line.group(2))) == (default, ceiling), key
        example = re.search(rf"^{key} = (\d+) +# ceiling (\d+)", security, re.MULTILINE)
        assert example is not None, key
        assert (int(example.group(1)), int(example.group(2))) == (default, ceiling), key
