"""Flaky runs, the result cache and the adaptive window, with real repositories, a real
`integrator serve` and real scripts."""

from __future__ import annotations

import json

from integrator.promotion.scopes import next_window
from integrator.records.canonical import Canonical
from integrator.records.validations import chain, promotions
from tests.daemon_world import key_for, submission
from tests.gitutil import git
from tests.promotion_world import MARKER, TASKS, PromotionWorld

# Logs "<landings covered> pass|fail" outside the checkout; fails on the marker.
COUNTING_SCRIPT = f"""#!/bin/sh
log="$1"
n=$(echo $INTEGRATOR_VALIDATION_LANDINGS | wc -w)
if [ -n "$(find . -name {MARKER} | head -n 1)" ]; then
    echo "$n fail" >> "$log"; exit 1
fi
echo "$n pass" >> "$log"
"""


def test_a_flaky_command_with_flaky_reruns_ejects_nothing_and_is_counted(
    promotion: PromotionWorld,
) -> None:
    """A command failing its first run and passing its rerun on the same tree, with
    `flaky_reruns = 1`: all twelve are promoted, nothing is ejected, the final result is
    marked flaky, and `queue stats --json` counts one flaky run."""
    world = promotion
    counter = world.tmp / "flaky-count"
    world.set_policy(
        world.command("ci/flaky.sh", str(counter)) + f"\nmax_batch = {TASKS}\nflaky_reruns = 1"
    )
    for i in range(TASKS):
        world.submit(f"t{i}")
    served = world.serve_once()
    assert served.proc.returncode == 0, served.text()
    assert sorted(world.chain("refs/heads/main")) == sorted(world.heads.values())
    assert [r for _, r in world.runs()] == ["fail", "pass"]
    assert world.spool.entries("fenced") == []
    with Canonical(world.repo) as canonical:
        (_, record), *_ = promotions(canonical, "main")
        results = [r for _, r in chain(canonical, record.validations[0])]
    assert [(r.status, r.flaky) for r in results if r.status != "running"] == [
        ("fail", False),
        ("pass", True),
    ]
    done = world.cli("queue", "stats", "--repo", str(world.repo), "--json")
    assert done.returncode == 0, done.stderr.decode()
    stats = json.loads(done.stdout)
    assert stats["scopes"]["*"]["flaky"] == 1 and stats["scopes"]["*"]["runs"] == 2
    assert stats["ejections"] == 0 and stats["promoted"] == TASKS
    world.check_target_moves()


def _land(world: PromotionWorld, task: str, text: str) -> str:
    contract, oid = world.candidate(task, {f"{task}/f.txt": text})
    world.sids[task] = world.spool.submit(
        submission(contract, oid), key=key_for(world.repo, contract)
    )
    served = world.serve_once()
    assert served.proc.returncode == 0, served.text()
    return git("rev-parse", "refs/heads/main^{tree}", cwd=world.repo)


def test_a_head_whose_tree_was_validated_before_costs_no_run(promotion: PromotionWorld) -> None:
    """t0's file goes to v1, then v2, then back to v1: the third head's tree is the first
    one's, so its result is read from the cache — two runs for three promotions, one hit."""
    world = promotion
    world.set_policy(world.command() + "\nmax_batch = 1")
    first = _land(world, "t0", "v1\n")
    second = _land(world, "t0", "v2\n")
    third = _land(world, "t0", "v1\n")
    assert first == third != second
    assert len(world.runs()) == 2
    with Canonical(world.repo) as canonical:
        records = [r for _, r in promotions(canonical, "main") if r.action == "promote"]
    assert len(records) == 3
    newest, *_, oldest = records
    assert newest.validations == oldest.validations  # the same result commit, reused
    done = world.cli("queue", "stats", "--repo", str(world.repo), "--json")
    assert json.loads(done.stdout)["scopes"]["*"]["cacheHits"] == 1


def test_the_adaptive_window_grows_after_passes_and_halves_after_failures(
    promotion: PromotionWorld,
) -> None:
    """`adaptive = true`, max_batch 8 (the window starts at 4), 12 landings, the sixth
    broken: the batches covered read 4 (pass → 8), 8 (fail → 4), the bisection's probes 4
    (fail), 2 (fail) and 1 (pass), which leave the window at 4, then after the ejection 4
    (pass → 8) and the last 2."""
    world = promotion
    script = world.tmp / "count.sh"
    script.write_text(COUNTING_SCRIPT)
    world.set_policy(f'command = ["sh", "{script}", "{world.log}"]\nmax_batch = 8\nadaptive = true')
    for i in range(TASKS):
        world.submit(f"t{i}", broken=i == 5)
    served = world.serve_once()
    assert served.proc.returncode == 0, served.text()
    runs = [line.split() for line in world.log.read_text().splitlines()]
    assert [(int(n), r) for n, r in runs] == [
        (4, "pass"), (8, "fail"), (4, "fail"), (2, "fail"), (1, "pass"), (4, "pass"), (2, "pass"),
    ]  # fmt: skip
    assert world.spool.entries("fenced") == [world.sids["t5"]]


def test_next_window_stays_within_one_and_max_batch() -> None:
    """Double after a pass, half after a failure, never below 1 or above max_batch."""
    assert next_window(4, True, 8) == 8
    assert next_window(3, True, 8) == 6
    assert next_window(5, True, 8) == 8
    assert next_window(8, True, 8) == 8
    assert next_window(5, False, 8) == 2
    assert next_window(1, False, 8) == 1
    assert next_window(1, True, 8) == 2
    assert next_window(12, True, 8) == 8


# Fails on the marker; besides, the first run of a head covering two landings fails for
# no reason (a flaky test), once.
PROBE_FLAKE_SCRIPT = f"""#!/bin/sh
log="$1"; flag="$2"
n=$(echo $INTEGRATOR_VALIDATION_LANDINGS | wc -w)
if [ -n "$(find . -name {MARKER} | head -n 1)" ]; then
    echo "$n fail" >> "$log"; exit 1
fi
if [ "$n" = 2 ] && [ ! -e "$flag" ]; then
    touch "$flag"; echo "$n flake" >> "$log"; exit 1
fi
echo "$n pass" >> "$log"
"""


def test_a_probe_that_flakes_is_confirmed_before_it_ejects_anything(
    promotion: PromotionWorld,
) -> None:
    """Four landings, the last broken, `flaky_reruns = 1`: the batch head fails twice (rerun
    at once), the probe at two landings fails once and is not rerun until it would eject
    t1; its confirmation passes (flaky), and only t3 is ejected, its record saying two runs
    failed and that a run of its bisection was flaky."""
    world = promotion
    script = world.tmp / "probe.sh"
    script.write_text(PROBE_FLAKE_SCRIPT)
    flag = world.tmp / "flaked"
    world.set_policy(
        f'command = ["sh", "{script}", "{world.log}", "{flag}"]\nmax_batch = 4\nflaky_reruns = 1'
    )
    for i in range(4):
        world.submit(f"t{i}", broken=i == 3)
    served = world.serve_once()
    assert served.proc.returncode == 0, served.text()
    runs = [tuple(line.split()) for line in world.log.read_text().splitlines()]
    assert runs == [
        ("4", "fail"), ("4", "fail"),  # the batch head, rerun at once: consistent
        ("2", "flake"),  # a probe: its failure narrows the search, not rerun yet
        ("1", "pass"),  # t0 passes and is promoted
        ("1", "pass"),  # t1's head confirmed before it ejects t1: flaky, promoted
        ("1", "pass"),  # t2's head, then t3 (its head failed twice) is ejected
    ]  # fmt: skip
    assert world.spool.entries("fenced") == [world.sids["t3"]]
    assert set(world.chain("refs/heads/main")) == {world.heads[f"t{i}"] for i in range(3)}
    with Canonical(world.repo) as canonical:
        (record,) = [r for _, r in promotions(canonical, "main") if r.action == "eject"]
    (culprit,) = record.ejected
    assert culprit.task_id == "t3" and culprit.failed_runs == 2 and culprit.flaky_seen is True
