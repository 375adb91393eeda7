"""The demos' stage: a throwaway folder, real `integrator` processes, narration."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

BOLD = "\033[1m" if sys.stdout.isatty() else ""

DIM = "\033[2m" if sys.stdout.isatty() else ""

RESET = "\033[0m" if sys.stdout.isatty() else ""

ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "demo",
    "GIT_AUTHOR_EMAIL": "demo@example.invalid",
    "GIT_COMMITTER_NAME": "demo",
    "GIT_COMMITTER_EMAIL": "demo@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "NO_COLOR": "1",
}


class Demo:
    def __init__(self, root: Path) -> None:
        self.root = root

    def say(self, text: str) -> None:
        print(f"\n{BOLD}{text}{RESET}")

    def run(
        self, *args: str, cwd: Path | None = None, show: bool = True, ok: tuple[int, ...] = (0,)
    ) -> str:
        if show:
            shown = " ".join(shlex.quote(a) for a in args)
            print(f"{DIM}$ {shown}{RESET}")
        argv = (
            [sys.executable, "-m", "integrator", *args[1:]]
            if args[0] == "integrator"
            else list(args)
        )
        proc = subprocess.run(
            argv, cwd=cwd or self.root, env=ENV, capture_output=True, text=True, check=False
        )
        if proc.returncode not in ok:
            sys.stderr.write(proc.stdout + proc.stderr)
            raise SystemExit(f"demo step failed ({proc.returncode}): {' '.join(args)}")
        return proc.stdout

    def shell(self, line: str) -> None:
        """Show a command line the demo runs another way (in the background, or by hand)."""
        print(f"{DIM}$ {line}{RESET}")

    def git(self, *args: str, cwd: Path | None = None) -> str:
        return self.run("git", *args, cwd=cwd, show=False).strip()

    def worktree(self, name: str) -> Path:
        path = self.root / "agents" / name
        self.git(
            "worktree", "add", "-q", "--detach", str(path), "main", cwd=self.root / "canonical"
        )
        return path

    def candidate(
        self,
        agent: str,
        files: dict[str, str | None],
        message: str,
        links: dict[str, str] | None = None,
    ) -> str:
        tree = self.worktree(agent)
        for path, content in files.items():
            target = tree / path
            if content is None:
                target.unlink()
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
        for path, dest in (links or {}).items():
            (tree / path).parent.mkdir(parents=True, exist_ok=True)
            os.symlink(dest, tree / path)
        self.git("add", "-A", cwd=tree)
        self.git("commit", "-qm", message, cwd=tree)
        return self.git("rev-parse", "HEAD", cwd=tree)
