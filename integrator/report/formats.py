"""Rendering a verdict for the people and tools that read it: text, JSON, CI formats.

Every renderer is a pure function of the verdict (and, for text, the recomputed changes),
except `append_github_summary`, the one step that writes a file. Paths in violations are
data from the candidate, so every format escapes them by its own rules: a path may hold
`,` `:` `%`, newlines or terminal control characters (UNSAFE_PATH reports exactly those).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from integrator.documents.verdict import Verdict
from integrator.errors import UsageError
from integrator.fence.diff import Change
from integrator.report.codequality import render_codequality
from integrator.report.github import append_github_summary, render_github
from integrator.report.junit import render_junit
from integrator.report.sarif import render_sarif
from integrator.report.text import render_text

__all__ = ["FORMATS", "append_github_summary", "render"]

FORMATS: tuple[str, ...] = ("text", "json", "github", "sarif", "junit", "codequality")


def render(
    verdict: Verdict,
    fmt: str,
    *,
    changes: Sequence[Change] = (),
    color: bool = False,
) -> str:
    """Render `verdict` in `fmt` (one of FORMATS); only text uses `changes` and `color`."""
    if fmt == "text":
        return render_text(verdict, changes=changes, color=color)
    renderer = _RENDERERS.get(fmt)
    if renderer is None:
        raise UsageError(f"unknown output format {fmt!r}; choose one of {', '.join(FORMATS)}")
    return renderer(verdict)


def render_json(verdict: Verdict) -> str:
    """Exactly the verdict model's JSON form (camelCase), the stable machine interface."""
    return verdict.to_json()


_RENDERERS: dict[str, Callable[[Verdict], str]] = {
    "json": render_json,
    "github": render_github,
    "sarif": render_sarif,
    "junit": render_junit,
    "codequality": render_codequality,
}
