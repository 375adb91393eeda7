"""The categories a policy sorts paths into, without the policy's models (`policy mode
--help` lists them)."""

from __future__ import annotations

from enum import StrEnum


class Category(StrEnum):
    MIGRATIONS = "migrations"
    SCHEMAS = "schemas"
    CODEGEN = "codegen"
    CI = "ci"
    SOURCE = "source"
