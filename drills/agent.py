"""A stand-in coding agent for the pause drill: `python -m drills.agent …`.

It holds its contract, commits its work on the contract's base, says it is ready, and
submits as soon as its work is "done" (the `--go` file appears). The drill SIGSTOPs it in
between, like a garbage-collection pause or a suspended laptop: when it is continued, it
goes on exactly where it was, with the authority it cached — which is the point.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from drills.repo import environment, make_commit


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m drills.agent")
    parser.add_argument("--repo", required=True, type=Path)
    parser.add_argument("--spool", required=True, type=Path)
    parser.add_argument("--contract", required=True, type=Path)
    parser.add_argument("--files", required=True, help="JSON object: path -> new content")
    parser.add_argument("--ready", required=True, type=Path, help="written with the candidate")
    parser.add_argument("--go", required=True, type=Path, help="submit once this exists")
    parser.add_argument("--out", required=True, type=Path, help="the submit output (JSON)")
    args = parser.parse_args(argv)
    contract = json.loads(args.contract.read_text())
    candidate = make_commit(
        args.repo,
        json.loads(args.files),
        parent=contract["baseCommit"],
        message=f"{contract['lease']['holder']}: work for {contract['taskId']}",
    )
    tmp = args.ready.with_suffix(".tmp")
    tmp.write_text(candidate + "\n")
    tmp.replace(args.ready)
    while not args.go.exists():
        time.sleep(0.01)
    argv = [sys.executable, "-m", "integrator", "submit", "--spool", str(args.spool)]
    argv += ["--contract", str(args.contract), "--candidate", candidate]
    argv += ["--repo", str(args.repo), "--wait", "60", "--json"]
    proc = subprocess.run(argv, capture_output=True, env=environment(), check=False)
    args.out.write_bytes(proc.stdout)
    args.out.with_suffix(".err").write_bytes(proc.stderr)
    return proc.returncode


if __name__ == "__main__":
    raise SystemExit(main())
