"""Codex `apply_patch` bodies, read exactly as Codex reads them, and the patches a shell
command hands to `apply_patch`.

The write guard must name every path a patch touches, so it parses headers by Codex's own
rules (codex-rs/apply-patch, lenient mode, checked against the real binary; docs/agents.md):

- The whole text is trimmed, then split on `\\n` only (one `\\r` before each `\\n` dropped):
  a lone `\\r`, U+2028, U+0085 or \\x1c do not end a line, so they cannot smuggle a header
  past a reader that splits more eagerly.
- Trimming uses Rust's Unicode White_Space set, which is not Python's `str.strip`: Python
  also strips U+001C..U+001F, which Codex keeps (a `\\x1c*** Add File:` line is no header).
- `*** Begin Patch` / `*** End Patch` (first and last line) and the `*** Add/Delete/Update
  File: ` header lines are trimmed; the path is the rest of the line, leading spaces kept.
  `*** Move to: ` counts only at column 0 of the line right after `*** Update File:`.
- A heredoc wrapper (`<<EOF`, `<<'EOF'`, `<<"EOF"` … a last line ending in `EOF`) is
  unwrapped; no other tag is.
- Paths may be absolute, climb with `..`, or start with `~` (Codex expands it to $HOME);
  `..` is folded lexically before the file system is asked anything, as Codex does.

Anything that does not parse raises PatchError: the guard denies what it cannot read.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal, NamedTuple

# Rust's `char::is_whitespace` (Unicode White_Space), which `str::trim` removes.
RUST_WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680"
    + "".join(chr(c) for c in range(0x2000, 0x200B))
    + "\u2028\u2029\u202f\u205f\u3000"
)
BEGIN = "*** Begin Patch"
END = "*** End Patch"
ADD = "*** Add File: "
DELETE = "*** Delete File: "
UPDATE = "*** Update File: "
MOVE = "*** Move to: "
END_OF_FILE = "*** End of File"
HEREDOC_OPENERS = ("<<EOF", "<<'EOF'", '<<"EOF"')


class PatchError(ValueError):
    """The text is not a patch Codex would apply; the guard denies it."""


class Hunk(NamedTuple):
    kind: Literal["add", "delete", "update"]
    path: str
    move_to: str | None = None

    def paths(self) -> tuple[str, ...]:
        return (self.path,) if self.move_to is None else (self.path, self.move_to)


def rust_trim(text: str) -> str:
    return text.strip(RUST_WHITESPACE)


def rust_lines(text: str) -> list[str]:
    """Rust's `str::lines`: split on `\\n`, drop one `\\r` before it, no empty last line."""
    if not text:
        return []
    parts = text.split("\n")
    if parts[-1] == "":
        parts.pop()
    return [p[:-1] if p.endswith("\r") else p for p in parts]


def _strict(lines: list[str]) -> list[str]:
    first = rust_trim(lines[0]) if lines else None
    last = rust_trim(lines[-1]) if lines else None
    if first == BEGIN and last == END and len(lines) >= 2:
        return lines[1:-1]
    if first is not None and first != BEGIN:
        raise PatchError(f"the first line of the patch must be {BEGIN!r}")
    raise PatchError(f"the last line of the patch must be {END!r}")


def _body(lines: list[str]) -> list[str]:
    try:
        return _strict(lines)
    except PatchError:
        if len(lines) >= 4 and lines[0] in HEREDOC_OPENERS and lines[-1].endswith("EOF"):
            return _strict(lines[1:-1])
        raise


def _chunk(lines: list[str], line_number: int, *, first: bool) -> int:
    """Lines one update chunk takes (Codex's parse_update_file_chunk)."""
    if lines[0] == "@@" or lines[0].startswith("@@ "):
        start = 1
    elif first:
        start = 0
    else:
        raise PatchError(f"line {line_number}: expected an update chunk to start with '@@'")
    if start >= len(lines):
        raise PatchError(f"line {line_number + 1}: the update chunk has no lines")
    taken = 0
    for line in lines[start:]:
        if line == END_OF_FILE:
            if taken == 0:
                raise PatchError(f"line {line_number + 1}: the update chunk has no lines")
            taken += 1
            break
        if line == "" or line[0] in " +-":
            taken += 1
            continue
        if taken == 0:
            raise PatchError(f"line {line_number + 1}: unexpected line in an update chunk")
        break
    return taken + start


def _hunk(lines: list[str], line_number: int) -> tuple[Hunk, int]:
    header = rust_trim(lines[0])
    if header.startswith(ADD):
        taken = 1
        while taken < len(lines) and lines[taken].startswith("+"):
            taken += 1
        return Hunk("add", header[len(ADD) :]), taken
    if header.startswith(DELETE):
        return Hunk("delete", header[len(DELETE) :]), 1
    if not header.startswith(UPDATE):
        raise PatchError(f"line {line_number}: {header[:80]!r} is not a valid hunk header")
    path = header[len(UPDATE) :]
    rest, taken = lines[1:], 1
    move_to = None
    if rest and rest[0].startswith(MOVE):
        move_to, rest, taken = rest[0][len(MOVE) :], rest[1:], taken + 1
    chunks = 0
    while rest:
        if rust_trim(rest[0]) == "":
            rest, taken = rest[1:], taken + 1
            continue
        if rest[0].startswith("*"):
            break
        used = _chunk(rest, line_number + taken, first=chunks == 0)
        chunks += 1
        rest, taken = rest[used:], taken + used
    if chunks == 0:
        raise PatchError(f"line {line_number}: the update of {path[:80]!r} is empty")
    return Hunk("update", path, move_to), taken


def parse_patch(text: str) -> list[Hunk]:
    """Every hunk of an `apply_patch` body, as Codex's lenient parser reads it."""
    body = _body(rust_lines(rust_trim(text)))
    hunks: list[Hunk] = []
    index = 0
    while index < len(body):
        hunk, used = _hunk(body[index:], index + 2)
        hunks.append(hunk)
        index += used
    return hunks


def lexical(path: str) -> str:
    """An absolute path with `.`, `..` and repeated slashes folded without touching the
    file system (Codex's AbsolutePathBuf; Node's path.resolve folds the same way)."""
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
        else:
            parts.append(part)
    return "/" + "/".join(parts)


def resolve(path: str, base: Path, *, home: str | None = None) -> str:
    """Where `path`, given relative to `base`, lands with `~` and `~/…` read as $HOME (how
    Codex's own patch runtime resolves it); other paths are joined and folded."""
    home = os.environ.get("HOME") if home is None else home
    if home and is_home_path(path):
        path = home + "/" + path[1:].lstrip("/")
    joined = path if path.startswith("/") else f"{base}/{path}"
    return lexical(joined)


def is_home_path(path: str) -> bool:
    return path == "~" or path.startswith("~/")


def readings(path: str, base: Path, *, home: str | None = None) -> list[str]:
    """Every place a patch path may land: a `~` path is $HOME to Codex's runtime but a
    folder named `~` to the standalone `apply_patch` program (measured), so both count."""
    found = [resolve(path, base, home=home)]
    if is_home_path(path):
        found.append(lexical(f"{base}/{path}"))
    return list(dict.fromkeys(found))
