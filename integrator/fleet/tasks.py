"""Task files: Markdown with a front matter of ownership, and a self-contained brief.

```
---
id: TASK-001
type: implementation
owns: [src/payments/**, tests/payments/**]
resources: [api:Invoice.v2]
blocked-by: [TASK-000]
requires_filesystem: true
---
# Implement the Stripe webhook handler
...
```

The front matter is the small YAML subset task files need, parsed by hand so no YAML
dependency is added: `key: value` scalars (bare, or '…'/"…" quoted), `true`/`false`,
inline lists `[a, b]` and block lists of `- item` lines, `#` comments. Anything else —
nested maps, anchors, multi-line strings, an unknown key — is an error that names the line,
because a key we silently ignored could be the one that says what a task may write.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from integrator import paths
from integrator.documents.contract import Resource
from integrator.errors import UsageError
from integrator.limits import TASK_FILE_BYTES, TASK_TYPE_CHARS
from integrator.refnames import refname_problem

TASK_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_KEY_RE = re.compile(r"^(?P<key>[A-Za-z_][A-Za-z0-9_-]*)\s*:(?:\s+(?P<value>.*))?$")
_HINTS = {
    "scope": "write the paths the task writes as `owns`",
    "blocked_by": "the key is spelled `blocked-by`",
    "blockedBy": "the key is spelled `blocked-by`",
    "requires-filesystem": "the key is spelled `requires_filesystem`",
    "requiresFilesystem": "the key is spelled `requires_filesystem`",
}


class TaskFileError(UsageError):
    """A task file does not parse or validate; `str(err)` names the file and the line."""


def _task_id(value: str) -> str:
    # Ids name files (`<id>.md`, `<id>@<agent>.md`) and claim refs, so keep them plain.
    if not TASK_ID_RE.match(value) or value.endswith(".lock") or ".." in value:
        raise ValueError(
            f"{value!r} is not a task id: use letters, digits, '.', '_' and '-' "
            "(starting with a letter or digit, at most 100 characters)"
        )
    return value


def _owned(value: str) -> str:
    problem = paths.glob_problem(value)
    if problem:
        raise ValueError(f"owns pattern {value!r}: {problem}")
    return paths.normalize(value)


def _workspace(value: str) -> str:
    problem = refname_problem(value)
    if problem:
        raise ValueError(f"workspace {value!r} {problem}")
    return value


TaskId = Annotated[str, AfterValidator(_task_id)]


class TaskFrontMatter(BaseModel):
    """The front matter of a task file (`task.v1`); unknown keys are rejected."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")

    id: TaskId = Field(description="Unique task id; also the inbox file name `<id>.md`.")
    type: Annotated[str, Field(min_length=1, max_length=TASK_TYPE_CHARS)] = Field(
        default="task", description="Free-form kind (implementation, review, research, ...)."
    )
    owns: list[Annotated[str, AfterValidator(_owned)]] = Field(
        default_factory=list,
        description="Paths or gitignore-style globs the task writes (its complete write set, "
        "not just the files it means to edit). Required when the task writes files.",
    )
    resources: list[Resource] = Field(
        default_factory=list, description="Semantic resources (`kind:name`) the task changes."
    )
    blocked_by: list[TaskId] = Field(
        default_factory=list, alias="blocked-by", description="Tasks that must be done first."
    )
    blocking: list[TaskId] = Field(
        default_factory=list, description="Tasks that wait for this one (the inverse edge)."
    )
    requires_filesystem: bool = Field(
        default=False,
        description="True when the task mutates the working tree; such a task runs with lock "
        "mode `exclusive` in a workspace bound to its contract. False (the default): lock "
        "mode `none`, no workspace, no contract.",
    )
    workspace: Annotated[str, AfterValidator(_workspace)] | None = Field(
        default=None,
        description="Explicit workspace binding; wins over the agent's and the project's, "
        "and makes the task exclusive.",
    )


@dataclass(frozen=True)
class Task:
    """A parsed task file: its front matter, its brief, and where it was read from."""

    meta: TaskFrontMatter
    body: str
    source: Path | None = None

    @property
    def id(self) -> str:
        return self.meta.id

    @property
    def writes(self) -> bool:
        """Does the task mutate files (and so need a workspace and a contract)?"""
        return self.meta.requires_filesystem or self.meta.workspace is not None

    @property
    def title(self) -> str:
        for line in self.body.splitlines():
            stripped = line.strip()
            if stripped.startswith("#"):
                return stripped.lstrip("#").strip()
            if stripped:
                return stripped[:120]
        return self.id


def ownership_problem(task: Task) -> str | None:
    """Why the task cannot run unattended as cut, or None when it can."""
    owns = task.meta.owns
    if task.writes and not owns:
        return (
            f"task {task.id} writes files but declares no `owns`: the task is not yet "
            "decomposed enough to run unattended; list the paths it writes, or split it"
        )
    if owns and not task.writes:
        return (
            f"task {task.id} declares `owns` but not `requires_filesystem: true`: set it "
            "(the task writes) or drop `owns` (the task is cognitive)"
        )
    for pattern in owns:
        if _whole_repository(pattern):
            return (
                f"task {task.id} owns {pattern!r}, (nearly) the whole repository: the task is not yet "
                "decomposed enough; list the folders it writes (a repo-wide formatter run "
                "is its own task with the folders it formats)"
            )
    return None


def _whole_repository(pattern: str) -> bool:
    """Whether `pattern` owns (nearly) everything: the root and below it, or every folder.

    Probed with made-up paths no real task names: a pattern that covers files under two
    arbitrary top-level folders (`*/**`, `**/`, `[a-z]*/**`) does not say where the task
    writes any more than `**` does.
    """
    covers = paths.PathMatcher.of([pattern]).covers
    root_and_below = covers("integrator-probe") and covers("a/integrator-probe.x")
    every_folder = covers("integrator-probe-a/x.y") and covers("integrator-probe-b/c/d.z")
    return root_and_below or every_folder


# --- the front-matter subset --------------------------------------------------------------


def _split_front_matter(text: str, where: str) -> tuple[list[str], str, int]:
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise TaskFileError(f"{where}: a task file starts with a '---' line (front matter)")
    for index in range(1, len(lines)):
        if lines[index].strip() == "---":
            body = "\n".join(lines[index + 1 :]).strip("\n")
            return lines[1:index], body + ("\n" if body else ""), 2
    raise TaskFileError(f"{where}: the front matter has no closing '---' line")


def _strip_comment(value: str) -> str:
    quote: str | None = None
    for index, ch in enumerate(value):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (index == 0 or value[index - 1] in " \t"):
            return value[:index].rstrip()
    return value.strip()


def _scalar(raw: str, where: str) -> Any:
    value = raw.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    if value[:1] in ("'", '"'):
        raise TaskFileError(f"{where}: unterminated quote in {value!r}")
    if value in ("true", "false"):
        return value == "true"
    if value in ("null", "~"):
        return None
    # A leading `*` would be a YAML alias; here it is far more likely a glob, so it stays.
    if value[:1] in ("{", "&", "|", ">", "!"):
        raise TaskFileError(
            f"{where}: {value!r} uses YAML beyond the task-file subset "
            "(scalars, [inline] lists and '- item' lists)"
        )
    return value


def _inline_list(raw: str, where: str) -> list[Any]:
    inner = raw.strip()[1:-1].strip()
    if not inner:
        return []
    items: list[str] = []
    current: list[str] = []
    quote: str | None = None
    for ch in inner:
        if quote:
            current.append(ch)
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
            current.append(ch)
        elif ch == ",":
            items.append("".join(current))
            current = []
        elif ch in "[]":
            raise TaskFileError(f"{where}: nested lists are not supported")
        else:
            current.append(ch)
    if quote:
        raise TaskFileError(f"{where}: unterminated quote in list {raw.strip()!r}")
    items.append("".join(current))
    if any(not item.strip() for item in items):
        raise TaskFileError(f"{where}: empty item in list {raw.strip()!r}")
    return [_scalar(item, where) for item in items]


def parse_front_matter(lines: list[str], where: str, first_line: int = 2) -> dict[str, Any]:
    """The raw key/value mapping of the supported YAML subset (no validation of keys).

    `key:` followed by `- item` lines is a list; `key:` with nothing below it is no value.
    """
    data: dict[str, Any] = {}
    seen: set[str] = set()
    open_key: str | None = None
    for offset, raw_line in enumerate(lines):
        at = f"{where}:{first_line + offset}"
        line = _strip_comment(raw_line.rstrip())
        if not line.strip():
            continue
        item = line.strip()
        if raw_line[:1] in (" ", "\t") or item == "-" or item.startswith("- "):
            if open_key is None or not item.startswith("-") or not item[1:].strip():
                raise TaskFileError(f"{at}: unexpected line {raw_line.strip()!r}")
            data.setdefault(open_key, []).append(_scalar(item[1:], at))
            continue
        match = _KEY_RE.match(line)
        if match is None:
            raise TaskFileError(f"{at}: expected `key: value`, got {raw_line.strip()!r}")
        key, value = match.group("key"), (match.group("value") or "").strip()
        if key in seen:
            raise TaskFileError(f"{at}: key {key!r} appears twice")
        seen.add(key)
        open_key = None
        if not value:
            open_key = key
        elif value.startswith("["):
            if not value.endswith("]"):
                raise TaskFileError(f"{at}: list {value!r} has no closing ']'")
            data[key] = _inline_list(value, at)
        else:
            data[key] = _scalar(value, at)
    return data


def _render(err: ValidationError, where: str) -> str:
    known = sorted(field.alias or name for name, field in TaskFrontMatter.model_fields.items())
    problems = []
    for item in err.errors():
        key = ".".join(str(p) for p in item["loc"]) or "(front matter)"
        if item["type"] == "extra_forbidden":
            hint = _HINTS.get(str(item["loc"][0]), "known keys: " + ", ".join(known))
            problems.append(f"unknown key {key!r} ({hint})")
        elif item["type"] == "missing":
            problems.append(f"{key}: required")
        else:
            problems.append(f"{key}: {item['msg'].removeprefix('Value error, ')}")
    return f"{where}: " + "; ".join(problems)


def parse_task(text: str, source: Path | None = None) -> Task:
    """Parse one task file; raises TaskFileError naming the file, line or key at fault."""
    where = str(source) if source else "task"
    if len(text) > TASK_FILE_BYTES:
        raise TaskFileError(f"{where}: more than the limit of {TASK_FILE_BYTES} characters")
    lines, body, first = _split_front_matter(text, where)
    data = {k: v for k, v in parse_front_matter(lines, where, first).items() if v is not None}
    try:
        meta = TaskFrontMatter.model_validate(data)
    except ValidationError as err:
        raise TaskFileError(_render(err, where)) from err
    return Task(meta, body, source)


def load_task(path: Path) -> Task:
    try:
        size = path.stat().st_size
        if size > TASK_FILE_BYTES:
            raise TaskFileError(
                f"task file {path} is {size} bytes, more than the limit of {TASK_FILE_BYTES}"
            )
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise TaskFileError(f"cannot read task file {path}: {err}") from err
    return parse_task(text, path)


def render_task(meta: TaskFrontMatter, body: str) -> str:
    """A task file for `meta` and `body`, in the subset `parse_task` reads back."""
    out = ["---", f"id: {meta.id}", f"type: {_quote(meta.type)}"]
    for key, values in (
        ("owns", meta.owns),
        ("resources", meta.resources),
        ("blocked-by", meta.blocked_by),
        ("blocking", meta.blocking),
    ):
        if values:
            out.append(f"{key}: [{', '.join(_quote(v) for v in values)}]")
    out.append(f"requires_filesystem: {'true' if meta.requires_filesystem else 'false'}")
    if meta.workspace:
        out.append(f"workspace: {meta.workspace}")
    out.append("---")
    return "\n".join(out) + "\n" + body


def _quote(value: str) -> str:
    if re.fullmatch(r"[A-Za-z0-9_./*:@+-][A-Za-z0-9_./*:@+ -]*", value) and not value.endswith(" "):
        return value
    return '"' + value + '"' if '"' not in value else "'" + value + "'"
