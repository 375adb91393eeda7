"""Rendering a verdict for the people and tools that read it: text, JSON, CI formats.

Every renderer is a function of the verdict (text also takes the recomputed changes;
SARIF, Code Quality and GitHub the contract file's path, to place results that have no
path of their own; JUnit also writes when and on which host it was written), and
`append_github_summary` and `write_document` are the steps that write. Paths in
violations are data from the candidate, so every format escapes them by its own rules: a
path may hold `,` `:` `%`, newlines or terminal control characters (UNSAFE_PATH reports
exactly those), and one that is not UTF-8 is in git's quoted form (`quote_path`) in every
format but SARIF's `uri`, which percent-encodes its raw bytes. Every document is valid
UTF-8 (docs/formats.md describes each format's shape).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from integrator.documents.verdict import Verdict
from integrator.errors import UsageError
from integrator.escape import write_text
from integrator.fence.diff import Change
from integrator.paths import quote_path
from integrator.report.codequality import render_codequality
from integrator.report.common import printable
from integrator.report.github import append_github_summary, render_github
from integrator.report.junit import render_junit
from integrator.report.kinds import FORMATS
from integrator.report.sarif import render_sarif
from integrator.report.text import render_text

__all__ = ["FORMATS", "append_github_summary", "contract_in_worktree", "render", "write_document"]


def render(
    verdict: Verdict,
    fmt: str,
    *,
    changes: Sequence[Change] = (),
    color: bool = False,
    contract_path: str | None = None,
) -> str:
    """Render `verdict` in `fmt` (one of FORMATS); only text uses `changes` and `color`.

    `contract_path` is the contract file relative to the repository's work tree, as the
    file system names it (undecodable bytes surrogate-escaped), when the gate read the
    contract from there: results without a path of their own are placed at it.
    """
    verdict = printable(verdict)
    anchor = quote_path(contract_path) if contract_path else None
    if fmt == "text":
        return render_text(verdict, changes=changes, color=color)
    renderer = _RENDERERS.get(fmt)
    if renderer is None:
        raise UsageError(f"unknown output format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return renderer(verdict, anchor)


def contract_in_worktree(contract: str, worktree: str | None) -> str | None:
    """The contract file `contract` (a command-line argument, `-` for standard input)
    relative to the repository's `worktree`, when it is a file inside it and outside
    `.git`; None otherwise (a bare repository has no work tree)."""
    if contract == "-" or not worktree:
        return None
    try:
        # Symlinks resolved: a result must name the file where the repository has it.
        relative = Path(contract).resolve().relative_to(Path(worktree).resolve())
    except (OSError, ValueError):
        return None
    if not relative.parts or relative.parts[0] == ".git":
        return None
    return relative.as_posix()


def write_document(text: str, fmt: str) -> None:
    """Write a rendered document and a newline to standard output.

    Machine formats are UTF-8 documents whatever the locale says (XML declares it, SARIF
    and JSON are UTF-8 by definition); text is for a terminal, in its encoding.
    """
    write_text(text + "\n", encoding=None if fmt == "text" else "utf-8")


def render_json(verdict: Verdict) -> str:
    """Exactly the verdict model's JSON form (camelCase), the stable machine interface."""
    return verdict.to_json()


# Each takes the verdict and the contract file's path in written form (or None).
_RENDERERS: dict[str, Callable[[Verdict, str | None], str]] = {
    "json": lambda verdict, _: render_json(verdict),
    "github": lambda verdict, path: render_github(verdict, contract_path=path),
    "sarif": lambda verdict, path: render_sarif(verdict, contract_path=path),
    "junit": lambda verdict, _: render_junit(verdict),
    "codequality": lambda verdict, path: render_codequality(verdict, contract_path=path),
}
