"""Reading what `git cat-file --batch` prints (the hook and the write guard read several
objects in one git process)."""

from __future__ import annotations


def batch_objects(output: bytes, count: int) -> list[bytes | None]:
    """The contents `git cat-file --batch` printed for `count` requests (None: missing);
    ValueError when the output ends early."""
    out: list[bytes | None] = []
    pos = 0
    for _ in range(count):
        end = output.index(b"\n", pos)
        header = output[pos:end].split(b" ")
        pos = end + 1
        if len(header) != 3 or not header[2].isdigit():
            out.append(None)  # "<spec> missing" (or ambiguous): nothing follows
            continue
        size = int(header[2])
        out.append(output[pos : pos + size])
        pos += size + 1  # the content, then a newline
    return out
