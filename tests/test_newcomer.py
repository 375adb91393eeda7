"""A newcomer's first day, from a fresh wheel install in a fresh folder: the README's quick
start in the order the README gives it (prepare, issue, the CI gate in a plain clone, a
daemon on a spool, a submission from a separate clone, the overview, review, history),
with nothing the reader would learn only later; then docs/remote.md's setup with two
integrator hosts, an intake and docs/validation.md's `[validation]` on a real `git daemon`,
and the review page of docs/review.md.

Heavy (it builds the wheel and installs it, with its dependencies, into a new virtual
environment): it runs only with INTEGRATOR_NEWCOMER=1 (`make newcomer`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.git_server import git_daemon

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(
    os.environ.get("INTEGRATOR_NEWCOMER") != "1",
    reason="builds and installs the wheel: INTEGRATOR_NEWCOMER=1 (make newcomer)",
)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtual environment with the freshly built wheel installed: its bin folder."""
    work = tmp_path_factory.mktemp("install")
    wheels = work / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(ROOT)],
        check=True, capture_output=True,
    )  # fmt: skip
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    (wheel,) = wheels.glob("integrator-*.whl")
    subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", str(wheel)], check=True, capture_output=True
    )
    return venv / "bin"


class Shell:
    """Commands run as a reader types them: in `cwd`, with the install first on PATH."""

    def __init__(self, bin_dir: Path, cwd: Path) -> None:
        self.cwd = cwd
        self.env = {
            k: v for k, v in os.environ.items() if not k.startswith(("INTEGRATOR_", "PYTHON"))
        }
        self.env.update(
            PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            XDG_CONFIG_HOME=str(cwd / ".config"),
            GIT_AUTHOR_NAME="new", GIT_AUTHOR_EMAIL="new@example.invalid",
            GIT_COMMITTER_NAME="new", GIT_COMMITTER_EMAIL="new@example.invalid",
            GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull,
        )  # fmt: skip

    def run(self, *argv: str, cwd: Path | None = None, ok: int = 0) -> str:
        done = subprocess.run(
            list(argv), cwd=cwd or self.cwd, env=self.env, capture_output=True, text=True,
            check=False, timeout=300,
        )  # fmt: skip
        assert done.returncode == ok, f"{argv}: exit {done.returncode}\n{done.stderr}"
        return done.stdout

    def spawn(self, *argv: str, log: Path) -> subprocess.Popen[bytes]:
        with log.open("wb") as out:
            return subprocess.Popen(list(argv), cwd=self.cwd, env=self.env, stdout=out,
                                    stderr=subprocess.STDOUT)  # fmt: skip


@pytest.fixture
def shell(installed: Path, tmp_path: Path) -> Shell:
    return Shell(installed, tmp_path)


def test_help_and_guides_of_the_installed_wheel(shell: Shell) -> None:
    """From the wheel: --version, the command list, every command's help, and the guides
    the help texts name are files of this install (not paths only a clone has)."""
    assert shell.run("integrator", "--version").startswith("integrator ")
    listing = shell.run("integrator", "--help")
    assert "status" in listing and "config" in listing
    python = str(Path(shell.env["PATH"].split(os.pathsep)[0]) / "python")
    guide = shell.run(
        python, "-c", "from integrator.docpath import doc; print(doc('validation.md'))"
    )
    assert Path(guide.strip()).is_file() and "share/doc/integrator/docs" in guide
    text = shell.run("integrator", "promote", "--help")
    assert guide.strip() in "".join(text.split()), text  # argparse wraps it anywhere
    hints = shell.run("integrator", "schema", "show", "contract")
    assert json.loads(hints)["title"]


def test_the_quick_start_in_readme_order(shell: Shell, tmp_path: Path) -> None:
    """README "Using it", top to bottom, with local paths for the server's."""
    canon = tmp_path / "product.git"
    seed = tmp_path / "seed"
    shell.run("git", "init", "-q", "-b", "main", str(seed))
    (seed / "packages" / "billing").mkdir(parents=True)
    (seed / "packages" / "billing" / "invoice.py").write_text("total = 1\n")
    shell.run("git", "add", "-A", cwd=seed)
    shell.run("git", "commit", "-qm", "initial", cwd=seed)
    shell.run("git", "clone", "-q", "--bare", str(seed), str(canon))
    shell.run("integrator", "init", "--repo", str(canon))
    shell.run(
        "integrator", "contract", "issue", "--repo", str(canon), "--task", "billing",
        "--path", "packages/billing/**", "--holder", "agent-7", "--lease", "45m",
        "-o", "billing.json",
    )  # fmt: skip
    # CI: a plain clone, the claim refs fetched first (as the README now says), then the gate.
    clone = tmp_path / "ci"
    shell.run("git", "clone", "-q", str(canon), str(clone))
    (clone / "packages" / "billing" / "invoice.py").write_text("total = 2\n")
    shell.run("git", "commit", "-qam", "billing: total 2", cwd=clone)
    shell.run("git", "fetch", "-q", "origin", "+refs/integrator/*:refs/integrator/*", cwd=clone)
    gate = shell.run(
        "integrator", "gate", "--repo", ".", "--contract", str(tmp_path / "billing.json"),
        "--candidate", "HEAD", "--json", cwd=clone,
    )  # fmt: skip
    assert json.loads(gate)["decision"] == "ACCEPTED"
    # A daemon on a spool first (it makes the spool), then the agent's submission from its
    # separate clone, with --bundle.
    spool = tmp_path / "spool"
    daemon = shell.spawn(
        "integrator", "serve", "--repo", str(canon), "--spool", str(spool), "--poll", "0.2",
        log=tmp_path / "serve.log",
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not (spool / "new").is_dir():
            assert time.monotonic() < deadline, (tmp_path / "serve.log").read_text()
            time.sleep(0.1)
        verdict = shell.run(
            "integrator", "submit", "--spool", str(spool), "--contract",
            str(tmp_path / "billing.json"), "--candidate", "HEAD", "--repo", str(clone),
            "--bundle", "--wait", "120", "--json",
        )  # fmt: skip
        assert json.loads(verdict)["verdict"]["decision"] == "ACCEPTED"
        overview = shell.run("integrator", "status", "--spool", str(spool))
        assert "accepted 1" in overview and "no live claims" in overview
        assert "nothing is held" in shell.run("integrator", "review", "list", "--spool", str(spool))
        assert "ACCEPTED" in shell.run("integrator", "history", "--spool", str(spool))
    finally:
        daemon.terminate()
        daemon.wait(60)
    log = shell.run("git", "--git-dir", str(canon), "log", "--oneline", "main")
    assert "billing: total 2" in log


def _page_url(log: Path, proc: subprocess.Popen[bytes]) -> str:
    """The address `review web` prints once it listens (port 0 picks a free one)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        for line in log.read_text("utf-8", "replace").splitlines():
            if line.startswith("review pages on "):
                return line.split()[3]
        time.sleep(0.1)
    raise AssertionError(f"review web did not listen: {log.read_text('utf-8', 'replace')}")


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as answer:
        assert answer.status == 200, url
        return str(answer.read().decode("utf-8"))


def _prepare_remote(shell: Shell, tmp_path: Path, url: str) -> None:
    """docs/remote.md, "Setting up": the project on the server, `init --remote` on each
    integrator host and on the coordinator's own mirror; docs/validation.md's section set
    in the policy before any contract is issued (setting a policy revokes live ones)."""
    seed = tmp_path / "seed"
    shell.run("git", "init", "-q", "-b", "main", str(seed))
    for task in TASKS:
        (seed / task).mkdir()
        (seed / task / "code.py").write_text(f"{task} = 1\n")
    shell.run("git", "add", "-A", cwd=seed)
    shell.run("git", "commit", "-qm", "initial", cwd=seed)
    shell.run("git", "push", "-q", url, "HEAD:refs/heads/main", cwd=seed)
    for host in ("host-a", "host-b", "coordinator"):
        shell.run("integrator", "init", "--repo", f"{host}.git", "--remote", url)
    policy = shell.run("integrator", "policy", "init")
    (tmp_path / "policy.toml").write_text(
        policy + '\n[validation]\ncommand = "! grep -rq BROKEN ."\ntimeout = 120\n'
    )
    shell.run("integrator", "policy", "set", "--repo", "coordinator.git", "policy.toml")
    for task in TASKS:
        shell.run(
            "integrator", "contract", "issue", "--repo", "coordinator.git", "--task", task,
            "--path", f"{task}/**", "--lease", "1h", "-o", f"{task}.json",
        )  # fmt: skip


def _agents_submit(shell: Shell, tmp_path: Path, url: str, intake: str) -> dict[str, str]:
    """Each agent clones, `sync`s (the contract's base is the unpromoted queue head),
    commits and submits to the intake: the submission ids, by task."""
    sids = {}
    for task, text in TASKS.items():
        clone = tmp_path / f"agent-{task}"
        shell.run("git", "clone", "-q", url, str(clone))
        shell.run("integrator", "sync", "--contract", str(tmp_path / f"{task}.json"), cwd=clone)
        (clone / task / "code.py").write_text(text)
        shell.run("git", "commit", "-qam", f"{task}: work", cwd=clone)
        sids[task] = shell.run(
            "integrator", "submit", "--intake", intake, "--contract",
            str(tmp_path / f"{task}.json"), "--candidate", "HEAD", "--repo", str(clone),
        ).strip()  # fmt: skip
    return sids


def _page_holding(pages: list[str], sid: str) -> str:
    """The review page (of whichever host decided the ejection) that lists `sid` as held."""
    deadline = time.monotonic() + 120
    while True:
        for page in pages:
            if sid in _get(page + "api/held"):
                return page
        assert time.monotonic() < deadline, f"no host holds {sid}"
        time.sleep(0.5)


TASKS = {"billing": "billing = 2\n", "auth": "auth = 'BROKEN'\n"}


def test_two_hosts_validation_and_the_page(shell: Shell, tmp_path: Path) -> None:
    """docs/remote.md's setup in its order (each integrator host `init --remote`, the
    coordinator its own mirror, an intake, agents that `sync` and submit), with
    docs/validation.md's `[validation]` section, on a real `git daemon`; then the review
    page (docs/review.md). Of two changes, the one that passes is promoted to the target;
    the one its validation fails is ejected, and the page of the host that ejected it
    holds it."""
    with git_daemon(tmp_path / "srv") as server:
        server.bare("canon")
        server.bare("intake")
        url, intake = server.url("canon"), server.url("intake")
        _prepare_remote(shell, tmp_path, url)
        hosts = ("host-a", "host-b")
        serve = ("integrator", "serve", "--intake", intake, "--poll", "0.3")
        procs = [
            shell.spawn(*serve, "--repo", f"{h}.git", "--spool", f"spool-{h}", log=tmp_path / h)
            for h in hosts
        ]
        try:
            sids = _agents_submit(shell, tmp_path, url, intake)
            for task, ok in (("billing", 0), ("auth", 1)):
                told = shell.run(
                    "integrator", "status", "--intake", intake, "--submission", sids[task],
                    "--contract", str(tmp_path / f"{task}.json"), "--candidate", "HEAD",
                    "--repo", str(tmp_path / f"agent-{task}"), "--wait", "240",
                    "--until", "promoted", "--json", ok=ok,
                )  # fmt: skip
                assert ("VALIDATION_FAILED" in told) is (task == "auth"), told
            canon = str(server.root / "canon.git")
            assert shell.run("git", "--git-dir", canon, "show", "main:billing/code.py") == (
                "billing = 2\n"
            )
            assert shell.run("git", "--git-dir", canon, "show", "main:auth/code.py") == (
                "auth = 1\n"
            )
            pages = []
            for host in hosts:
                log = tmp_path / f"web-{host}.log"
                procs.append(shell.spawn("integrator", "review", "web", "--spool",
                                         f"spool-{host}", "--http", "127.0.0.1:0", log=log))  # fmt: skip
                pages.append(_page_url(log, procs[-1]))
                assert "Queue" in _get(pages[-1] + "queue")
            holder = _page_holding(pages, sids["auth"])
            candidate = _get(f"{holder}held/{sids['auth']}")
            assert "VALIDATION_FAILED" in candidate, candidate
            assert sids["billing"] not in _get(holder + "api/held")
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(60)
