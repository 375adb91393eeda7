"""Drill 7: hostile trees and unavailable infrastructure.

Case- and Unicode-colliding paths (in the candidate, and only after the merge), symlinks
that escape (absolute, `../..`, into `.git`), a CI gate in a shallow clone missing the base,
the registry mirror unavailable for a while, and the queue ref locked for a while.
"""

from __future__ import annotations

import unicodedata

from drills.context import Context
from drills.harness import World
from drills.procs import hold_ref_lock, hold_registry, wait_until
from drills.registry import drill
from drills.repo import MAIN, QUEUE, git, rev

HOSTILE_FILES = {
    "docs/readme.md": "# readme\n",
    "notes/index.md": "# notes\n",
    "intl/index.md": "# intl\n",
    "src/a.py": "a = 1\n",
}
NFC = unicodedata.normalize("NFC", "café.txt")
NFD = unicodedata.normalize("NFD", "café.txt")


def _codes(verdict: dict[str, object]) -> list[str]:
    return [str(v["code"]) for v in verdict.get("violations", [])]  # type: ignore[attr-defined]


@drill(
    name="case-collision",
    group="7",
    title="case-colliding paths (in the candidate, after the merge) and NFC/NFD twins",
    gate="FENCED with CASE_COLLISION / UNICODE_COLLISION; only the clean candidate lands",
)
def case_collision(ctx: Context) -> str:
    w = World(ctx, "world", HOSTILE_FILES)
    docs = w.setup_contract("docs", ["docs/**"])
    first = w.setup_contract("notes-a", ["notes/**"])
    second = w.setup_contract("notes-b", ["notes/**"], force_shared=True)
    intl = w.setup_contract("intl", ["intl/**"])
    clean = w.commit({"notes/todo.md": "- a\n"})
    cases = [
        ("in the candidate", docs, w.commit({"docs/README.md": "# other\n"}), "CASE_COLLISION"),
        ("clean", first, clean, None),
        ("after the merge", second, w.commit({"notes/TODO.md": "- b\n"}), "CASE_COLLISION"),
        ("NFC/NFD", intl, w.commit({f"intl/{NFC}": "1\n", f"intl/{NFD}": "2\n"}), "UNICODE_COLLISION"),
    ]  # fmt: skip
    sids = [w.publish(c, cand) for _, c, cand, _ in cases]
    w.serve_once()
    w.settle()
    fenced = 0
    for (label, _, _, code), sid in zip(cases, sids, strict=True):
        folder, verdict = w.verdict_of(sid)
        if code is None:
            ctx.equal(f"{label}: accepted", "accepted", folder, [w.spool.root / folder / sid])
            continue
        fenced += folder == "fenced" and code in _codes(verdict)
        ctx.expect(
            f"{label}: {code}",
            folder == "fenced" and code in _codes(verdict),
            expected=f"FENCED with {code}",
            actual=f"{folder} {_codes(verdict)}",
            evidence=[w.spool.root / folder / sid],
        )
    ctx.equal("only the clean candidate landed", [clean], w.landed(), w.evidence())
    names = git("ls-tree", "-r", "--name-only", MAIN, cwd=w.repo).splitlines()
    folded = [n.casefold() for n in names]
    ctx.equal("no two paths of main fold to the same name", len(folded), len(set(folded)))
    return f"{fenced}/3 colliding candidates FENCED, the clean one ACCEPTED"


ESCAPES = {
    "absolute": ("links/abs/passwd", "/etc/passwd"),
    "dot-dot": ("links/up/shadow", "../../../etc/shadow"),
    "into .git": ("links/git/hooks", "../../.git/hooks"),
}


def escapes(link: str, target: str) -> bool:
    """The drill's own lexical check (independent of the gate's) of a symlink target."""
    if target.startswith("/"):
        return True
    stack = link.split("/")[:-1]
    for part in target.split("/"):
        if part.casefold() == ".git":
            return True
        if part == "..":
            if not stack:
                return True
            stack.pop()
        elif part not in ("", "."):
            stack.append(part)
    return False


@drill(
    name="symlink-escape",
    group="7",
    title="symlinks to an absolute path, up past the root with ../.., and into .git",
    gate="each FENCED with SYMLINK_ESCAPE; an in-repo link lands; no escaping link on main",
)
def symlink_escape(ctx: Context) -> str:
    w = World(ctx, "world", {"docs/index.md": "# d\n", "links/README": "links\n"})
    sids = {}
    for n, (label, (path, target)) in enumerate(ESCAPES.items()):
        c = w.setup_contract(f"esc{n}", [f"{path.rsplit('/', 1)[0]}/**"])
        sids[label] = w.publish(c, w.commit({path: (target, "l")}))
    ok = w.setup_contract("inside", ["links/ok/**"])
    sids["inside"] = w.publish(ok, w.commit({"links/ok/index": ("../../docs/index.md", "l")}))
    w.serve_once()
    w.settle()
    for label, sid in sids.items():
        folder, verdict = w.verdict_of(sid)
        want = "accepted" if label == "inside" else "fenced"
        ok_code = label == "inside" or "SYMLINK_ESCAPE" in _codes(verdict)
        ctx.expect(
            f"symlink {label}",
            folder == want and ok_code,
            expected=want.upper() + ("" if label == "inside" else " with SYMLINK_ESCAPE"),
            actual=f"{folder} {_codes(verdict)}",
            evidence=[w.spool.root / folder / sid],
        )
    links = [line.split("\t", 1) for line in git("ls-tree", "-r", MAIN, cwd=w.repo).splitlines()]
    bad = [
        path
        for meta, path in links
        if meta.startswith("120000")
        and escapes(path, git("cat-file", "-p", meta.split()[2], cwd=w.repo))
    ]
    ctx.equal("escaping symlinks on main", [], bad, w.evidence())
    return f"{len(ESCAPES)}/3 escaping links FENCED; in-repo link ACCEPTED"


@drill(
    name="shallow-base",
    group="7",
    title="CI gate in a shallow clone that lacks the contract's base",
    gate="never ACCEPTED; REVIEW BASE_MISSING (exit 3), plus REPO_UNVERIFIED without a repoId "
    "and CLAIM_UNVERIFIED without the claim refs",
)
def shallow_base(ctx: Context) -> str:
    w = World(ctx, "world", {"src/a.py": "a = 1\n", "docs/index.md": "# d\n"})
    c = w.setup_contract("src", ["src/**"])
    other = w.setup_contract("docs", ["docs/**"])
    for n in range(2):  # the queue moves on, so the base is not the tip any more
        w.integrate(other, w.commit({"docs/index.md": f"# d{n}\n"}, parent=w.ref(QUEUE)))
        if n == 0:
            other = w.reclaim("docs", holder="agent", force=True)
    cand = w.commit({"src/a.py": "a = 2\n"}, parent=c.doc["baseCommit"])
    git("update-ref", "refs/heads/agent-src", cand, cwd=w.repo)
    clone = w.root / "ci-clone"
    git("clone", "-q", "--depth", "1", "--branch", "agent-src", f"file://{w.repo}", str(clone),
        cwd=w.root)  # fmt: skip
    base_there = rev(clone, c.doc["baseCommit"] + "^{commit}")
    argv = ["gate", "--repo", str(clone), "--contract", str(c.path), "--candidate", cand, "--json"]
    plain = w.keep_verdict("gate-shallow", w.cli(*argv, expect=(0, 1, 3), label="gate-shallow"), c)
    ctx.equal("the shallow clone lacks the base", None, base_there)
    ctx.expect(
        "never ACCEPTED in the shallow clone",
        plain.decision != "ACCEPTED" and plain.code != 0,
        expected="not ACCEPTED",
        actual=f"{plain.decision} exit {plain.code}",
        evidence=[plain.file],
    )
    first = f"{plain.decision} {','.join(plain.codes)} (exit {plain.code})"
    ctx.expect(
        "the gate sends the shallow case to review, saying why",
        plain.decision == "REVIEW"
        and plain.code == 3
        and sorted(plain.codes) == ["BASE_MISSING", "CLAIM_UNVERIFIED", "REPO_UNVERIFIED"],
        expected="REVIEW, exit 3, BASE_MISSING, REPO_UNVERIFIED and CLAIM_UNVERIFIED",
        actual=first,
        evidence=[plain.file],
    )
    # With the canonical identity and the claim refs carried into the clone, only the
    # missing base remains.
    repo_id = git("config", "integrator.repoId", cwd=w.repo)
    git("config", "integrator.repoId", repo_id, cwd=clone)
    git("fetch", "-q", "origin", "+refs/integrator/*:refs/integrator/*", cwd=clone)  # README
    known = w.keep_verdict("gate-shallow-repoid", w.cli(*argv, expect=(0, 1, 3)), c)
    ctx.expect(
        "with integrator.repoId set and the claims fetched, REVIEW BASE_MISSING alone",
        known.decision == "REVIEW" and known.code == 3 and known.codes == ["BASE_MISSING"],
        expected="REVIEW, exit 3, BASE_MISSING",
        actual=f"{known.decision} exit {known.code} {known.codes}",
        evidence=[known.file],
    )
    return f"shallow clone gate → {first}; with repoId → {known.decision} {','.join(known.codes)}"


AFTER = 8  # submissions after the outage, one at a time


@drill(
    name="mirror-outage",
    group="7",
    title="the registry mirror is unavailable for a while (SQLite write-locked)",
    gate="integration goes on; backlog drains on return; registry = git for every decision",
)
def mirror_outage(ctx: Context) -> str:
    w = World(ctx, "world", {f"area{i}/f.txt": "0\n" for i in range(4 + AFTER)}, tags=["live"])
    registry = w.spool.root / "registry.sqlite3"
    contracts = [w.setup_contract(f"t{i}", [f"area{i}/**"]) for i in range(4 + AFTER)]
    config = w.config("[serve]\nmirror-timeout = 0.05\n")
    served = w.serve("--config", str(config))
    with hold_registry(registry):
        for i, c in enumerate(contracts[:4]):
            files = {f"area{i}/f.txt": "1\n"} if i < 3 else {"area0/f.txt": "not mine\n"}
            w.publish(c, w.commit(files, parent=c.doc["baseCommit"]))
        w.settle()
        served.wait_event("mirror.unavailable", 1, timeout=30)
        waiting = len(list((w.spool.root / "mirror-backlog").glob("*.jsonl")))
        ctx.expect(
            "decisions were filed while the registry was down",
            waiting > 0 and len(w.landed()) == 3,
            expected="3 landed, backlog files waiting",
            actual=f"{len(w.landed())} landed, {waiting} backlog files",
            evidence=[served.log],
        )
    backlog = w.spool.root / "mirror-backlog"
    wait_until(lambda: not list(backlog.glob("*.jsonl")), 60, "the backlog to drain", [served.log])
    # Back to normal: one submission at a time, each awaited (end-to-end latency samples).
    for i, c in enumerate(contracts[4:], 4):
        w.publish(c, w.commit({f"area{i}/f.txt": "1\n"}, parent=c.doc["baseCommit"]))
        w.settle()
    ctx.equal("after the outage every submission lands", 3 + AFTER, len(w.landed()), w.evidence())
    wait_until(lambda: not list(backlog.glob("*.jsonl")), 60, "the backlog to drain", [served.log])
    rows = w.cli("history", "--spool", str(w.spool.root), "--json").json()
    mirrored = {r["submission"]: (r.get("decision"), r.get("stagingCommit")) for r in rows}
    truth = {}
    for sid in w.published:
        _, verdict = w.verdict_of(sid)
        truth[sid] = (verdict.get("decision"), verdict.get("stagingCommit"))
    ctx.equal("registry rows equal the filed verdicts", truth, mirrored, [registry, w.spool.root])
    staged = {v[1] for v in truth.values() if v[1]}
    ctx.equal("mirrored staging commits are the queue's", set(w.chain()), staged, w.evidence())
    served.stop()
    return (
        f"4 decided during the outage ({waiting} backlog files), {AFTER} after; "
        f"registry = verdicts for {sum(mirrored.get(s) == v for s, v in truth.items())}/"
        f"{len(w.published)}"
    )


@drill(
    name="ref-lock",
    group="7",
    title="the queue ref is locked for a while (a stuck git holds queue.lock)",
    gate="daemon retries later; nothing lost, nothing lands twice; lock never deleted by it",
)
def ref_lock(ctx: Context) -> str:
    # Not "live": its latency is the injected outage's, not the fence's.
    w = World(ctx, "world", {f"area{i}/f.txt": "0\n" for i in range(3)}, tags=["outage"])
    contracts = [w.setup_contract(f"t{i}", [f"area{i}/**"]) for i in range(3)]
    served = w.serve()
    with hold_ref_lock(w.repo, QUEUE) as lock:
        for i, c in enumerate(contracts):
            w.publish(c, w.commit({f"area{i}/f.txt": "1\n"}, parent=c.doc["baseCommit"]))
        served.wait_event("daemon.retry_later", 1, timeout=60)
        ctx.expect(
            "nothing is filed while the queue ref is locked",
            not any(w.filed(s) for s in w.published) and lock.exists(),
            expected="submissions wait in new/ or work/, the lock is untouched",
            actual=f"filed {[w.filed(s) for s in w.published]}, lock exists {lock.exists()}",
            evidence=[served.log],
        )
    w.settle(timeout=90)
    folders = [w.verdict_of(s)[0] for s in w.published]
    ctx.equal("all land once the lock is gone", ["accepted"] * 3, folders, [w.spool.root])
    ctx.equal("each once", 3, len(set(w.landed())), w.evidence())
    retries = len(served.events("daemon.retry_later"))
    served.stop()
    return f"{retries} retry_later while locked; then 3/3 ACCEPTED once"
