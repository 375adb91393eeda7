"""`make demo-remote`: the canonical repository on a git server, two integrators, an intake.

A `git daemon` on 127.0.0.1 serves a canonical repository and an intake. Two integrator
hosts (each its own mirror) serve them at once; four agents, each in its own clone, push
their candidates to the intake — one stale after a reclaim, one out of its contract — and
read their verdicts back. The server's refs show one landing per valid candidate.

Every step runs the real `integrator` command as a process; the git daemon is stopped by
its PID at the end.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from integrator.demo.stage import BOLD, DIM, ENV, RESET, Demo

PROJECT = {
    "billing/invoice.py": "def total(lines):\n    return sum(lines)\n",
    "auth/login.py": "def login(user):\n    return user\n",
    "docs/guide.md": "# Guide\n",
    "search/index.py": "def search(q):\n    return []\n",
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_git_daemon(root: Path) -> tuple[subprocess.Popen[bytes], int]:
    """`git daemon --enable=receive-pack` on 127.0.0.1, once it says it listens."""
    exec_path = subprocess.run(
        ["git", "--exec-path"], capture_output=True, text=True, check=True
    ).stdout.strip()
    for attempt in range(5):
        port = _free_port()
        log = root / f"git-daemon-{attempt}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [f"{exec_path}/git-daemon", "--reuseaddr", "--verbose", "--export-all",
                 "--enable=receive-pack", f"--base-path={root}", "--listen=127.0.0.1",
                 f"--port={port}"],
                stdout=subprocess.DEVNULL, stderr=out, env=ENV,
            )  # fmt: skip
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and proc.poll() is None:
            if b"Ready to rumble" in log.read_bytes():
                return proc, port
            time.sleep(0.05)
        proc.kill()
        proc.wait()
    raise SystemExit("the demo could not start git daemon on 127.0.0.1")


def act(demo: Demo, url: str, intake: str) -> None:
    root = demo.root
    demo.say("1. A canonical repository on a git server, prepared from an integrator host")
    seed = root / "seed"
    demo.git("init", "-q", "-b", "main", str(seed), cwd=root)
    for path, text in PROJECT.items():
        (seed / path).parent.mkdir(parents=True, exist_ok=True)
        (seed / path).write_text(text)
    demo.git("add", "-A", cwd=seed)
    demo.git("commit", "-qm", "initial project", cwd=seed)
    demo.shell(f"git -C seed push -q {url} HEAD:refs/heads/main   # the project, on the server")
    demo.git("push", "-q", url, "HEAD:refs/heads/main", cwd=seed)
    # Each integrator host prepares its own mirror of the server before it serves (the
    # first `init --remote` also prepares the server's refs: queue, policy).
    print(demo.run("integrator", "init", "--repo", "host-a.git", "--remote", url).rstrip())
    print(demo.run("integrator", "init", "--repo", "host-b.git", "--remote", url).rstrip())

    demo.say("2. The coordinator issues contracts; 'search' is reclaimed (generation 2)")
    for task in ("billing", "auth", "docs", "search"):
        demo.run(
            "integrator", "contract", "issue", "--repo", "host-a.git", "--task", task,
            "--path", f"{task}/**", "--lease", "1h", "-o", f"{task}.json", show=task == "billing",
        )  # fmt: skip
    demo.shell("# ... and the same for auth, docs and search")
    demo.run("integrator", "contract", "reclaim", "--repo", "host-a.git", "--task", "search",
             "--force", "-o", "search-gen2.json")  # fmt: skip

    demo.say("3. Two integrator hosts serve the canonical repository and the intake")
    for host in ("host-a", "host-b"):
        demo.shell(
            f"integrator serve --repo {host}.git --spool spool-{host} --intake {intake} "
            f"--poll 0.3 --log-format json > {host}.log 2>&1 &"
        )
    daemons = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "integrator",
                "serve",
                "--repo",
                f"{host}.git",
                "--spool",
                f"spool-{host}",
                "--intake",
                intake,
                "--poll",
                "0.3",
                "--log-format",
                "json",
            ],
            cwd=root,
            env=ENV,
            stdout=(root / f"{host}.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
        for host in ("host-a", "host-b")
    ]
    try:
        _agents(demo, url, intake)
    finally:
        for proc in daemons:
            proc.send_signal(signal.SIGTERM)
        for proc in daemons:
            proc.wait(timeout=60)
    demo.say("5. What the server holds: one landing per valid candidate")
    print(demo.git("--git-dir", str(root / "srv" / "canon.git"), "log", "--oneline", "main"))


def _agents(demo: Demo, url: str, intake: str) -> None:
    demo.say("4. Agents on other machines push to the intake and wait for their verdicts")
    work = {
        "agent-1": (
            "billing.json",
            {"billing/invoice.py": "def total(l):\n    return round(sum(l), 2)\n"},
        ),
        "agent-2": ("auth.json", {"auth/login.py": "def login(user):\n    return user.strip()\n"}),
        "agent-3": ("docs.json", {"docs/guide.md": "# Guide\n", "billing/invoice.py": "oops\n"}),
        "agent-4": ("search.json", {"search/index.py": "def search(q):\n    return [q]\n"}),
    }
    sids: dict[str, tuple[str, str]] = {}
    for agent, (contract, files) in work.items():
        clone = demo.root / "agents" / agent
        if agent == "agent-1":
            demo.shell(f"git clone -q {url} agents/{agent}   # then edit, git commit -qam ...")
        demo.git("clone", "-q", url, str(clone), cwd=demo.root)
        for path, text in files.items():
            (clone / path).write_text(text)
        demo.git("commit", "-qam", f"{agent}: work", cwd=clone)
        out = demo.run("integrator", "submit", "--intake", intake, "--contract", contract,
                       "--candidate", "HEAD", "--repo", str(clone), show=agent == "agent-1")  # fmt: skip
        sids[agent] = (out.strip(), contract)
    demo.shell("# ... and the same for agent-2, agent-3 and agent-4")
    for agent, (sid, contract) in sids.items():
        shown = demo.run("integrator", "status", "--intake", intake, "--submission", sid,
                         "--contract", contract, "--candidate", "HEAD",
                         "--repo", str(demo.root / "agents" / agent), "--wait", "60",
                         show=agent == "agent-1", ok=(0, 1, 3))  # fmt: skip
        print(f"   {agent}: {shown.strip().splitlines()[0]}")


def main() -> int:
    keep = "--keep" in sys.argv
    root = Path(tempfile.mkdtemp(prefix="integrator-demo-remote-"))
    (root / "srv").mkdir()
    for name in ("canon", "intake"):
        bare = str(root / "srv" / f"{name}.git")
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", bare], check=True, env=ENV)
    server, port = start_git_daemon(root / "srv")
    print(f"{BOLD}integrator remote demo{RESET}: git daemon on 127.0.0.1:{port} (pid {server.pid})")
    print(f"   in {root}")
    print(
        f"{DIM}$ git init --bare srv/canon.git && git init --bare srv/intake.git\n"
        f"$ git daemon --export-all --enable=receive-pack --base-path=srv "
        f"--listen=127.0.0.1 --port={port} &{RESET}"
    )
    try:
        act(Demo(root), f"git://127.0.0.1:{port}/canon.git", f"git://127.0.0.1:{port}/intake.git")
    finally:
        os.kill(server.pid, signal.SIGTERM)
        server.wait(timeout=10)
        if not keep:
            subprocess.run(["rm", "-rf", str(root)], check=False)
    kept = f"The folder is kept: {root}"
    hint = f"{DIM}(python -m integrator.demo.remote --keep keeps the folder){RESET}"
    print(f"\n{BOLD}Done.{RESET} " + (kept if keep else hint))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
