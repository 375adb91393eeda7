"""Whether a string can be one component of a git ref name (`git check-ref-format`).

Kept apart from the contract models so that readers which only need this rule (the write
guard, the intake) do not load pydantic.
"""

from __future__ import annotations


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
