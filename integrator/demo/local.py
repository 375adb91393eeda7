"""`make demo`: the whole flow on a throwaway repository, narrated.

Act 1 — the gate and the daemon: a coordinator issues contracts, seven agents submit
candidates from their worktrees (three clean, one out-of-scope write with an undeclared
lockfile rewrite, one stale attempt after a reclaim and its successor, one symlink
escape), the daemon drains the spool once, and a table shows each decision and why.

Act 2 — the fleet: a planner cuts tasks with disjoint write sets, an agent claims one and
gets a worktree bound to its contract, the write guard stops a write outside it, and the
candidate lands through the same daemon.

Every step runs the real `integrator` command as a process; nothing is simulated.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from integrator import refnames
from integrator.demo.stage import BOLD, DIM, ENV, RESET, Demo

PROJECT = {
    "billing/invoice.py": "def total(lines):\n    return sum(lines)\n",
    "billing/tax.py": "RATE = 0.2\n",
    "auth/login.py": "def login(user):\n    return user\n",
    "docs/guide.md": "# Guide\n",
    "search/index.py": "def search(q):\n    return []\n",
    "web/app.js": "console.log('hi')\n",
    "package.json": '{"name": "shop"}\n',
    "pnpm-lock.yaml": "lockfileVersion: 9\n",
    ".github/workflows/ci.yml": "on: push\n",
}


def act_one(demo: Demo) -> None:
    canonical = _prepare(demo)
    _issue(demo)
    sids = _submit(demo)
    demo.say("4. The daemon drains the spool once")
    demo.run(
        "integrator", "serve", "--repo", "canonical", "--spool", "spool", "--once", ok=(0, 1, 3)
    )
    _decisions_table(demo, sids)
    demo.say("5. What landed, and where to look next")
    print(demo.git("log", "--oneline", "main", cwd=canonical))
    print(f"{DIM}$ git -C canonical status --short   # the checkout followed each landing{RESET}")
    print(demo.git("status", "--short", cwd=canonical) or "   (clean)")
    print(f"{DIM}$ git log --oneline {refnames.CLAIMS}search{RESET}")
    print(demo.git("log", "--oneline", f"{refnames.CLAIMS}search", cwd=canonical))
    print(demo.run("integrator", "review", "list", "--spool", "spool").rstrip())


def _prepare(demo: Demo) -> Path:
    canonical = demo.root / "canonical"
    canonical.mkdir()
    demo.say("1. A canonical repository (a checkout of main, kept in step), prepared")
    demo.git("init", "-q", "-b", "main", cwd=canonical)
    for path, content in PROJECT.items():
        (canonical / path).parent.mkdir(parents=True, exist_ok=True)
        (canonical / path).write_text(content)
    demo.git("add", "-A", cwd=canonical)
    demo.git("commit", "-qm", "initial project", cwd=canonical)
    print(demo.run("integrator", "init", "--repo", "canonical", "--update-checkout").rstrip())
    return canonical


def _issue(demo: Demo) -> None:
    demo.say("2. The coordinator issues one ownership contract per task")
    tasks = {
        "billing": ("agent-a", ["billing/**"]),
        "auth": ("agent-b", ["auth/**"]),
        "docs": ("agent-c", ["docs/**"]),
        "web": ("agent-d", ["web/**"]),
        "search": ("agent-e", ["search/**"]),
        "assets": ("agent-g", ["assets/**"]),
    }
    for task, (holder, globs) in tasks.items():
        args = ["integrator", "contract", "issue", "--repo", "canonical", "--task", task]
        for glob in globs:
            args += ["--path", glob]
        demo.run(*args, "--holder", holder, "--lease", "1h", "-o", f"{task}.json")
    print(demo.run("integrator", "contract", "list", "--repo", "canonical").rstrip())
    demo.say("   agent-e stalls; the coordinator reclaims 'search' for agent-f (generation 2)")
    demo.run(
        "integrator",
        "contract",
        "reclaim",
        "--repo",
        "canonical",
        "--task",
        "search",
        "--force",
        "--holder",
        "agent-f",
        "-o",
        "search-gen2.json",
    )


# (agent, contract file, files written, commit message, symlinks): seven candidates.
CANDIDATES: list[tuple[str, str, dict[str, str | None], str, dict[str, str]]] = [
    (
        "agent-a",
        "billing.json",
        {
            "billing/invoice.py": "def total(lines):\n    return round(sum(lines), 2)\n",
            "billing/discount.py": "RATE = 0.1\n",
        },
        "billing: round totals, add discounts",
        {},
    ),
    (
        "agent-b",
        "auth.json",
        {"auth/login.py": "def login(user):\n    return user.strip()\n"},
        "auth: trim user names",
        {},
    ),
    (
        "agent-c",
        "docs.json",
        {"docs/guide.md": "# Guide\n\nHow to pay.\n", "docs/faq.md": "# FAQ\n"},
        "docs: payment guide",
        {},
    ),
    (
        "agent-d",
        "web.json",
        {
            "web/app.js": "console.log('shop')\n",
            "pnpm-lock.yaml": "lockfileVersion: 9\npackages: {}\n",
            ".github/workflows/ci.yml": "on: [push, pull_request]\n",
        },
        "web: new banner (and a build step rewrote the lockfile)",
        {},
    ),
    (
        "agent-e",
        "search.json",
        {"search/index.py": "def search(q):\n    return [q]\n"},
        "search: echo queries (stale attempt)",
        {},
    ),
    (
        "agent-f",
        "search-gen2.json",
        {"search/index.py": "def search(q):\n    return sorted([q])\n"},
        "search: sorted results",
        {},
    ),
    (
        "agent-g",
        "assets.json",
        {"assets/logo.txt": "logo\n"},
        "assets: logo and a convenient link",
        {"assets/passwd": "../../etc/passwd"},
    ),
]


def _submit(demo: Demo) -> dict[str, str]:
    """Seven agents commit and submit; returns submission id → agent."""
    demo.say("3. Agents commit in their worktrees and submit candidates to the spool")
    sids: dict[str, str] = {}
    for agent, contract, files, message, links in CANDIDATES:
        cand = demo.candidate(agent, files, message, links)
        out = demo.run(
            "integrator",
            "submit",
            "--create",  # the first submissions come before the daemon made the spool
            "--spool",
            "spool",
            "--contract",
            contract,
            "--candidate",
            cand,
            "--repo",
            f"agents/{agent}",
            show=agent == "agent-a",
        )
        sids[out.strip().splitlines()[-1]] = agent
    print(f"   … {len(CANDIDATES)} submissions in spool/new/")
    return sids


def _decisions_table(demo: Demo, sids: dict[str, str]) -> None:
    rows = []
    for folder in ("accepted", "fenced", "review", "rejected"):
        base = demo.root / "spool" / folder
        for entry in sorted(base.iterdir()) if base.exists() else []:
            verdict_file = entry / "verdict.json"
            if not verdict_file.exists():
                continue
            verdict = json.loads(verdict_file.read_text())
            agent = sids.get(entry.name, "?")
            codes = ", ".join(dict.fromkeys(v["code"] for v in verdict["violations"])) or "-"
            why = (
                verdict["violations"][0]["detail"]
                if verdict["violations"]
                else f"landed as {verdict.get('stagingCommit', '')[:12]}"
            )
            rows.append(
                (
                    entry.name,
                    agent,
                    verdict.get("taskId") or "?",
                    verdict.get("generation"),
                    verdict["decision"],
                    codes,
                    why,
                )
            )
    rows.sort()
    print(f"\n{'AGENT':8} {'TASK':8} {'GEN':>3}  {'DECISION':9} {'CODES':40} WHY")
    for _, agent, task, gen, decision, codes, why in rows:
        print(f"{agent:8} {task:8} {gen!s:>3}  {decision:9} {codes:40} {_cut(why, 90)}")


FLEET_TASKS = {
    "WEB-1": ("implementation", ["web/**"], True, "Add a cart page to the web app."),
    "WEB-2": (
        "implementation",
        ["web/**", "/package.json"],
        True,
        "Move the web app to a new bundler.",
    ),
    "DOCS-2": ("implementation", ["docs/api/**"], True, "Document the public API."),
    "ADR-1": ("decision", [], False, "Write the ADR for the checkout redesign."),
}


def act_two(demo: Demo) -> None:
    canonical = demo.root / "canonical"
    tasks_dir = _plan(demo)
    worktree, contract_file = _claim(demo, canonical, tasks_dir)
    _guard(demo, worktree)
    _land(demo, canonical, worktree, contract_file)


def _plan(demo: Demo) -> Path:
    demo.say("6. The fleet: a planner cuts tasks with disjoint write sets")
    tasks_dir = demo.root / "tasks"
    tasks_dir.mkdir()
    for task_id, (kind, owns, writes, brief) in FLEET_TASKS.items():
        owns_line = f"owns: [{', '.join(owns)}]\n" if owns else ""
        fs = "requires_filesystem: true\n" if writes else ""
        (tasks_dir / f"{task_id}.md").write_text(
            f"---\nid: {task_id}\ntype: {kind}\n{owns_line}{fs}---\n# {brief}\n\n{brief}\n"
        )
    print(demo.run("integrator", "plan", "tasks", "--fleet", "4", cwd=demo.root).rstrip())
    print(demo.run("integrator", "plan", "tasks", "--format", "mermaid", cwd=demo.root).rstrip())
    return tasks_dir


def _claim(demo: Demo, canonical: Path, tasks_dir: Path) -> tuple[Path, Path]:
    demo.say("7. An agent claims a ready task: a contract and a worktree bound to it")
    demo.run("integrator", "task", "init", cwd=canonical)
    (canonical / ".agents" / "workspaces.toml").write_text('[agents.alice]\nworkspace = "alice"\n')
    demo.run(
        "integrator",
        "task",
        "add",
        *[f"../tasks/{p.name}" for p in sorted(tasks_dir.glob("*.md"))],
        cwd=canonical,
    )
    claimed = json.loads(
        demo.run(
            "integrator",
            "task",
            "claim",
            "--agent",
            "alice",
            "--task",
            "DOCS-2",
            "--json",
            cwd=canonical,
        )
    )
    worktree = Path(claimed["worktree"])
    contract_file = demo.root / "docs2.json"
    contract_file.write_text(json.dumps(claimed["contract"], indent=2))
    print(
        f"   claimed {claimed['task']}: lock mode {claimed['lockMode']}, "
        f"worktree {worktree.relative_to(demo.root)}, contract generation "
        f"{claimed['contract']['ownershipGeneration']} for {', '.join(claimed['contract']['paths'])}"
    )
    return worktree, contract_file


def _guard(demo: Demo, worktree: Path) -> None:
    demo.say("8. The write guard stops a write outside the contract before it happens")
    for target in ("docs/api/cart.md", "web/app.js"):
        event = {
            "hook_event_name": "PreToolUse",
            "tool_name": "Write",
            "tool_input": {"file_path": str(worktree / target), "content": "x"},
            "cwd": str(worktree),
        }
        proc = subprocess.run(
            [sys.executable, "-m", "integrator", "guard"],
            input=json.dumps(event),
            cwd=worktree,
            env=ENV,
            capture_output=True,
            text=True,
            check=False,
        )
        answer = proc.stdout.strip() or "(allowed: no output)"
        if answer.startswith("{"):
            answer = json.loads(answer)["hookSpecificOutput"]["permissionDecisionReason"]
        print(f"   Write {target}: {_cut(answer, 150)}")


def _cut(text: str, width: int) -> str:
    """`text` in at most `width` characters, cut between words (a reason cut mid-word reads
    as a different word)."""
    import textwrap

    return textwrap.shorten(text, width, placeholder=" …")


def _land(demo: Demo, canonical: Path, worktree: Path, contract_file: Path) -> None:
    demo.say("9. The agent commits inside its contract and submits; the daemon lands it")
    (worktree / "docs" / "api").mkdir(parents=True, exist_ok=True)
    (worktree / "docs" / "api" / "cart.md").write_text("# Cart API\n")
    demo.git("add", "docs/api/cart.md", cwd=worktree)
    demo.git("commit", "-qm", "docs: cart API", cwd=worktree)
    cand = demo.git("rev-parse", "HEAD", cwd=worktree)
    demo.run(
        "integrator",
        "submit",
        "--spool",
        "spool",
        "--contract",
        contract_file.name,
        "--candidate",
        cand,
        "--repo",
        str(worktree.relative_to(demo.root)),
    )
    demo.run(
        "integrator", "serve", "--repo", "canonical", "--spool", "spool", "--once", ok=(0, 1, 3)
    )
    print(demo.git("log", "--oneline", "-3", "main", cwd=canonical))


def main() -> int:
    keep = "--keep" in sys.argv
    root = Path(tempfile.mkdtemp(prefix="integrator-demo-"))
    demo = Demo(root)
    print(
        f"{BOLD}integrator demo{RESET} in a throwaway folder ({'kept' if keep else 'removed at the end'})"
    )
    try:
        act_one(demo)
        act_two(demo)
    finally:
        if not keep:
            subprocess.run(["rm", "-rf", str(root)], check=False)
    if keep:
        print(f"\n{BOLD}Done.{RESET} The folder is kept: {root}")
    else:
        print(
            f"\n{BOLD}Done.{RESET} Run `python -m integrator.demo --keep` to keep the folder "
            "and explore it."
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
