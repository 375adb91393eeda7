#!/usr/bin/env python3
"""Validate integrator's queue heads on a Buildbot master (docs/ci-engines.md).

With `[validation] mode = "external"` the promoter runs nothing itself: it waits for
results. This bridge makes Buildbot produce them, through the two calls any CI engine uses:

1. `integrator validation request --repo R --json` — the heads the promoter wants now;
2. for each new one, a build forced through Buildbot's REST API (the ForceScheduler of
   contrib/buildbot/master.cfg: the queue ref as the branch, the head as the revision), on
   whichever worker is free, so several heads are validated at once;
3. once a build is complete, `integrator validation report --repo R --head H --status
   pass|fail --log <the build's page> --reporter buildbot`.

Only the suite step's failure fails a head. A build that broke elsewhere (the checkout, a
lost worker, a cancel) says nothing about the head: it is forced again, at most
`--retries` times, and after that left to the request's timeout. A build is reported only
if Buildbot says it built exactly the head asked for (its `got_revision`).

On a master with accounts (INTEGRATOR_BUILDBOT_USERS in master.cfg) give the bridge its
own in INTEGRATOR_BUILDBOT_AUTH=user:password: it logs in and keeps the session cookie.

The bridge keeps its state in memory; after a restart it may force a head again, which is
harmless (the first result recorded for a head stands; an identical one is accepted).

Standard library only. Run it beside `integrator serve` or `integrator promote`:

    python3 integrator_buildbot.py --repo /srv/integrator/mirror.git \
        --buildbot http://127.0.0.1:8010 [--poll 5] [--once]
"""

from __future__ import annotations

import argparse
import base64
import http.cookiejar
import json
import os
import shlex
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

SUCCESS, WARNINGS, FAILURE = 0, 1, 2  # Buildbot's result codes (the others: not decided)
QUEUE = "refs/integrator/queue/"


@dataclass
class Build:
    """One forced build request for one head."""

    head: str
    tree: str
    branch: str
    request: int  # the Buildbot build request id
    tries: int


class Buildbot:
    """Buildbot's REST API (www/rest): the force call and the reads the bridge needs."""

    def __init__(self, url: str, auth: str | None, timeout: float = 30) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.auth = auth
        # Buildbot's REST API takes no credentials per request: a login (/auth/login, with
        # HTTP basic auth) sets a session cookie, which every later call sends.
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )
        self.logged_in = False

    def login(self) -> None:
        assert self.auth is not None
        basic = "Basic " + base64.b64encode(self.auth.encode()).decode()
        request = urllib.request.Request(f"{self.url}/auth/login", headers={"Authorization": basic})
        with self.opener.open(request, timeout=self.timeout):
            pass
        self.logged_in = True

    def _call(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        if self.auth and not self.logged_in:
            self.login()
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            f"{self.url}/api/v2/{path}", data=data, headers={"Content-Type": "application/json"}
        )
        try:
            with self.opener.open(request, timeout=self.timeout) as answer:
                document: dict[str, Any] = json.loads(answer.read())
        except urllib.error.HTTPError as err:
            if err.code == 403:
                self.logged_in = False  # the session lapsed (a master restart): log in again
            raise
        return document

    def force(self, scheduler: str, builder: str, head: str, branch: str, tree: str) -> int:
        """Force one build of `head`; the build request id."""
        answer = self._call(
            f"forceschedulers/{scheduler}",
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "force",
                "params": {
                    "builderNames": [builder],
                    "branch": branch,
                    "revision": head,
                    "repository": "",
                    "project": "",
                    "reason": f"integrator validation of {head}",
                    "integrator_tree": tree,
                },
            },
        )
        if "error" in answer:
            raise RuntimeError(f"Buildbot refused the force: {answer['error']}")
        _set, requests = answer["result"]
        return int(next(iter(requests.values())))

    def finished(self, request: int) -> dict[str, Any] | None:
        """The build that ran `request` once the request is complete (None: not yet, or
        completed without a build: cancelled before it started)."""
        (row,) = self._call(f"buildrequests/{request}")["buildrequests"]
        if not row["complete"]:
            return None
        builds = self._call(f"buildrequests/{request}/builds?property=got_revision")["builds"]
        return builds[-1] if builds else {"results": row["results"], "buildid": None}

    def suite_failed(self, build: dict[str, Any], step: str) -> bool:
        steps = self._call(f"builds/{build['buildid']}/steps")["steps"]
        return any(s["name"] == step and s["results"] == FAILURE for s in steps)

    def page(self, build: dict[str, Any]) -> str:
        return f"{self.url}/#/builders/{build['builderid']}/builds/{build['number']}"


def verdict(buildbot: Buildbot, build: dict[str, Any], head: str, step: str) -> str | None:
    """pass, fail, or None when the build decided nothing about the head."""
    if build.get("buildid") is None:
        return None
    got = (build.get("properties") or {}).get("got_revision", [None])[0]
    if got != head:
        return None  # it built something else: never report that for this head
    if build["results"] in (SUCCESS, WARNINGS):
        return "pass"
    if build["results"] == FAILURE and buildbot.suite_failed(build, step):
        return "fail"
    return None


class Bridge:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.integrator = shlex.split(args.integrator)
        self.buildbot = Buildbot(args.buildbot, os.environ.get("INTEGRATOR_BUILDBOT_AUTH"))
        self.builds: dict[str, Build] = {}  # by head
        self.given_up: set[str] = set()

    def _integrator(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.integrator, *argv, "--repo", self.args.repo],
            capture_output=True, text=True, check=False,
        )  # fmt: skip

    def requested(self) -> list[dict[str, Any]]:
        done = self._integrator("validation", "request", "--json")
        if done.returncode != 0:
            raise RuntimeError(f"integrator validation request: {done.stderr.strip()}")
        found: list[dict[str, Any]] = json.loads(done.stdout)
        return found

    def force(self, head: str, tree: str, branch: str, tries: int) -> None:
        request = self.buildbot.force(self.args.scheduler, self.args.builder, head, branch, tree)
        self.builds[head] = Build(head, tree, branch, request, tries)
        say(f"forced build request {request} for {head} (try {tries})")

    def report(self, build: Build, status: str, log: str) -> None:
        done = self._integrator(
            "validation", "report", "--head", build.head, "--status", status, "--log", log,
            "--reporter", "buildbot",
        )  # fmt: skip
        # 0 recorded; 1 another result was recorded first; 2 no longer a queue head.
        say(f"reported {build.head} {status} ({log}): exit {done.returncode} {done.stderr.strip()}")

    def round(self) -> None:
        wanted = {r["head"]: r for r in self.requested()}
        for head, request in wanted.items():
            if head not in self.builds and head not in self.given_up:
                target = str(request["target"]).removeprefix("refs/heads/")
                self.force(head, request["tree"], QUEUE + target, 1)
        for head, build in list(self.builds.items()):
            done = self.buildbot.finished(build.request)
            if done is None:
                continue
            del self.builds[head]
            status = verdict(self.buildbot, done, head, self.args.suite_step)
            if status is not None:
                self.report(build, status, self.buildbot.page(done))
            elif head not in wanted:
                continue  # nobody needs it any more (promoted, or the queue was rebuilt)
            elif build.tries <= self.args.retries:
                self.force(head, build.tree, build.branch, build.tries + 1)
            else:
                self.given_up.add(head)
                say(f"{head}: {build.tries} builds decided nothing; left to the timeout")

    def run(self) -> int:
        while True:
            try:
                self.round()
            except (OSError, urllib.error.URLError, RuntimeError, ValueError, KeyError) as err:
                # Buildbot or integrator unreachable: a host problem, never a head's fault.
                say(f"round failed, trying again: {err}")
                if self.args.once:
                    return 4
            if self.args.once and not self.builds:
                return 0
            time.sleep(self.args.poll)


def say(text: str) -> None:
    print(f"integrator-buildbot: {text}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", required=True, help="the canonical repository (or mirror)")
    parser.add_argument("--buildbot", required=True, help="the master's URL (its buildbotURL)")
    parser.add_argument("--scheduler", default="integrator-validate", help="ForceScheduler name")
    parser.add_argument("--builder", default="integrator-validate", help="the builder's name")
    parser.add_argument("--suite-step", default="suite", help="the step whose failure fails")
    parser.add_argument("--retries", type=int, default=2, help="builds that decide nothing")
    parser.add_argument("--poll", type=float, default=5.0, help="seconds between rounds")
    parser.add_argument("--once", action="store_true", help="until the forced builds finish")
    parser.add_argument("--integrator", default="integrator", help="how to run integrator")
    return Bridge(parser.parse_args(argv)).run()


if __name__ == "__main__":
    sys.exit(main())
