"""Task files: the front-matter subset, strict keys, and what counts as decomposed."""

from __future__ import annotations

from pathlib import Path

import pytest

from integrator.documents import schemas
from integrator.fleet.tasks import (
    TaskFileError,
    TaskFrontMatter,
    ownership_problem,
    parse_task,
    render_task,
)

EXAMPLE = Path(__file__).parents[2] / "contracts" / "examples" / "task.md"


def task_text(front: str, body: str = "# Title\n\nBrief.\n") -> str:
    return f"---\n{front.strip()}\n---\n{body}"


def test_full_front_matter_parses_every_list_form() -> None:
    """Inline lists, block lists, quotes, comments and booleans all parse to the model."""
    task = parse_task(
        task_text(
            """
id: TASK-001   # the id
type: implementation
owns:
  - src/payments/**
  - "tests/payments/**"
resources: [api:Invoice.v2, 'migration-slot:billing']
blocked-by: [TASK-000]
requires_filesystem: true
workspace: alice
"""
        )
    )
    assert task.id == "TASK-001"
    assert task.meta.owns == ["src/payments/**", "tests/payments/**"]
    assert task.meta.resources == ["api:Invoice.v2", "migration-slot:billing"]
    assert task.meta.blocked_by == ["TASK-000"]
    assert task.meta.requires_filesystem is True
    assert task.meta.workspace == "alice"
    assert task.title == "Title"
    assert task.writes


def test_defaults_make_a_cognitive_task() -> None:
    """A task with only an id is cognitive: no owns, requires_filesystem false, not writing."""
    task = parse_task(task_text("id: T-1"))
    assert task.meta.requires_filesystem is False
    assert task.meta.owns == []
    assert not task.writes
    assert ownership_problem(task) is None


def test_unknown_key_is_rejected_with_a_hint() -> None:
    """A `scope:` key is refused and the error says to write `owns`."""
    with pytest.raises(TaskFileError, match=r"unknown key 'scope' \(write the paths"):
        parse_task(task_text("id: T-1\nscope: src/payments/"))


def test_misspelled_key_names_the_right_spelling() -> None:
    """`blocked_by` is refused with the spelling `blocked-by`."""
    with pytest.raises(TaskFileError, match="spelled `blocked-by`"):
        parse_task(task_text("id: T-1\nblocked_by: [T-0]"))


@pytest.mark.parametrize(
    ("front", "message"),
    [
        ("id: T-1\nid: T-2", "appears twice"),
        ("id: T-1\nowns: {a: b}", "beyond the task-file subset"),
        ("id: T-1\nowns: [a, [b]]", "nested lists"),
        ("id: T-1\nowns: [a", "no closing"),
        ("id: T-1\n  - stray", "unexpected line"),
        ("id: T-1\nrequires_filesystem: yes", "requires_filesystem"),
        ("id: T 1", "not a task id"),
        ("id: T-1\nowns: [../x]", "'..' component"),
        ("id: T-1\nowns: ['!src/**']", "negation"),
        ("id: T-1\nresources: [colour:blue]", "unknown to a v1 reader"),
        ("id: T-1\nworkspace: a/b", "contains '/'"),
        ("type: x", "id: required"),
    ],
)
def test_malformed_front_matter_is_refused(front: str, message: str) -> None:
    """Each malformed front matter fails with a message naming what is wrong."""
    with pytest.raises(TaskFileError, match=message):
        parse_task(task_text(front))


def test_missing_front_matter_is_refused() -> None:
    """A file without the opening and closing '---' is not a task file."""
    with pytest.raises(TaskFileError, match="starts with a '---'"):
        parse_task("# just markdown\n")
    with pytest.raises(TaskFileError, match="no closing"):
        parse_task("---\nid: T-1\n")


def test_writing_task_without_owns_is_not_decomposed() -> None:
    """requires_filesystem without owns is 'not yet decomposed enough'."""
    task = parse_task(task_text("id: T-1\nrequires_filesystem: true"))
    problem = ownership_problem(task)
    assert problem is not None and "not yet decomposed enough" in problem


def test_owning_the_whole_repository_is_not_decomposed() -> None:
    """`owns: ['**']` claims everything and is refused."""
    task = parse_task(task_text("id: T-1\nowns: ['**']\nrequires_filesystem: true"))
    problem = ownership_problem(task)
    assert problem is not None and "whole repository" in problem


@pytest.mark.parametrize("pattern", ["*/**", "/*/**", "**/", "[a-z]*/**", "*"])
def test_owning_every_folder_is_not_decomposed(pattern: str) -> None:
    """A pattern that owns every top-level folder says no more than `**`: refused."""
    task = parse_task(task_text(f"id: T-1\nowns: ['{pattern}']\nrequires_filesystem: true"))
    problem = ownership_problem(task)
    assert problem is not None and "not yet decomposed enough" in problem


@pytest.mark.parametrize("pattern", ["src/**", "/*", "**/*.md", "*/docs/**", "docs/*.md"])
def test_narrow_patterns_are_decomposed(pattern: str) -> None:
    """Folders, root files only, or one kind of file anywhere are fine."""
    task = parse_task(task_text(f"id: T-1\nowns: ['{pattern}']\nrequires_filesystem: true"))
    assert ownership_problem(task) is None


def test_owns_without_requires_filesystem_is_contradictory() -> None:
    """A cognitive task that declares owns must pick one of the two."""
    task = parse_task(task_text("id: T-1\nowns: [src/**]"))
    problem = ownership_problem(task)
    assert problem is not None and "requires_filesystem: true" in problem


def test_explicit_workspace_makes_a_task_writing() -> None:
    """An explicit workspace wins and makes the task exclusive."""
    task = parse_task(task_text("id: T-1\nworkspace: review\nowns: [src/**]"))
    assert task.writes
    assert ownership_problem(task) is None


def test_render_round_trips() -> None:
    """render_task writes a file that parse_task reads back to the same front matter."""
    original = parse_task(
        task_text(
            "id: T-9\ntype: 'bug fix'\nowns: ['src/[ab]/*.py', docs/x.md]\n"
            "blocking: [T-10]\nrequires_filesystem: true"
        )
    )
    again = parse_task(render_task(original.meta, original.body))
    assert again.meta == original.meta
    assert again.body == original.body


def test_schema_and_example_agree() -> None:
    """The task.v1 schema comes from the model and the checked-in example validates."""
    schema = schemas.schema_for("task.v1")
    assert set(schema["properties"]) == {
        "id", "type", "owns", "resources", "blocked-by", "blocking",
        "requires_filesystem", "workspace",
    }  # fmt: skip
    assert schema["additionalProperties"] is False
    example = parse_task(EXAMPLE.read_text("utf-8"), EXAMPLE)
    assert isinstance(example.meta, TaskFrontMatter)
    assert ownership_problem(example) is None
