"""Escaping data for the screens and formats that show it.

Paths, commit messages, contract text and submitter names come from agents: on a terminal
a control character can move the cursor or erase a line (hiding an added line of a patch),
a bidirectional override can reorder what is read. Everything shown to a person passes
through `visible` first; XML gets `xml_safe` for what XML 1.0 cannot carry.
"""

from __future__ import annotations

import sys
import unicodedata
from typing import Any


def visible(text: str, *, keep_newlines: bool = False, keep_tabs: bool = False) -> str:
    """`text` with control and format characters spelled out, so a path cannot drive a
    terminal (ANSI escapes) or hide itself (bidirectional overrides)."""
    out: list[str] = []
    for ch in text:
        if (ch == "\n" and keep_newlines) or (ch == "\t" and keep_tabs):
            out.append(ch)
        elif unicodedata.category(ch) in ("Cc", "Cf", "Cs"):
            cp = ord(ch)
            out.append(f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}")
        else:
            out.append(ch)
    return "".join(out)


def xml_safe(text: str) -> str:
    """`text` with the characters XML 1.0 cannot carry spelled out (ElementTree would write
    them raw and produce a document no parser accepts)."""
    out: list[str] = []
    for ch in text:
        cp = ord(ch)
        allowed = (
            ch in "\t\n\r"
            or 0x20 <= cp <= 0xD7FF
            or 0xE000 <= cp <= 0xFFFD
            or 0x10000 <= cp <= 0x10FFFF
        )
        out.append(ch if allowed else (f"\\x{cp:02x}" if cp < 0x100 else f"\\u{cp:04x}"))
    return "".join(out)


def write_text(text: str, stream: Any = None, encoding: str | None = None) -> None:
    """Write `text` to a text stream's bytes (standard output by default), encoded here in
    `encoding` (the stream's own by default): a character that does not encode is spelled
    as a backslash escape instead of failing after the work was done."""
    stream = sys.stdout if stream is None else stream
    buffer = getattr(stream, "buffer", None)
    if buffer is None:  # a text-only stand-in (a test's capture) takes str
        stream.write(text)
        return
    stream.flush()
    buffer.write(
        text.encode(encoding or getattr(stream, "encoding", None) or "utf-8", "backslashreplace")
    )
    buffer.flush()
