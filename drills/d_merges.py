"""Drills 2–4: conflicts that a textual merge does not see, and writes outside the contract.

Rename against edit (both orders), a schema change against a change to its generated
artifacts (both orders), and a build step that rewrites a lockfile behind the agent's back.
Each world's submissions go through the daemon (`serve --once`), in id order.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from drills.context import Context
from drills.harness import World
from drills.records import Contract, Result
from drills.registry import drill
from drills.repo import MAIN, QUEUE, environment, git, merge_tree

INVOICE = "".join(f"line {i}: invoice logic\n" for i in range(30))
EDITED = INVOICE.replace("line 3: invoice logic", "line 3: invoice logic, edited")
RENAME_FILES = {
    "billing/invoice.py": INVOICE,
    "billing/tax.py": "t = 1\n",
    "docs/index.md": "# d\n",
}


def _landing_pair(ctx: Context, w: World, first: str) -> tuple[str, str, str, str, Contract]:
    """Publish the rename and the edit (in `first` order), drain; (rename folder, edit
    folder, edit submission, edited candidate, edit contract)."""
    r = w.contract("rename", ["billing/invoice.py", "billing/invoices/**"])
    refused = w.issue("edit", ["billing/invoice.py"], expect=(1,))
    ctx.expect(
        f"{w.root.name}: the coordinator refuses an overlapping claim",
        isinstance(refused, Result) and "overlaps a live claim" in refused.err,
        expected="contract issue exits 1: overlaps a live claim",
        actual=refused.err.strip()[-160:] if isinstance(refused, Result) else "issued",
        evidence=[w.commands],
    )
    e = w.contract("edit", ["billing/invoice.py"], force_shared=True)
    cand_r = w.commit({"billing/invoice.py": None, "billing/invoices/core.py": INVOICE})
    cand_e = w.commit({"billing/invoice.py": EDITED})
    pairs = [(r, cand_r), (e, cand_e)] if first == "rename" else [(e, cand_e), (r, cand_r)]
    sids = [w.publish(c, cand) for c, cand in pairs]
    w.serve_once()
    w.settle()
    folders = {c.doc["taskId"]: w.verdict_of(s)[0] for (c, _), s in zip(pairs, sids, strict=True)}
    edit_sid = sids[[c.doc["taskId"] for c, _ in pairs].index("edit")]
    return folders["rename"], folders["edit"], edit_sid, cand_e, e


def _expand(w: World, contract: Contract, candidate: str, add: list[str]) -> Contract:
    """`integrator contract expand` adding `add` to the live contract (the coordinator's
    answer to an agent whose change git carried to a path it does not own). The agent asks
    from its workspace (`contract request-expansion`), so the request names the workspace's
    tree and `expand` can verify it has not written what it asks for."""
    from integrator.documents.contract import parse_contract

    live = parse_contract(contract.path.read_bytes())
    workspace = w.root / f"{live.task_id}-workspace"
    git("worktree", "add", "-q", "--detach", str(workspace), candidate, cwd=w.repo)
    path = w.contracts / f"{live.task_id}-expand-request.json"
    w.cli("contract", "request-expansion", "--worktree", str(workspace), "--contract",
          str(contract.path), *(f"--add-path={p}" for p in add), "-o", str(path))  # fmt: skip
    out = w.contracts / f"{live.task_id}-expanded.json"
    w.cli("contract", "expand", "--repo", str(w.repo), "--request", str(path), "-o", str(out))
    return Contract(out, json.loads(out.read_text()))


@drill(
    name="rename-vs-edit",
    group="2",
    title="one agent renames a file, another edits it; both orders; one-ended renames",
    gate="edit first: both land; rename first: the edit git would carry to the unowned new "
    "path is FENCED until the coordinator expands the contract; same tree in both orders; "
    "unowned rename end FENCED",
)
def rename_vs_edit(ctx: Context) -> str:
    trees = {}
    for first in ("rename", "edit"):
        w = World(ctx, f"{first}-first", RENAME_FILES)
        renamed, edited, edit_sid, cand_e, contract = _landing_pair(ctx, w, first)
        if first == "edit":
            ctx.equal("edit first: both land (the rename carries the edited file)",
                      ("accepted", "accepted"), (renamed, edited), [w.spool.root])  # fmt: skip
        else:
            _, verdict = w.verdict_of(edit_sid)
            codes = [(v["code"], v.get("path")) for v in verdict.get("violations", [])]
            ctx.expect(
                "rename first: the edit, which git would carry to billing/invoices/core.py "
                "(not in its contract), is fenced",
                (renamed, edited) == ("accepted", "fenced")
                and ("PATH_NOT_OWNED", "billing/invoices/core.py") in codes,
                expected="rename ACCEPTED; edit FENCED PATH_NOT_OWNED billing/invoices/core.py",
                actual=f"rename {renamed}, edit {edited} {codes}",
                evidence=[w.spool.root],
            )
            ctx.equal("rename first: nothing of the fenced edit landed", INVOICE.rstrip("\n"),
                      w.show(f"{MAIN}:billing/invoices/core.py"), w.evidence())  # fmt: skip
            wider = _expand(w, contract, cand_e, ["billing/invoices/core.py"])
            sid = w.publish(wider, cand_e)
            w.serve_once()
            w.settle()
            ctx.equal("rename first: after the expansion the edit lands", "accepted",
                      w.verdict_of(sid)[0], [w.spool.root])  # fmt: skip
        ctx.equal(
            f"{first} first: the old path is gone", None, w.show(f"{MAIN}:billing/invoice.py")
        )
        ctx.equal(f"{first} first: the edit is at the new path", EDITED.rstrip("\n"),
                  w.show(f"{MAIN}:billing/invoices/core.py"), w.evidence())  # fmt: skip
        trees[first] = git("rev-parse", f"{MAIN}^{{tree}}", cwd=w.repo)
    ctx.equal("the result does not depend on the order", trees["rename"], trees["edit"])
    # Both ends of a rename must be owned: each contract below owns one end only.
    w = World(ctx, "one-end", RENAME_FILES)
    new_only = w.setup_contract("new-end", ["billing/invoices/**"])
    old_only = w.setup_contract("old-end", ["docs/**"])
    sids = [
        w.publish(new_only, w.commit({"billing/invoice.py": None, "billing/invoices/core.py": INVOICE})),
        w.publish(old_only, w.commit({"docs/index.md": None, "site/index.md": "# d\n"})),
    ]  # fmt: skip
    w.serve_once()
    w.settle()
    for sid, end in zip(sids, ("billing/invoice.py", "site/index.md"), strict=True):
        folder, verdict = w.verdict_of(sid)
        hits = [v for v in verdict.get("violations", []) if v["code"] == "RENAME_NOT_OWNED"]
        ctx.expect(
            f"rename with unowned end {end}",
            folder == "fenced" and any(v.get("path") == end for v in hits),
            expected=f"FENCED, RENAME_NOT_OWNED naming {end}",
            actual=f"{folder} {[(v['code'], v.get('path')) for v in verdict.get('violations', [])]}",
            evidence=[w.spool.root / folder / sid],
        )
    ctx.equal("nothing landed from one-ended renames", [], w.landed(), w.evidence())
    return (
        "edit first: both ACCEPTED; rename first: edit FENCED PATH_NOT_OWNED at the new path, "
        "ACCEPTED after expand; identical trees; 2/2 one-ended renames FENCED"
    )


GEN_POLICY_EXTRA = """
[[resource]]
paths = ["schema/invoice.schema.json"]
resource = "schema:invoice"

[[resource]]
paths = ["gen/invoice/**"]
resource = "codegen:invoice"

[[resource]]
paths = ["gen/plugins/**"]
resource = "codegen:plugins"
unknown = true

[[resource]]
paths = ["gen/docs/**"]
resource = "codegen:docs"
"""
SCHEMA = '{"type": "object", "properties": {"id": {"type": "string"}}}\n'
GEN_FILES = {
    "schema/invoice.schema.json": SCHEMA,
    "gen/invoice/model.py": "class Invoice:\n    id: str\n",
    "gen/invoice/client.py": "def get(id): ...\n",
    "gen/plugins/hooks.py": "HOOKS = []\n",
    "gen/docs/index.md": "# generated docs\n",
    "src/app.py": "app = 1\n",
}


def generated_policy(default: str) -> str:
    """The default policy with schema/codegen categories, four resource rules, one shared."""
    text = default.replace("schemas = []", 'schemas = ["schema/**"]')
    text = text.replace("codegen = []", 'codegen = ["gen/**"]')
    shared = text.replace("[shared]\nresources = []", '[shared]\nresources = ["codegen:docs"]')
    if shared == text:
        raise ValueError("the default policy has no empty [shared] resources line to extend")
    return shared + GEN_POLICY_EXTRA


@drill(
    name="schema-vs-generated",
    group="3",
    title="one side changes a schema, the other only its generated artifacts; both orders",
    gate="first lands, second REVIEW (RESOURCE_CONFLICT) though git merges it cleanly",
)
def schema_vs_generated(ctx: Context) -> str:
    from integrator.documents.policy import default_policy_text

    policy = generated_policy(default_policy_text())
    seen = []
    for first in ("schema", "generated"):
        w = World(ctx, f"{first}-first", GEN_FILES, policy=policy)
        s = w.setup_contract("schema", ["schema/**", "gen/invoice/**"],
                       resources=["schema:invoice", "codegen:invoice"])  # fmt: skip
        g = w.setup_contract("generated", ["gen/invoice/client.py"], resources=["codegen:invoice"],
                       force_shared=True)  # fmt: skip
        cand_s = w.commit({
            "schema/invoice.schema.json": SCHEMA.replace('"string"}', '"string"}, "total": {}'),
            "gen/invoice/model.py": "class Invoice:\n    id: str\n    total: int\n",
        })  # fmt: skip
        cand_g = w.commit({"gen/invoice/client.py": "def get(id, timeout=5): ...\n"})
        pairs = [(s, cand_s), (g, cand_g)] if first == "schema" else [(g, cand_g), (s, cand_s)]
        sids = [w.publish(c, cand) for c, cand in pairs]
        w.serve_once()
        w.settle()
        (f1, _), (f2, v2) = w.verdict_of(sids[0]), w.verdict_of(sids[1])
        codes = [v["code"] for v in v2.get("violations", [])]
        seen.append(f"{first} first: {f1}, then {f2} {','.join(codes)}")
        ctx.equal(f"{first} first: the first lands", "accepted", f1, [w.spool.root])
        ctx.expect(
            f"{first} first: the second is held for a person",
            f2 == "review" and "RESOURCE_CONFLICT" in codes,
            expected="REVIEW with RESOURCE_CONFLICT on codegen:invoice",
            actual=f"{f2} {codes}",
            evidence=[w.spool.root / f2 / sids[1]],
        )
        clean, _ = merge_tree(w.repo, w.initial, w.ref(QUEUE) or "", pairs[1][1])
        ctx.expect(
            f"{first} first: git alone would have merged the second",
            clean,
            expected="git merge-tree clean",
            actual="clean" if clean else "conflict",
        )
        ctx.equal(f"{first} first: landed", [pairs[0][1]], w.landed(), w.evidence())
    # Generated output whose owner the contract does not name, output nobody can name, and
    # output the policy shares with every contract.
    w = World(ctx, "unowned", GEN_FILES, policy=policy)
    g2 = w.setup_contract("gen-path-only", ["gen/invoice/**"])
    g3 = w.setup_contract("plugins", ["gen/plugins/**"])
    g4 = w.setup_contract("docs", ["gen/docs/**"])
    shared = w.commit({"gen/docs/index.md": "# regenerated docs\n"})
    cases = [
        (w.publish(g2, w.commit({"gen/invoice/model.py": "class Invoice: ...\n"})),
         "fenced", "RESOURCE_NOT_OWNED", "NOT_OWNED"),
        (w.publish(g3, w.commit({"gen/plugins/hooks.py": "HOOKS = ['x']\n"})),
         "review", "RESOURCE_UNKNOWN", "UNKNOWN"),
        (w.publish(g4, shared), "accepted", None, "SHARED"),
    ]  # fmt: skip
    w.serve_once()
    w.settle()
    for sid, folder, code, determination in cases:
        got, verdict = w.verdict_of(sid)
        codes = [v["code"] for v in verdict.get("violations", [])]
        given = [r["determination"] for r in verdict.get("resources", [])]
        ctx.expect(
            f"{determination} case",
            got == folder and (code is None or code in codes) and given == [determination],
            expected=f"{folder.upper()} {code or ''}, determination {determination}",
            actual=f"{got} {codes}, determinations {given}",
            evidence=[w.spool.root / got / sid],
        )
    ctx.equal("only the shared output landed", [shared], w.landed(), w.evidence())
    return "; ".join(seen) + "; NOT_OWNED → FENCED, UNKNOWN → REVIEW, SHARED → ACCEPTED"


LOCK_FILES = {
    "pyproject.toml": '[project]\nname = "app"\ndependencies = ["requests"]\n',
    "uv.lock": "version = 1\n# requests 2.31.0\n",
    "src/app/main.py": "print('v1')\n",
    "tools/build.py": (
        "from pathlib import Path\n"
        "# The build resolves dependencies again and rewrites the lockfile as a side effect.\n"
        "Path('uv.lock').write_text('version = 1\\n# requests 2.32.3\\n')\n"
        "Path('build.log').write_text('ok\\n')\n"
    ),
}


def _agent_git(worktree: Path, *args: str) -> str:
    return git(*args, cwd=worktree)


@drill(
    name="lockfile-build-step",
    group="4",
    title="an undeclared build step rewrites uv.lock inside an otherwise owned change",
    gate="FENCED (PATH_NOT_OWNED, RESOURCE_NOT_OWNED), nothing of it lands; fixed resubmit lands",
)
def lockfile_build_step(ctx: Context) -> str:
    w = World(ctx, "world", LOCK_FILES)
    c = w.contract("app", ["src/app/**"])
    tree = w.root / "wt-app"
    git("worktree", "add", "-q", "-b", "app-work", str(tree), c.doc["baseCommit"], cwd=w.repo)
    (tree / "src/app/main.py").write_text("print('v2')\n")
    # The build step is a shell command: no tool hook sees the files it writes.
    subprocess.run([sys.executable, "tools/build.py"], cwd=tree, check=True, env=environment())
    (tree / "build.log").unlink()
    _agent_git(tree, "add", "-A")
    _agent_git(tree, "commit", "-q", "-m", "v2 (and whatever the build touched)")
    sub = w.cli("submit", "--spool", str(w.spool.root), "--contract", str(c.path),
                "--candidate", "HEAD", "--repo", str(tree), "--json", label="submit-with-lock")  # fmt: skip
    sid = sub.json()["submission"]
    w.published.append(sid)
    w.serve_once()
    w.settle()
    folder, verdict = w.verdict_of(sid)
    found = {(v["code"], v.get("path") or v.get("resource")) for v in verdict.get("violations", [])}
    want = {("PATH_NOT_OWNED", "uv.lock"), ("RESOURCE_NOT_OWNED", "lockfile:uv.lock")}
    ctx.expect(
        "the lockfile rewrite is caught at the gate",
        folder == "fenced" and want <= found,
        expected=f"FENCED with {sorted(want)}",
        actual=f"{folder} {sorted(found)}",
        evidence=[w.spool.root / folder / sid],
    )
    ctx.equal("nothing of that candidate landed (the owned edit neither)", "print('v1')",
              w.show(f"{MAIN}:src/app/main.py"), w.evidence())  # fmt: skip
    ctx.expect(
        "the fenced candidate is held, not replayed",
        w.ref(f"refs/integrator/held/{sid}") is not None,
        expected=f"refs/integrator/held/{sid}",
        actual=str(w.ref(f"refs/integrator/held/{sid}")),
    )
    # The agent drops what it may not write and resubmits under the same, still live, claim.
    _agent_git(tree, "checkout", c.doc["baseCommit"], "--", "uv.lock")
    _agent_git(tree, "commit", "-q", "-m", "v2 without the lockfile")
    sub = w.cli("submit", "--spool", str(w.spool.root), "--contract", str(c.path),
                "--candidate", "HEAD", "--repo", str(tree), "--json", label="submit-fixed")  # fmt: skip
    fixed = sub.json()["submission"]
    w.published.append(fixed)
    w.serve_once()
    w.settle()
    ctx.equal("the fixed candidate", "accepted", w.verdict_of(fixed)[0], [w.spool.root])
    ctx.equal("main has the owned edit", "print('v2')", w.show(f"{MAIN}:src/app/main.py"))
    ctx.equal(
        "main kept its lockfile", LOCK_FILES["uv.lock"].rstrip("\n"), w.show(f"{MAIN}:uv.lock")
    )
    return f"lockfile rewrite → {folder.upper()} {','.join(sorted(c for c, _ in found))}; fixed → ACCEPTED"
