"""Moving one category between observe and enforce: `integrator policy observe|enforce`.

The policy is the coordinator's TOML, comments and all, so a mode change edits that text
in place (`[enforcement]`, the category's line) rather than printing a new document, then
proves the edit: the result must parse, say the new mode, and differ from the old policy in
nothing else. The change itself is a `policy set` — generation + 1 and every unconsumed
contract revoked in the same ref transaction — with the category, the mode and the reason
in the policy commit's message, so `git log refs/integrator/policy` tells the story.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from integrator.documents.categories import Category
from integrator.documents.policy import Mode, PolicyState, parse_policy
from integrator.errors import ConfigurationError, UsageError
from integrator.limits import REASON_CHARS
from integrator.records.canonical import Canonical
from integrator.records.policy_ref import set_policy

_TABLE = re.compile(r"^\s*\[\s*(?P<name>[^\[\]]+?)\s*\]\s*(?:#.*)?$")
_ARRAY_TABLE = re.compile(r"^\s*\[\[")


def _value_line(category: str) -> re.Pattern[str]:
    return re.compile(
        rf"^(?P<lead>\s*{category}\s*=\s*)(?:\"[^\"\\]*\"|'[^']*')(?P<rest>\s*(?:#.*)?)$"
    )


def with_mode(text: str, category: Category, mode: Mode) -> str:
    """`text` with `[enforcement] <category> = "<mode>"`, every other line as written.

    ConfigurationError when the policy spells its enforcement in a way a line edit cannot
    change safely (an inline table, dotted keys): edit the file and use `policy set`.
    """
    lines = text.splitlines(keepends=True)
    pattern = _value_line(category.value)
    table: str | None = None
    header: int | None = None
    for n, line in enumerate(lines):
        body = line.rstrip("\r\n")
        found = _TABLE.match(body)
        if found is not None or _ARRAY_TABLE.match(body):
            table = found.group("name") if found is not None else None
            if table == "enforcement":
                header = n
            continue
        if table != "enforcement":
            continue
        value = pattern.match(body)
        if value is not None:
            ending = line[len(body) :]
            lines[n] = f'{value.group("lead")}"{mode}"{value.group("rest")}{ending}'
            return _proved(text, "".join(lines), category, mode)
    if header is not None:
        lines.insert(header + 1, f'{category.value} = "{mode}"\n')
        edited = "".join(lines)
    else:
        edited = text + ("" if text.endswith("\n") or not text else "\n")
        edited += f'\n[enforcement]\n{category.value} = "{mode}"\n'
    return _proved(text, edited, category, mode)


def _proved(before: str, after: str, category: Category, mode: Mode) -> str:
    """`after`, once it is shown to be `before` with only that one mode changed."""
    old = parse_policy(before, source="the live policy")
    try:
        new = parse_policy(after, source="the edited policy")
    except ConfigurationError as err:
        raise _cannot(category, str(err)) from err
    expected = old.model_copy(
        update={"enforcement": old.enforcement.model_copy(update={category.value: mode})}
    )
    if new.mode_for(category) != mode or new.model_dump() != expected.model_dump():
        raise _cannot(category, "the edit would change more than that one mode")
    return after


def _cannot(category: Category, why: str) -> ConfigurationError:
    return ConfigurationError(
        f"cannot switch {category.value} by editing the live policy ({why}); write the "
        "policy with the mode you want and run `integrator policy set FILE`"
    )


@dataclass(frozen=True)
class ModeChange:
    """What `policy observe|enforce` did: the policy now in force and the claims revoked."""

    category: Category
    mode: Mode
    changed: bool
    state: PolicyState
    revoked: tuple[str, ...] = ()


def change_mode(
    canonical: Canonical, category: Category, mode: Mode, reason: str, actor: str
) -> ModeChange:
    """Switch `category` to `mode` as a policy change (generation + 1, live claims
    revoked); nothing at all when it is in that mode already."""
    if not reason.strip() or len(reason) > REASON_CHARS:
        raise UsageError(f"a mode change needs a --reason of at most {REASON_CHARS} characters")
    canonical.refresh()
    if not canonical.initialized:
        raise ConfigurationError(f"{canonical.path} has no policy ref; run integrator init")
    live = canonical.policy_state()
    if live.policy.mode_for(category) == mode:
        return ModeChange(category, mode, False, live)
    text = with_mode(live.text, category, mode)
    why = f"{category.value} → {mode} by {actor}: {reason}"
    state, revoked = set_policy(canonical, text, event=f"{mode} {category.value}", reason=why)
    return ModeChange(category, mode, True, state, tuple(revoked))
