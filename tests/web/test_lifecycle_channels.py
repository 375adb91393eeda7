"""One lifecycle, every channel: with validation on, a culprit ejected, a landing promoted
and one reverted, `status --spool`, `status --intake`, MCP `read_verdict` (spool and
intake), `history --json` and the review pages all say the same of each submission —
against a real `git daemon` on 127.0.0.1 whose intake is not the canonical repository."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from integrator.mcp.server import EXIT_META, build_server
from integrator.mcp.tools import AgentTools, IntakeTransport, SpoolTransport, Transport
from tests.git_server import git_daemon
from tests.gitutil import GIT_ENV, git
from tests.gitutil import run_integrator_raw as cli
from tests.promotion_world import CHECK_SCRIPT, MARKER
from tests.remote_world import RemoteWorld

TASKS = ("t0", "t1", "t2")  # promoted, ejected (the culprit), reverted
EXPECTED = {"t0": ("promoted", 0), "t1": ("ejected", 1), "t2": ("reverted", 1)}


@pytest.fixture
def world(tmp_path: Path) -> Iterator[RemoteWorld]:
    files = {f"{t}/f.txt": "0\n" for t in TASKS} | {"ci/check.sh": CHECK_SCRIPT}
    with git_daemon(tmp_path / "srv") as server:
        made = RemoteWorld(tmp_path, server, files)
        try:
            yield made
        finally:
            made.stop()


def _json(done: subprocess.CompletedProcess[bytes]) -> Any:
    return json.loads(done.stdout) if done.stdout.strip() else None


def _intake_status(
    world: RemoteWorld, agent: Path, sid: str, *args: str
) -> tuple[int, dict[str, Any]]:
    done = cli("status", "--intake", world.intake, "--submission", sid, "--repo", str(agent),
               "--json", *args)  # fmt: skip
    assert done.returncode != 2, done.stderr.decode()
    return done.returncode, _json(done) or {}


def _spool_status(spool: Path, sid: str, *args: str) -> tuple[int, dict[str, Any]]:
    done = cli("status", "--spool", str(spool), "--submission", sid, "--json", *args)
    assert done.returncode != 2, done.stderr.decode()
    return done.returncode, _json(done) or {}


def _read_verdict(
    worktree: Path, transport: Transport, sid: str, task: str
) -> tuple[int, dict[str, Any]]:
    """`read_verdict` of `sid` of `task` through the SDK's in-process client: its document
    and exit code."""
    found: dict[str, Any] = {}

    async def run() -> None:
        async with Client(build_server(AgentTools(worktree, transport=transport))) as client:
            result = await client.call_tool("read_verdict", {"submission": sid, "task": task})
            assert not result.is_error, result.content
            found["doc"] = result.structured_content
            found["code"] = (result.meta or {})[EXIT_META]

    anyio.run(run)
    return found["code"], found["doc"]


def _landed_world(world: RemoteWorld, tmp_path: Path) -> tuple[Path, Path, dict[str, str],
                                                                dict[str, Path]]:  # fmt: skip
    """Three agents submit through the intake (t1 breaks the build); one daemon lands them
    on the queue (validation on: the target stays)."""
    policy = tmp_path / "policy.toml"
    policy.write_text(
        "version = 1\n[validation]\n"
        f'command = ["sh", "ci/check.sh", "{tmp_path / "runs.log"}", '
        f'"{tmp_path / "lenient"}"]\nmax_batch = 8\n'
    )
    coordinator = world.mirror("coordinator")
    done = cli("policy", "set", str(policy), "--repo", str(coordinator))
    assert done.returncode == 0, done.stderr.decode()
    sids, agents = {}, {}
    for task in TASKS:
        contract = tmp_path / f"{task}.json"
        world.issue(coordinator, task, [f"{task}/**"], contract)
        agent = agents[task] = world.agent(task)
        (agent / f"{task}/f.txt").write_text(f"{task} changed\n")
        if task == "t1":
            (agent / f"{task}/{MARKER}").write_text("breaks the build\n")
        git("add", "-A", cwd=agent)
        git("commit", "-qm", f"<b>{task}</b> \x1b[31mwork", cwd=agent)
        done = cli("submit", "--intake", world.intake, "--contract", str(contract),
                   "--candidate", "HEAD", "--repo", str(agent))  # fmt: skip
        assert done.returncode == 0, done.stderr.decode()
        sids[task] = done.stdout.decode().split()[-1]
    lander, spool = world.mirror("lander"), tmp_path / "spool"
    assert world.serve(lander, spool, "--once", "--no-promote").wait(120) == 0
    return lander, spool, sids, agents


def test_every_channel_reports_the_same_landing(
    world: RemoteWorld, tmp_path: Path, browser: Any
) -> None:
    """On the queue, `status --intake --until promoted` waits (4) and the plain status says
    queued (0). After a promoter ejected t1 and promoted t0 and the rebuilt t2, and t2 was
    reverted: every channel says t0 promoted (0), t1 ejected with its code and why (1), t2
    reverted by the revert's queue commit (1), with one and the same `landing` document."""
    lander, spool, sids, agents = _landed_world(world, tmp_path)
    code, doc = _intake_status(
        world, agents["t0"], sids["t0"], "--task", "t0", "--until", "promoted"
    )
    assert code == 4 and doc == {}  # on the queue: not on the target yet
    code, doc = _intake_status(world, agents["t0"], sids["t0"], "--task", "t0")
    assert code == 0 and doc["landing"]["state"] == "queued", doc

    promoted = cli("promote", "--repo", str(lander), "--once")
    assert promoted.returncode == 0, promoted.stderr.decode()
    assert world.serve(lander, spool, "--once", "--no-promote").wait(120) == 0  # the ejection
    rebuilt = _spool_status(spool, sids["t2"])[1]["landing"]  # re-merged after the ejection
    assert rebuilt["state"] == "promoted" and rebuilt["stagingCommit"] != rebuilt["landing"]
    reverted = cli("revert", "--repo", str(lander), rebuilt["stagingCommit"], "--json")
    assert reverted.returncode == 0, reverted.stderr.decode()
    revert_landing = _json(reverted)["verdict"]["stagingCommit"]
    assert git("rev-parse", "refs/integrator/queue/main", cwd=world.canon) == revert_landing

    seen: dict[str, dict[str, dict[str, Any]]] = {task: {} for task in TASKS}
    for task, (state, exit_code) in EXPECTED.items():
        sid = sids[task]
        for name, (code, doc) in {
            "spool": _spool_status(spool, sid),
            "spool --until promoted": _spool_status(spool, sid, "--until", "promoted"),
            "intake": _intake_status(world, agents[task], sid, "--task", task),
            "intake --until promoted": _intake_status(
                world, agents[task], sid, "--task", task, "--until", "promoted"
            ),
            "mcp spool": _read_verdict(agents[task], SpoolTransport(spool), sid, task),
            "mcp intake": _read_verdict(
                agents[task], IntakeTransport(world.intake, agents[task]), sid, task
            ),
        }.items():
            assert code == exit_code, (task, name, doc)
            assert doc["landing"]["state"] == state, (task, name, doc)
            seen[task][name] = doc["landing"]
    history = _json(cli("history", "--spool", str(spool), "--json"))
    for task in TASKS:
        decisions = [
            r for r in history if r["submission"] == sids[task] and r["kind"] == "decision"
        ]
        assert len(decisions) == 1, history
        seen[task]["history"] = decisions[0]["landing"]
    for task, documents in seen.items():
        first = documents["spool"]
        assert all(d == first for d in documents.values()), (task, documents)
    assert seen["t1"]["spool"]["ejection"]["code"] == "VALIDATION_FAILED"
    assert seen["t1"]["spool"]["ejection"]["detail"]
    assert seen["t2"]["spool"]["revertedBy"] == revert_landing
    text = cli("history", "--spool", str(spool)).stdout.decode()
    assert f"[landing: reverted by {revert_landing[:12]}]" in text
    assert "[landing: ejected (VALIDATION_FAILED)]" in text

    _other_readers(world, tmp_path, sids, agents, seen)

    server = _serve_pages(spool, lander)
    try:
        _check_pages(server, sids, seen, browser)
    finally:
        os.kill(server[1].pid, signal.SIGTERM)
        server[1].communicate(timeout=20)


def _other_readers(
    world: RemoteWorld,
    tmp_path: Path,
    sids: dict[str, str],
    agents: dict[str, Path],
    seen: dict[str, dict[str, dict[str, Any]]],
) -> None:
    """A fork's clone, agents reading at once from worktrees of one clone, the text form."""
    # A clone whose origin holds no queue (a fork) reading a separate intake: no server to
    # tell the landing from, so --until promoted says so (4, naming --canonical); naming the
    # canonical repository answers as every other channel does.
    fork, reader = tmp_path / "fork.git", tmp_path / "reader"
    git("clone", "-q", "--bare", world.url, str(fork), cwd=tmp_path)
    git("clone", "-q", str(fork), str(reader), cwd=tmp_path)
    done = cli("status", "--intake", world.intake, "--submission", sids["t2"], "--task", "t2",
               "--repo", str(reader), "--until", "promoted")  # fmt: skip
    assert done.returncode == 4 and b"--canonical URL" in done.stderr, done.stderr
    code, doc = _intake_status(world, reader, sids["t2"], "--task", "t2", "--canonical", world.url)
    assert code == 1 and doc["landing"] == seen["t2"]["spool"], doc
    # Agents in worktrees of one clone share its private refs: reads at once, each the
    # clone's first (every private ref created by every fetch), all answer.
    worktrees = [world.agent("shared")]
    for n in range(5):
        path = tmp_path / f"wt{n}"
        git("worktree", "add", "-q", "--detach", str(path), cwd=worktrees[0])
        worktrees.append(path)
    argv = [sys.executable, "-m", "integrator", "status", "--intake", world.intake,
            "--submission", sids["t0"], "--task", "t0", "--json", "--repo"]  # fmt: skip
    env = {**os.environ, **GIT_ENV}
    reads = [
        subprocess.Popen(
            [*argv, str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        for path in worktrees
    ]
    for proc in reads:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
        assert json.loads(out)["landing"] == seen["t0"]["spool"]
    text = cli("status", "--intake", world.intake, "--submission", sids["t1"], "--task", "t1",
               "--repo", str(agents["t1"])).stdout.decode()  # fmt: skip
    assert "FENCED (VALIDATION_FAILED)" in text and "landing: ejected from the queue" in text


def _serve_pages(spool: Path, repo: Path) -> tuple[str, subprocess.Popen[str]]:
    args = [sys.executable, "-m", "integrator", "review", "web", "--spool", str(spool),
            "--repo", str(repo), "--http", "127.0.0.1:0"]  # fmt: skip
    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={**os.environ, **GIT_ENV},
    )  # fmt: skip
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("review pages on http://127.0.0.1:"), line
    return line.split()[3], proc


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=20) as response:
        body: bytes = response.read()
    return body.decode()


def _check_pages(
    server: tuple[str, subprocess.Popen[str]],
    sids: dict[str, str],
    seen: dict[str, dict[str, dict[str, Any]]],
    browser: Any,
) -> None:
    """The Queue page's Landed submissions table, the Held list and the ejected candidate's
    page say what the other channels said, over HTTP and in a real browser; the agent's
    commit messages on the page are text, never markup."""
    url = server[0]
    queue = _get(f"{url}queue")
    rows = dict(re.findall(r'<tr data-sid="([^"]+)" data-state="([^"]+)">', queue))
    assert rows == {sids[task]: state for task, (state, _) in EXPECTED.items()}, rows
    assert f"reverted by {seen['t2']['spool']['revertedBy'][:12]}" in queue
    assert "<b>t0</b>" not in queue and "&lt;b&gt;t0&lt;/b&gt;" in queue
    assert "\x1b" not in queue and "\\x1b[31mwork" in queue
    landed = re.findall(r'<tr data-commit="([0-9a-f]+)" data-state="([^"]+)">', queue)
    assert ("reverted" in dict(landed).values()) and ("promoted" in dict(landed).values())
    held = _get(url)
    assert "ejected (VALIDATION_FAILED)" in held
    page = _get(f"{url}held/{sids['t1']}")
    assert '<section id="landing" data-state="ejected">' in page
    why = seen["t1"]["spool"]["ejection"]["detail"].splitlines()[0]
    assert why.replace('"', "&#34;").replace("'", "&#39;")[:40] in page

    from selenium.webdriver.common.by import By

    browser.get(f"{url}queue")
    shown = {
        row.get_attribute("data-sid"): (row.get_attribute("data-state"), row.text)
        for row in browser.find_elements(By.CSS_SELECTOR, "#accepted tbody tr[data-sid]")
    }
    for task, (state, _) in EXPECTED.items():
        assert shown[sids[task]][0] == state, shown
    assert "ejected (VALIDATION_FAILED)" in shown[sids["t1"]][1]
    browser.get(f"{url}held/{sids['t1']}")
    section = browser.find_element(By.ID, "landing")
    assert section.get_attribute("data-state") == "ejected"
    assert "VALIDATION_FAILED" in section.text
