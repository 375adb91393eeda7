"""Ref names: one component as integrator names refs after ids (`refname_problem`: a task,
attempt or submission id must be usable as one), and full names as a server should accept
them (`ref_problem`: git's check-ref-format rules, and stricter where a name would be odd —
not UTF-8, invisible or space characters, overlong), plus the folded form under which a
case- or normalisation-insensitive file system stores a name.

Kept free of the contract models, so that the write guard and the server hook load fast.
"""

from __future__ import annotations

import unicodedata

from integrator.escape import visible

MAX_REF_BYTES = 1024
MAX_COMPONENT_BYTES = 255
ODD_CATEGORIES = ("Cc", "Cf", "Cs", "Co", "Cn", "Zs", "Zl", "Zp")


def shown(ref: str) -> str:
    """A ref name as it may be printed: undecodable bytes as `\\xNN`, controls spelled out."""
    return visible(ref.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace"))


def _component_problem(component: str) -> str | None:
    if not component:
        return "has an empty component (a leading, trailing or doubled '/')"
    if component.startswith("."):
        return "has a component starting with '.'"
    if component.endswith(".lock"):
        return "has a component ending with '.lock'"
    if len(component.encode("utf-8")) > MAX_COMPONENT_BYTES:
        return f"has a component longer than {MAX_COMPONENT_BYTES} bytes"
    return None


def _character_problem(name: str) -> str | None:
    for ch in name:
        if ch in " ~^:?*[\\":
            return f"contains {ch!r}"
        if unicodedata.category(ch) in ODD_CATEGORIES:
            return f"contains the character U+{ord(ch):04X}"
    for sequence in ("..", "@{"):
        if sequence in name:
            return f"contains {sequence!r}"
    return None


def ref_problem(name: str) -> str | None:
    """Why `name` is not a full ref name to accept, or None. `name` is decoded with
    surrogateescape, so bytes that are not UTF-8 arrive here and are refused."""
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return "is not valid UTF-8"
    if size > MAX_REF_BYTES:
        return f"is longer than {MAX_REF_BYTES} bytes"
    if not name.startswith("refs/"):
        return "is not under refs/"
    if name.endswith("."):
        return "ends with '.'"
    if name == "refs/heads/HEAD":
        return "is the branch HEAD, which git reads as the symbolic HEAD"
    problem = _character_problem(name)
    for component in name.split("/"):
        problem = problem or _component_problem(component)
    return problem


def fold(name: str) -> str:
    """`name` as a case-insensitive, normalising file system sees it (macOS, Windows):
    compatibility-decomposed, combining marks and invisible characters dropped, case-folded."""
    text = unicodedata.normalize("NFKD", name)
    text = "".join(ch for ch in text if unicodedata.category(ch) not in ("Mn", "Cf"))
    return text.casefold()


def refname_problem(value: str) -> str | None:  # noqa: PLR0911 — one return per check-ref-format rule, naming it
    """Why `value` cannot be one git refname component (plus: no '/'), or None.

    Mirrors `git check-ref-format` for a single component.
    """
    if not value:
        return "is empty"
    if "/" in value:
        return "contains '/'"
    if value.startswith("."):
        return "starts with '.'"
    if value.endswith(".lock"):
        return "ends with '.lock'"
    if value.endswith("."):
        return "ends with '.'"
    if ".." in value:
        return "contains '..'"
    if "@{" in value:
        return "contains '@{'"
    if value == "@":
        return "is '@'"
    for ch in value:
        if ord(ch) < 0x20 or ord(ch) == 0x7F:
            return "contains a control character"
        if ch in " ~^:?*[\\":
            return f"contains {ch!r}"
    if len(value) > 200:
        return "is longer than 200 characters"
    return None
