"""The names of the report formats, without the renderers (`gate --help` lists them)."""

from __future__ import annotations

FORMATS: tuple[str, ...] = ("text", "json", "github", "sarif", "junit", "codequality")
