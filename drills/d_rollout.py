"""Drill 8: the rollout from start to end, through the real CLI and daemon.

Observe mode first: candidates land while the fence records what it would have stopped,
and `report observe` says migrations are ready. A shadow run with migrations enforced
names exactly the landing it would have fenced. Migrations go to enforce; a legitimate
migration is then blocked (a false block): the release manager marks it, migrations go
back to observe and new claims are paused (an issue is refused, naming the reason); then
claims resume and the contracts the policy changes revoked are reissued one at a time. A
bad landing from the observe week is reverted through the gate: the revert lands, and the
canonical tree at those paths is what it was before. A last shadow run under the live
policy agrees with every recorded decision.

The world's observe-mode landings write paths their contracts do not own — on purpose:
that is what observe mode lets through. The quantitative gates measure the enforcement
stage (every accepted path claimed), so this world's facts are kept apart from them
(`rollout.json` instead of `world.json`); its own checks are the drill's.
"""

from __future__ import annotations

import json
from typing import Any

from drills.context import Context
from drills.harness import World
from drills.registry import drill
from drills.repo import MAIN, git

FILES = {
    "db/migrations/0001_init.sql": "create table invoice (id int);\n",
    "src/billing/invoice.py": "def total(lines):\n    return sum(lines)\n",
    "src/auth/login.py": "def login(user):\n    return user\n",
    "docs/index.md": "# docs\n",
}


def policy(**modes: str) -> str:
    chosen = {
        c: modes.get(c, "observe") for c in ("migrations", "schemas", "codegen", "ci", "source")
    }
    return "\n".join(
        [
            "version = 1",
            "",
            "# The rollout starts with every category observed.",
            "[enforcement]",
            *(f'{c} = "{m}"' for c, m in chosen.items()),
            "",
            "[categories]",
            'migrations = ["db/migrations/**"]',
            "",
            "[[resource]]",
            'paths = ["db/migrations/**"]',
            'resource = "migration-slot:{path}"',
            "",
        ]
    )


def _json(result: Any) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(result.out)
    return doc


@drill(
    name="rollout",
    group="8",
    title="observe → enforce migrations → a false block → observe + pause → resume, reissue → revert",
    gate="report and shadow name exactly the would-be-fenced landing; paused issue refused; "
    "revert lands through the gate and restores the tree",
)
def rollout(ctx: Context) -> str:  # noqa: PLR0915 — one scenario, step by step
    w = World(ctx, "world", FILES, policy=policy())
    # Kept out of the enforcement-stage gates (see the module docstring).
    (w.root / "world.json").rename(w.root / "rollout.json")
    repo = str(w.repo)

    # -- observe: a clean landing, an unowned migration slot, a bad unowned source edit --
    clean = w.setup_contract("billing", ["src/billing/**"])
    slot = w.setup_contract("schema-1", ["db/migrations/0002_add.sql"])
    bad = w.setup_contract("auth", ["src/auth/**"])
    sids = {
        "clean": w.publish(clean, w.commit({"src/billing/invoice.py": "def total(l):\n    return round(sum(l), 2)\n"})),
        "slot": w.publish(slot, w.commit({"db/migrations/0002_add.sql": "alter table invoice add total int;\n"})),
        "bad": w.publish(bad, w.commit({"src/auth/login.py": "def login(user):\n    return None\n",
                                        "docs/index.md": "# docs (auth was here)\n"})),
    }  # fmt: skip
    w.serve_once()
    w.settle()
    folders = {k: w.verdict_of(s)[0] for k, s in sids.items()}
    ctx.equal(
        "observe mode lets every candidate through",
        dict.fromkeys(sids, "accepted"),
        folders,
        [w.spool.root],
    )
    staging = {k: str(w.verdict_of(s)[1]["stagingCommit"]) for k, s in sids.items()}
    report = _json(w.cli("report", "observe", "--repo", repo, "--json", label="report-observe"))
    cats = {c["category"]: c for c in report["categories"]}
    found = {
        (c, code["code"], f["key"])
        for c, d in cats.items()
        for code in d["codes"]
        for f in code["candidates"]
    }
    ctx.equal(
        "report observe: what would have been fenced",
        {
            ("migrations", "RESOURCE_NOT_OWNED", staging["slot"]),
            ("source", "PATH_NOT_OWNED", staging["bad"]),
        },
        found,
        w.evidence(),
    )
    ctx.equal("migrations are ready first", "migrations", report["next"], [w.commands])

    # -- shadow: migrations enforced would fence exactly the slot landing ---------------
    strict = w.root / "migrations-enforced.toml"
    strict.write_text(policy(migrations="enforce"))
    shadow = w.cli(
        "shadow", "--repo", repo, "--policy", str(strict), "--json", expect=1, label="shadow-strict"
    )
    mismatched = [m["key"] for m in _json(shadow)["mismatches"]]
    ctx.equal(
        "shadow (migrations enforced) mismatches", [staging["slot"]], mismatched, [w.commands]
    )

    # -- enforce migrations; a legitimate migration is blocked -------------------------
    w.cli(
        "policy",
        "enforce",
        "migrations",
        "--repo",
        repo,
        "--reason",
        "0 false positives in observe",
        label="enforce",
    )
    legit = w.setup_contract("schema-2", ["db/migrations/0003_index.sql"])
    blocked = w.publish(
        legit,
        w.commit(
            {"db/migrations/0003_index.sql": "create index i on invoice (id);\n"},
            parent=legit.doc["baseCommit"],
        ),
    )
    w.serve_once()
    w.settle()
    folder, verdict = w.verdict_of(blocked)
    codes = [v["code"] for v in verdict.get("violations", [])]
    ctx.equal(
        "enforced: the migration is fenced",
        ("fenced", ["RESOURCE_NOT_OWNED"]),
        (folder, codes),
        [w.spool.root],
    )
    w.cli("review", "mark-false-positive", blocked, "--repo", repo, "--actor", "rm-drill",
          "--reason", "a new migration file is its own slot", label="mark-false-positive")  # fmt: skip

    # -- back to observe, claims paused ---------------------------------------------
    back = _json(
        w.cli(
            "policy",
            "observe",
            "migrations",
            "--repo",
            repo,
            "--reason",
            "false block",
            "--json",
            label="observe",
        )
    )
    w.cli(
        "contract", "pause", "--repo", repo, "--reason", "false block on migrations", label="pause"
    )
    refused = w.cli(
        "contract",
        "issue",
        "--repo",
        repo,
        "--task",
        "late",
        "--path",
        "src/late/**",
        expect=1,
        label="issue-paused",
    )
    ctx.expect(
        "a paused issue is refused naming the reason",
        "false block on migrations" in refused.err,
        expected="exit 1 naming the pause's reason",
        actual=refused.err.strip()[-200:],
        evidence=[w.commands],
    )
    w.cli(
        "contract",
        "resume",
        "--repo",
        repo,
        "--reason",
        "migrations observed again",
        label="resume",
    )
    reissued = []
    while True:
        doc = _json(w.cli("contract", "reissue", "--repo", repo, "--json", label="reissue"))
        if not doc["outcomes"]:
            break
        reissued += [o["taskId"] for o in doc["outcomes"]]
    ctx.equal(
        "policy changes revoked; reissued one by one",
        sorted(back["revoked"]),
        sorted(reissued),
        [w.commands],
    )

    # -- the bad landing reverted through the gate ------------------------------------
    before = {
        p: git("rev-parse", f"{staging['bad']}^:{p}", cwd=w.repo)
        for p in ("src/auth/login.py", "docs/index.md")
    }
    sent = _json(w.cli("revert", "--repo", repo, staging["bad"], "--spool", str(w.spool.root), "--json",
                       "--reason", "auth broke login", label="revert"))  # fmt: skip
    w.published.append(sent["submission"])
    w.serve_once()
    w.settle()
    folder, verdict = w.verdict_of(sent["submission"])
    after = {p: git("rev-parse", f"{MAIN}:{p}", cwd=w.repo) for p in before}
    ctx.equal("the revert lands through the gate", "accepted", folder, [w.spool.root])
    ctx.equal("main holds what it held before the bad landing", before, after, w.evidence())
    last = _json(w.cli("report", "observe", "--repo", repo, "--json", label="report-final"))
    migrations = next(c for c in last["categories"] if c["category"] == "migrations")
    ctx.equal("the false block keeps migrations from being ready", (1, False),
              (migrations["falsePositives"], migrations["ready"]), [w.commands])  # fmt: skip
    live = w.root / "live.toml"
    live.write_text(git("show", "refs/integrator/policy:policy.toml", cwd=w.repo) + "\n")
    agree = _json(
        w.cli(
            "shadow",
            "--repo",
            repo,
            "--policy",
            str(live),
            "--json",
            expect=(0, 1),
            label="shadow-live",
        )
    )
    differ = sorted(m["key"] for m in agree["mismatches"])
    ctx.equal(
        "shadow under the live policy: only the false block differs",
        [blocked],
        differ,
        [w.commands],
    )
    return (
        f"{len(found)} would-be-fenced reported, shadow named {len(mismatched)}; false block "
        f"marked; {len(reissued)} reissued one by one; revert landed {str(verdict.get('stagingCommit'))[:12]}"
    )
