"""Where a guide of the project is on this machine, for texts that point a reader at one.

The guides are `docs/*.md` of the source tree; a wheel installs them under
`<prefix>/share/doc/integrator/docs/` (pyproject.toml, data-files). A help text names the
copy that is there, so an installed command never points at a path only a clone has.
"""

from __future__ import annotations

import sys
from pathlib import Path

SOURCE = Path(__file__).resolve().parent.parent / "docs"
INSTALLED = Path(sys.prefix) / "share" / "doc" / "integrator" / "docs"


def doc(name: str) -> str:
    """The path of guide `name` (`validation.md`, `rollout.md`, …) as a reader can open it:
    the source tree's, else the installed copy, else the name in the project's sources."""
    for folder in (SOURCE, INSTALLED):
        if (folder / name).is_file():
            return str(folder / name)
    return f"docs/{name} of the integrator sources"
