"""A spool's metadata file, `spool.json`: the repository its daemon serves (and the name of
its registry mirror, which `history --help` gives).

Read without the spool's own module, so that `integrator status` answered by the daemon
(integrator/daemon/answer.py) finds the spool's repository at the cost of one small read.
"""

from __future__ import annotations

import json
from pathlib import Path

SPOOL_SCHEMA = "integrator.spool.v1"
META_FILE = "spool.json"
META_BYTES = 64 << 10  # spool.json holds a schema and one path
REGISTRY_FILE = "registry.sqlite3"  # the spool's registry mirror (store/mirror.py)


def read_repo(root: Path) -> Path | None:
    """The repository the daemon last served from the spool at `root`, if recorded."""
    try:
        with open(root / META_FILE, "rb") as meta:
            data = meta.read(META_BYTES + 1)
        doc = json.loads(data) if len(data) <= META_BYTES else None
    except (OSError, ValueError):
        return None
    repo = doc.get("repo") if isinstance(doc, dict) else None
    return Path(repo) if isinstance(repo, str) else None
