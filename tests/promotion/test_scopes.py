"""Validation scopes with real repositories, a real `integrator serve` and real scripts: a
culprit in one scope is bisected and ejected within it while the other scope's landings
are promoted first, each validated once; a path in no scope is tested by every scope."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from integrator.records.canonical import Canonical
from integrator.records.validations import promotions
from tests.gitutil import git
from tests.promotion_world import MARKER, PromotionWorld

# Fails when the scope's own folders hold the marker; logs "<scope> <tree> <landings> pass|fail"
# outside the checkout, so a test counts every run of every scope by itself.
SCOPE_SCRIPT = f"""#!/bin/sh
log="$1"
scope="$INTEGRATOR_VALIDATION_SCOPE"
n=$(echo $INTEGRATOR_VALIDATION_LANDINGS | wc -w)
found=$(find . -path "./$scope*" -name {MARKER} | head -n 1)
if [ -z "$found" ] && [ -e shared/{MARKER} ]; then found=shared/{MARKER}; fi
if [ -n "$found" ]; then
    echo "$scope $INTEGRATOR_VALIDATION_TREE $n fail" >> "$log"
    echo "scope $scope: marker $found"
    exit 1
fi
echo "$scope $INTEGRATOR_VALIDATION_TREE $n pass" >> "$log"
"""


def scoped_policy(world: PromotionWorld, extra: str = "") -> str:
    script = world.tmp / "scope.sh"
    script.write_text(SCOPE_SCRIPT)
    command = f'command = ["sh", "{script}", "{world.log}"]'
    return (
        f"{command}\nmax_batch = 8\n{extra}\n"
        '[[validation.scope]]\nname = "a"\npaths = ["a*/**"]\n\n'
        '[[validation.scope]]\nname = "b"\npaths = ["b*/**"]\n'
    )


def scope_runs(world: PromotionWorld) -> list[tuple[str, str, int, str]]:
    if not world.log.exists():
        return []
    out = []
    for line in world.log.read_text().splitlines():
        scope, tree, n, result = line.split()
        out.append((scope, tree, int(n), result))
    return out


def check_target_clean(world: PromotionWorld) -> None:
    """Every value the target took moves forward and holds no marker."""
    log = world.repo / ".git" / "logs" / "refs" / "heads" / "main"
    moves = [line.split()[1] for line in log.read_text().splitlines()]
    for before, after in itertools.pairwise(moves):
        assert git("merge-base", "--is-ancestor", before, after, cwd=world.repo) == ""
    for oid in moves:
        listing = git("ls-tree", "-r", "--name-only", oid, cwd=world.repo)
        assert MARKER not in {p.rsplit("/", 1)[-1] for p in listing.splitlines()}


def test_a_culprit_in_one_scope_leaves_the_other_scope_promoted_first_and_validated_once(
    promotion: PromotionWorld,
) -> None:
    """Six landings in scope a (a2 breaks it) interleaved with six in scope b: b's six are
    promoted before a2's ejection, b's suite ran exactly once, a2 is FENCED
    VALIDATION_FAILED with its scope named, the other a landings are promoted, and no value
    of the target ever held the marker."""
    world = promotion
    world.set_policy(scoped_policy(world))
    for i in range(6):
        world.submit(f"a{i}", broken=i == 2)
        world.submit(f"b{i}")
    served = world.serve_once()
    assert served.proc.returncode == 0, served.text()
    runs = scope_runs(world)
    b_runs = [r for r in runs if r[0] == "b"]
    assert b_runs == [("b", b_runs[0][1], 12, "pass")]  # one run covered all twelve
    assert [r for r in runs if r[3] == "fail"] and all(r[0] == "a" for r in runs if r[3] == "fail")
    on_target = world.chain("refs/heads/main")
    expected = {h for t, h in world.heads.items() if t != "a2"}
    assert set(on_target) == expected
    check_target_clean(world)
    with Canonical(world.repo) as canonical:
        records = [r for _, r in reversed(promotions(canonical, "main"))]
    actions = [r.action for r in records]
    assert actions.index("reorder") < actions.index("eject")
    first_promote = next(r for r in records if r.action == "promote")
    assert {c.task_id for c in first_promote.landings} == {f"b{i}" for i in range(6)}
    assert actions.index("promote") < actions.index("eject")  # b promoted before a2's ejection
    ejection = next(r for r in records if r.action == "eject")
    (culprit,) = ejection.ejected
    assert culprit.task_id == "a2" and culprit.code.value == "VALIDATION_FAILED"
    assert culprit.scope == "a" and culprit.failed_runs == 1 and culprit.flaky_seen is False
    assert world.spool.entries("fenced") == [world.sids["a2"]]
    served_events = served.events("validation.run")
    assert len(served_events) == len(runs)
    done = world.cli("queue", "status", "--repo", str(world.repo), "--json")
    assert done.returncode == 0, done.stderr.decode()
    scopes = json.loads(done.stdout)["scopes"]
    assert sorted(scopes) == ["a", "b"]
    assert scopes["b"]["runs"] == 1 and scopes["b"]["cacheHits"] >= 1  # reused after the reorder
    assert scopes["a"]["failedRuns"] >= 2 and scopes["a"]["failureRate"] > 0
    assert scopes["a"]["waiting"] == [] and scopes["a"]["running"] == []


def test_a_path_in_no_scope_is_validated_by_every_scope(promotion: PromotionWorld) -> None:
    """A landing that writes outside every scope's paths belongs to every scope: each
    scope's suite runs on it (and one failing keeps it off the target)."""
    world = promotion
    world.set_policy(scoped_policy(world))
    contract, oid = world.candidate("shared", {"shared/notes.txt": "shared\n"})
    from tests.daemon_world import key_for, submission

    world.sids["shared"] = world.spool.submit(
        submission(contract, oid), key=key_for(world.repo, contract)
    )
    world.submit("a0")
    served = world.serve_once()
    assert served.proc.returncode == 0, served.text()
    scopes = sorted({r[0] for r in scope_runs(world)})
    assert scopes == ["a", "b"]
    assert set(world.chain("refs/heads/main")) == {oid, world.heads["a0"]}


def test_scopes_are_named_in_the_policy_schema(tmp_path: Path) -> None:
    """Two scopes of one name, or scopes in external mode, are refused when parsed."""
    from integrator.documents.policy import parse_policy
    from integrator.errors import ConfigurationError

    twice = (
        'version = 1\n[validation]\ncommand = "true"\n'
        '[[validation.scope]]\nname = "a"\npaths = ["a/**"]\n'
        '[[validation.scope]]\nname = "a"\npaths = ["b/**"]\n'
    )
    external = (
        'version = 1\n[validation]\nmode = "external"\n'
        '[[validation.scope]]\nname = "a"\npaths = ["a/**"]\n'
    )
    for text in (twice, external):
        try:
            parse_policy(text, source=str(tmp_path / "p.toml"))
        except ConfigurationError:
            continue
        raise AssertionError(f"accepted: {text}")
