"""The team's two faces other than the command line, driven as their users drive them.

The release manager uses the review pages over plain HTTP, as a browser tab does:
`integrator review web` as a process on a free loopback port, a cookie session logged in
with the review token on `/login` (whose answer hands the tab its action key), and the
approve and reject forms posted as the pages' script posts them — the form's CSRF token
and the claim it shows, `Origin` this origin, the key in `X-Integrator-Action`. An agent uses `integrator mcp --intake` over stdio through the
official MCP SDK's client (the SDK starts and ends the server process).
"""

from __future__ import annotations

import html
import http.cookiejar
import re
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from drills.procs import DrillError, wait_until
from drills.repo import environment
from drills.team import Host, TeamWorld

PY = sys.executable
TOKEN = "drill-review-token-" + "r" * 24
EXIT_META = "integrator/exitCode"
ACTION_HEADER = "X-Integrator-Action"  # what the pages' script sends with an action form
SECRET = ("token", "csrf")  # form fields commands.log does not spell out


class ReviewPage:
    """One `integrator review web` process on a host's spool, and a logged-in session."""

    def __init__(self, world: TeamWorld, host: Host, actor: str = "rm-drill") -> None:
        self.world = world
        token = world.root / "review-token"
        token.write_text(TOKEN + "\n")
        token.chmod(0o600)
        self.log = world.logs / f"review-web-{host.name}.log"
        argv = [PY, "-m", "integrator", "review", "web", "--spool", str(host.spool),
                "--repo", str(host.mirror), "--http", "127.0.0.1:0", "--token-file", str(token),
                "--actor", actor]  # fmt: skip
        self.proc = world.ctx.spawn(argv, log=self.log)
        world.note(f"review web on {host.name}'s spool (pid {self.proc.pid})")

        def started() -> str | None:
            if self.proc.poll() is not None:
                raise DrillError(f"review web exited {self.proc.returncode}", [self.log])
            found = re.search(r"review pages on (http://127\.0\.0\.1:\d+/)", self.log.read_text())
            return found.group(1) if found else None

        self.url = wait_until(started, 60, "the review pages to listen", [self.log])
        self.key: str | None = None  # the tab's action key, once logged in
        jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))

    def fetch(
        self, path: str, form: dict[str, str] | None = None, *, act: bool = False
    ) -> tuple[int, str]:
        """GET (or POST the form, urlencoded, from this origin; with `act`, carrying the
        tab's action key as the pages' script does) in the session; (status, body)."""
        data = urllib.parse.urlencode(form).encode() if form is not None else None
        request = urllib.request.Request(self.url + path.lstrip("/"), data=data)
        if form is not None:
            request.add_header("Origin", self.url.rstrip("/"))
        if act and self.key is not None:
            request.add_header(ACTION_HEADER, self.key)
        try:
            with self.opener.open(request, timeout=60) as answer:
                status, body = answer.status, answer.read()
        except urllib.error.HTTPError as err:
            status, body = err.code, err.read()
        text = body.decode("utf-8", "replace")
        with self.world.commands.open("a", encoding="utf-8") as fh:
            verb = "POST" if form is not None else "GET"
            shown = {k: ("…" if k in SECRET else v) for k, v in (form or {}).items()}
            fh.write(f"## review page: {verb} {path} {shown or ''} → {status}\n\n")
        return status, text

    def form(self, path: str, name: str) -> dict[str, str]:
        """The hidden fields of the page's form `name` (its CSRF token, the claim it shows)."""
        status, page = self.fetch(path)
        found = re.search(rf'<form[^>]*id="{name}".*?</form>', page, re.S)
        if status != 200 or found is None:
            raise DrillError(f"GET {path} answered {status} without the {name} form", [self.log])
        hidden = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', found.group(0))
        return {key: html.unescape(value) for key, value in hidden}

    def login(self) -> None:
        """Log in on /login with the token (the form's own fields first); the answer hands
        the tab its action key, which the pages' script would keep in sessionStorage."""
        fields = self.form("/login", "login") | {"token": TOKEN}
        status, page = self.fetch("/login", fields)
        found = re.search(r'id="action-key" data-key="([^"]+)"', page)
        if status != 200 or found is None:
            raise DrillError(f"logging in on the review pages failed ({status})", [self.log])
        self.key = html.unescape(found.group(1))

    def act(self, sid: str, action: str, reason: str) -> tuple[int, str]:
        """Press approve or reject on the candidate's page: its form as shown (CSRF token,
        the claim it shows) with a reason, sent with the action key; (status, decision)."""
        fields = self.form(f"/held/{sid}", action) | {"reason": reason}
        status, page = self.fetch(f"/held/{sid}/{action}", fields, act=True)
        found = re.search(r'id="decision">([A-Z_]+)<', page)
        return status, found.group(1) if found else page[-300:]

    def close(self) -> int:
        self.proc.terminate()
        try:
            return self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def bind_contract(clone: Path, contract: Path) -> Path:
    """Put the contract where the MCP server reads the worktree's contract from (the git
    folder's `integrator/contract.json`, what `task claim` binds), and return the attempt
    key file the server is pointed at through `$INTEGRATOR_ATTEMPT_KEY`.

    There is no command that binds a contract `contract issue -o` wrote to a plain clone
    (`task claim` binds only worktrees of a local fleet): docs/drills.md says so."""
    git_dir = clone / ".git" / "integrator"
    git_dir.mkdir(parents=True, exist_ok=True)
    (git_dir / "contract.json").write_bytes(contract.read_bytes())
    return contract.with_name(contract.name + ".key")


def mcp_calls(
    world: TeamWorld, clone: Path, key: Path, calls: list[tuple[str, dict[str, Any]]]
) -> list[tuple[int, dict[str, Any], str]]:
    """Start `integrator mcp --worktree CLONE --intake URL` over stdio and make the calls in
    order; each answer as (exit code, structured content, text)."""
    import anyio
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    env = environment({"INTEGRATOR_ATTEMPT_KEY": str(key), "INTEGRATOR_AGENT": "agent-mcp"})
    params = StdioServerParameters(
        command=PY,
        args=["-m", "integrator", "mcp", "--worktree", str(clone), "--intake", world.intake],
        env=env,
        cwd=str(clone),
    )
    answers: list[tuple[int, dict[str, Any], str]] = []
    log = world.logs / "mcp.log"  # the server's stderr

    async def run() -> None:
        with log.open("a", encoding="utf-8") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                for name, arguments in calls:
                    result = await client.call_tool(name, arguments)
                    meta = result.meta or {}
                    content = result.structured_content
                    doc = dict(content) if isinstance(content, dict) else {}
                    texts = [getattr(block, "text", "") for block in result.content]
                    answers.append((int(meta.get(EXIT_META, -1)), doc, " ".join(texts)))

    anyio.run(run)
    for (name, arguments), (code, _, text) in zip(calls, answers, strict=True):
        with world.commands.open("a", encoding="utf-8") as fh:
            fh.write(f"## mcp {name} {arguments} → exit {code}\n{text[:4000]}\n\n")
    return answers
