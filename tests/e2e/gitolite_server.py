"""A real gitolite behind a real sshd on 127.0.0.1 for the end-to-end checks: Debian's
gitolite3 in a throwaway system account, OpenSSH's sshd on a free port with a throwaway host
key, and one ed25519 key per person (integrator, coordinator, agents). Everything lives in
one temporary folder; the account is deleted and sshd stopped by its PID afterwards."""

from __future__ import annotations

import contextlib
import os
import pwd
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

SSHD = "/usr/sbin/sshd"
GITOLITE = shutil.which("gitolite") or "/usr/bin/gitolite"
DOCS = Path(__file__).resolve().parents[2] / "docs"

SSHD_CONFIG = """\
ListenAddress 127.0.0.1
Port {port}
HostKey {root}/host_ed25519
PidFile {root}/sshd.pid
AllowUsers {user}
AuthorizedKeysFile .ssh/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
UsePAM no
StrictModes yes
AcceptEnv none
LogLevel VERBOSE
"""


def missing() -> str | None:
    """Why the gitolite checks cannot run here (None: they can)."""
    if os.geteuid() != 0:
        return "needs root: it creates a throwaway account for gitolite and runs sshd"
    for tool, package in ((SSHD, "openssh-server"), (GITOLITE, "gitolite3")):
        if not os.access(tool, os.X_OK):
            return f"{tool} is missing (Debian package {package}, in .ci/debian-packages)"
    for tool in ("useradd", "userdel", "runuser", "ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"{tool} is missing"
    return None


def doc_block(doc: str, marker: str) -> str:
    """The fenced block right after the line `<!-- marker -->` in docs/`doc`: what the test
    runs is what a reader pastes."""
    text = (DOCS / doc).read_text("utf-8")
    found = re.search(rf"<!-- {re.escape(marker)} -->\n+```[a-z]*\n(.*?)```", text, re.DOTALL)
    if found is None:
        raise AssertionError(f"docs/{doc} has no block marked <!-- {marker} -->")
    return found.group(1)


@dataclass
class Gitolite:
    root: Path
    user: str
    home: Path
    port: int
    bin: Path  # holds `integrator`, run with an interpreter the account can reach
    proc: subprocess.Popen[bytes] | None = None
    keys: dict[str, Path] = field(default_factory=dict)

    def url(self, repo: str) -> str:
        return f"ssh://{self.user}@127.0.0.1:{self.port}/{repo}"

    def ssh_command(self, who: str) -> str:
        """GIT_SSH_COMMAND for `who`'s key only (no agent, no config, the host key pinned)."""
        return (
            f"ssh -F /dev/null -i {self.keys[who]} -o IdentitiesOnly=yes -o IdentityAgent=none "
            f"-o BatchMode=yes -o StrictHostKeyChecking=yes "
            f"-o UserKnownHostsFile={self.root / 'known_hosts'}"
        )

    def env(self, who: str) -> dict[str, str]:
        return {"GIT_SSH_COMMAND": self.ssh_command(who)}

    def key(self, who: str) -> Path:
        path = self.root / "keys" / who
        if who not in self.keys:
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", who, "-f", str(path)],
                check=True,
            )
            self.keys[who] = path
        return path

    def as_account(self, script: str, *, check: bool = True) -> subprocess.CompletedProcess[str]:
        """`sh -e -c script` as the gitolite account, in its home, `integrator` on PATH."""
        env = {
            "HOME": str(self.home),
            "PATH": f"{self.bin}:/usr/bin:/bin",
            "LC_ALL": "C",
            "USER": self.user,
        }
        done = subprocess.run(
            ["runuser", "-u", self.user, "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()),
             "sh", "-e", "-c", f"cd && {script}"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if check and done.returncode != 0:
            raise AssertionError(f"as {self.user}: {script}\n{done.stdout}{done.stderr}")
        return done


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _traversable(*paths: Path) -> None:
    """Let other accounts pass through (never list) the folders above `paths`: a checkout
    in a private folder (`mktemp -d` makes one 0700) is otherwise out of the account's
    reach, with its environment in it. Only the execute bit is added."""
    for path in paths:
        for folder in (path, *path.parents):
            mode = folder.stat().st_mode
            if not mode & 0o001:
                folder.chmod(mode | 0o001)


def _server_python(root: Path, user: str) -> Path:
    """An interpreter the account can run that imports this checkout's integrator: this one
    when the account can reach it, else a venv of the system's Python (the same version)
    that adds this environment's site-packages."""
    _traversable(Path(sys.prefix), Path(__file__).resolve().parents[2])
    probe = [sys.executable, "-I", "-c", "import integrator"]
    reached = subprocess.run(
        ["runuser", "-u", user, "--", *probe], capture_output=True, check=False
    )
    if reached.returncode == 0:
        return Path(sys.executable)
    system = Path("/usr/bin/python3")
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    if not system.exists() or subprocess.run(
        [str(system), "-c", "import sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}')"],
        capture_output=True, text=True, check=False,
    ).stdout.strip() != version:  # fmt: skip
        raise RuntimeError(
            f"the account cannot run {sys.executable} and /usr/bin/python3 is not Python {version}"
        )
    venv = root / "python"
    subprocess.run([str(system), "-m", "venv", "--without-pip", str(venv)], check=True)
    import site

    dirs = [d for d in site.getsitepackages() if Path(d).is_dir()]
    (venv / "lib" / f"python{version}" / "site-packages" / "integrator-e2e.pth").write_text(
        "".join(f"import site; site.addsitedir({d!r})\n" for d in dirs)
    )
    python = venv / "bin" / "python"
    check = subprocess.run(["runuser", "-u", user, "--", str(python), *probe[1:]],
                           capture_output=True, text=True, check=False)  # fmt: skip
    if check.returncode != 0:
        raise RuntimeError(f"the account cannot import integrator: {check.stderr.strip()}")
    return python


def _wait_listening(port: int, proc: subprocess.Popen[bytes], log: Path) -> bool:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return True
        if proc.poll() is not None:
            return False
        time.sleep(0.05)
    raise AssertionError(f"sshd did not start: {log.read_text(errors='replace')}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, 15)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, 9)
            proc.wait(timeout=10)


def _account_pids(user: str) -> list[int]:
    out = subprocess.run(
        ["ps", "-u", user, "-o", "pid="], capture_output=True, text=True, check=False
    )
    return [int(p) for p in out.stdout.split()]


def _sshd(server: Gitolite) -> None:
    """sshd for the account only, on a free port, with a host key made for it."""
    root = server.root
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                    str(root / "host_ed25519")], check=True)  # fmt: skip
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation
    host_key = (root / "host_ed25519.pub").read_text().split()[:2]
    for _attempt in range(5):
        server.port = _free_port()
        config = root / "sshd_config"
        config.write_text(SSHD_CONFIG.format(port=server.port, root=root, user=server.user))
        subprocess.run([SSHD, "-t", "-f", str(config)], check=True, capture_output=True)
        log = root / "sshd.log"
        with open(log, "wb") as out:
            server.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stdout=out,
                                           stderr=out)  # fmt: skip
        if _wait_listening(server.port, server.proc, log):
            break
    else:
        raise AssertionError("sshd found no free port")
    (root / "known_hosts").write_text(f"[127.0.0.1]:{server.port} {' '.join(host_key)}\n")


def start(admin_keys: list[str]) -> Iterator[Gitolite]:
    """A gitolite with `admin` as its administrator and `admin_keys` made, behind sshd."""
    root = Path(tempfile.mkdtemp(prefix="integrator-gitolite-"))
    root.chmod(0o755)  # the account reaches its home and the interpreter's venv through it
    user = f"integrator-e2e-{os.getpid()}"[:32]
    home = root / "home"
    subprocess.run(
        ["useradd", "--system", "--no-user-group", "--gid", "nogroup", "--home-dir", str(home),
         "--create-home", "--shell", "/bin/sh", user],
        check=True, capture_output=True,
    )  # fmt: skip
    server: Gitolite | None = None
    try:
        # `*` is no password, but not a locked account (sshd without PAM refuses `!`).
        subprocess.run(["usermod", "-p", "*", user], check=True, capture_output=True)
        (root / "keys").mkdir()
        (root / "bin").mkdir()
        server = Gitolite(root, user, home, 0, root / "bin")
        python = _server_python(root, user)
        wrapper = server.bin / "integrator"
        wrapper.write_text(f'#!/bin/sh\nexec {shlex.quote(str(python))} -m integrator "$@"\n')
        wrapper.chmod(0o755)
        for who in ["admin", *admin_keys]:
            server.key(who)
        shutil.copy(server.keys["admin"].with_suffix(".pub"), home / "admin.pub")
        shutil.chown(home / "admin.pub", user)
        server.as_account("gitolite setup -pk admin.pub")
        _sshd(server)
        yield server
    finally:
        if server is not None and server.proc is not None:
            _stop(server.proc)
        for _attempt in range(50):  # a process of the account keeps userdel from working
            for pid in _account_pids(user):  # sessions sshd or runuser started for it
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, 9)
            if subprocess.run(["userdel", user], check=False, capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        shutil.rmtree(root, ignore_errors=True)
        try:
            pwd.getpwnam(user)
        except KeyError:
            pass
        else:
            raise AssertionError(f"the throwaway account {user} could not be deleted")
