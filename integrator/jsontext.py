"""Reading JSON someone else wrote: every failure is a ValueError.

`json.loads` raises RecursionError, not ValueError, on a document nested past Python's
recursion limit (`[[[[…]]]]`, 2 kB is enough), and code that catches ValueError for a
malformed document then crashes instead of refusing. Everything integrator reads from an
agent, a submitter, a task folder or a file on disk goes through `loads` here.
"""

from __future__ import annotations

import json
from typing import Any


class JSONInputError(ValueError):
    """A JSON document that cannot be read (malformed, or nested too deeply)."""


def loads(data: str | bytes | bytearray) -> Any:
    """`json.loads`, with RecursionError turned into a ValueError callers already catch."""
    try:
        return json.loads(data)
    except RecursionError as err:
        raise JSONInputError("the JSON document is nested too deeply") from err
