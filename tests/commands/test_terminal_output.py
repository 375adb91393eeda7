"""What agents write never drives a person's terminal: every human-facing output spells out
control and format characters (an escape could erase the line above, hiding an added line;
a bidirectional override could reorder what is read)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

from integrator.documents.submission import Submitter
from tests.daemon_world import World, hand_over, key_for, submission
from tests.gitutil import run_integrator

ERASE_ABOVE = "\x1b[1A\x1b[2K"  # cursor up one line, erase it
REORDER = "\u202e"  # right-to-left override


def _run(*args: str) -> str:
    done = run_integrator(*args, errors="replace")
    return done.stdout + done.stderr


def _assert_inert(out: str) -> None:
    assert "\x1b" not in out and REORDER not in out, out
    assert "\\x1b[1A" in out  # the escape is shown, spelled out


def test_review_show_and_list_spell_out_what_agents_wrote(world: World) -> None:
    """A patch line, a submitter's name and host, and a commit message carrying terminal
    escapes show as text in `review show` and `review list`."""
    data, oid = world.candidate(
        "t", {f"elsewhere/x{REORDER}.txt": f"added line\n{ERASE_ABOVE}looks harmless\n"}
    )
    sent = submission(json.loads(data), oid)
    hostile = sent.model_copy(
        update={"submitter": Submitter(user=f"agent{ERASE_ABOVE}", host=f"host{REORDER}")}
    )
    sid = world.spool.submit(hostile, key=key_for(world.repo, json.loads(data)))
    world.once()
    assert world.spool.entries("fenced") == [sid]
    shown = _run("review", "show", sid, "--spool", str(world.spool.root))
    _assert_inert(shown)
    assert "\\u202e" in shown
    listed = _run("review", "list", "--spool", str(world.spool.root))
    assert "\x1b" not in listed and REORDER not in listed


def test_contract_show_and_errors_spell_out_what_they_quote(world: World, tmp_path: Path) -> None:
    """A lease holder with escapes (`contract show`) and an error quoting a task id argument
    are spelled out too."""
    with world.canonical() as canonical:
        from integrator.records.claims import Claims, IssueRequest

        Claims(canonical).issue(
            IssueRequest(
                task_id="held",
                paths=("held/**",),
                holder=f"agent{ERASE_ABOVE}",
                lease=timedelta(hours=1),
            )
        )
    shown = _run("contract", "show", "--repo", str(world.repo), "--task", "held")
    _assert_inert(shown)
    error = _run("contract", "show", "--repo", str(world.repo), "--task", f"x{ERASE_ABOVE}")
    assert "\x1b" not in error


def test_submit_wait_spells_out_the_verdict(world: World, tmp_path: Path) -> None:
    """`submit --wait` prints the daemon's verdict with the violating path spelled out."""
    data, oid = world.candidate("w", {f"other/{ERASE_ABOVE}.txt": "x\n"})
    contract = tmp_path / "w.json"
    hand_over(world.repo, data, contract)
    served = world.serve()
    out = _run(
        "submit", "--spool", str(world.spool.root), "--contract", str(contract),
        "--candidate", oid, "--repo", str(world.repo), "--wait", "30",
    )  # fmt: skip
    served.proc.terminate()
    served.wait()
    assert "FENCED" in out
    _assert_inert(out)
