"""The daemon as a real process on a real spool: order, crashes, signals, the mirror, health.

Each test builds a canonical repository, issues claims on the real clock, drops submissions
into the spool and runs `python -m integrator serve` with subprocess, sending it real
signals. A few in-process tests at the end use a recording fake engine for the paths a
real engine cannot be made to take on demand (infrastructure failures, crashes).
"""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import sqlite3
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import structlog
from structlog.testing import capture_logs

from integrator.daemon import logs
from integrator.daemon.health import parse_bind
from integrator.daemon.loop import Daemon
from integrator.daemon.notify import Notifier, notify
from integrator.daemon.settings import Settings, load_settings
from integrator.documents.verdict import Decision, Verdict
from integrator.errors import ConfigurationError, InfrastructureError, UsageError
from integrator.plumbing import git as repo_git
from integrator.records.canonical import Canonical
from integrator.store.mirror import for_spool
from integrator.store.spool import ID_RE, REJECTION_FILE, SUBMISSION_FILE, Spool
from tests.canon import make_canon
from tests.daemon_world import PYTHON, World, hand_over, submission, wait_until
from tests.gitutil import git


def test_submissions_land_in_order_with_health_and_metrics(world: World) -> None:
    """A running daemon lands submissions in id order and reports them over HTTP."""
    sids = [world.submit(f"t{i}") for i in range(5)]
    served = world.serve("--http", "127.0.0.1:0")
    port = served.wait_event("http.listening")[0]["port"]
    decisions = served.wait_event("decision", 5)
    assert [e["submission"] for e in decisions] == sids
    assert world.landed() == [world.candidates[f"t{i}"] for i in range(5)]
    for event in decisions:
        assert {"task", "attempt", "generation", "decision", "latency_ms"} <= event.keys()
        assert event["decision"] == "ACCEPTED"
    late = world.submit("late")  # picked up by the watcher, not by the start-up scan
    served.wait_event("decision", 6)
    assert world.spool.find(late) == ("accepted", world.spool.folder("accepted") / late)

    base = f"http://127.0.0.1:{port}"
    assert urllib.request.urlopen(f"{base}/livez").read() == b"ok\n"
    ready = json.loads(urllib.request.urlopen(f"{base}/readyz").read())
    assert ready["ready"] is True
    assert set(ready["checks"]) == {"repository", "spool", "mirror", "integration"}
    metrics = urllib.request.urlopen(f"{base}/metrics").read().decode()
    assert 'integrator_decisions_total{code="",decision="ACCEPTED"} 6.0' in metrics
    assert "integrator_decision_latency_seconds_count 6.0" in metrics
    assert "integrator_queue_depth 0.0" in metrics
    served.signal(signal.SIGTERM)
    assert served.wait() == 0


def test_sigkill_after_commit_then_restart_lands_everything_once(world: World) -> None:
    """Killed right after landing a batch, a restart loses nothing and lands nothing twice."""
    sids = [world.submit(f"t{i}") for i in range(5)]
    config = world.config("[serve]\nbatch-size = 2\n")
    crashed = world.once("--config", str(config), env={"INTEGRATOR_FAULT": "kill:after-commit"})
    assert crashed.proc.returncode == -signal.SIGKILL
    assert world.spool.entries("work") == sids[:2]  # landed, not yet filed
    assert world.spool.entries("new") == sids[2:]
    assert world.landed() == [world.candidates["t0"], world.candidates["t1"]]

    restarted = world.once()
    assert restarted.proc.returncode == 0
    assert world.spool.entries("accepted") == sids
    assert world.spool.entries("work") == []
    assert world.landed() == [world.candidates[f"t{i}"] for i in range(5)]
    assert [world.verdict("accepted", sid).recovered for sid in sids] == [True] * 2 + [None] * 3
    assert restarted.events("daemon.ready")[0]["recovered"] == 2


def test_sigkill_mid_drain_loses_nothing_and_lands_nothing_twice(world: World) -> None:
    """An outside SIGKILL at an arbitrary point of a drain is repaired by a restart."""
    sids = [world.submit(f"t{i}") for i in range(16)]
    config = world.config("[serve]\nbatch-size = 2\n")
    served = world.serve("--config", str(config))
    served.wait_event("decision", 3)
    served.signal(signal.SIGKILL)
    assert served.wait() == -signal.SIGKILL

    world.once()
    assert world.spool.entries("accepted") == sids
    landed = world.landed()
    assert landed == [world.candidates[f"t{i}"] for i in range(16)]
    assert len(set(landed)) == len(landed)
    history = for_spool(world.spool.root).registry.history()
    assert sorted(r.submission for r in history) == sids


def test_sigterm_finishes_the_batch_in_hand_and_exits_zero(world: World) -> None:
    """SIGTERM mid-integration: the batch in hand lands and is filed, nothing else is claimed."""
    sids = [world.submit(f"t{i}") for i in range(5)]
    config = world.config("[serve]\nbatch-size = 2\n")
    served = world.serve("--config", str(config), env={"INTEGRATOR_FAULT": "stop:after-check"})
    stat = Path(f"/proc/{served.proc.pid}/stat")
    wait_until(
        lambda: stat.read_text().split(") ")[1].startswith("T"), what="SIGSTOP at after-check"
    )
    served.signal(signal.SIGTERM)  # pending until the process runs again
    served.signal(signal.SIGCONT)
    assert served.wait() == 0
    assert world.spool.entries("accepted") == sids[:2]
    assert world.spool.entries("work") == []
    assert world.spool.entries("new") == sids[2:]
    assert served.events("daemon.stopped")

    world.once()
    assert world.landed() == [world.candidates[f"t{i}"] for i in range(5)]


def test_malformed_submissions_are_rejected_and_the_daemon_goes_on(world: World) -> None:
    """Garbage in the spool goes to rejected/ with a reason; good submissions still land."""
    garbage = world.spool.folder("new") / "20200101T000000000000Z-00000000"
    garbage.mkdir()
    (garbage / SUBMISSION_FILE).write_text("{not json")
    empty = world.spool.folder("new") / "20200101T000000000001Z-00000000"
    empty.mkdir()
    (world.spool.folder("new") / "notes.txt").write_text("hello")
    _, oid = world.candidate("bundled")
    bad_bundle = world.spool.folder("tmp") / "20200101T000000000002Z-00000000"
    bad_bundle.mkdir()
    doc = submission({"taskId": "bundled"}, oid).wire() | {"bundle": "candidate.bundle"}
    (bad_bundle / SUBMISSION_FILE).write_text(json.dumps(doc))
    (bad_bundle / "candidate.bundle").write_bytes(
        b"# v2 git bundle\n" + b"0" * 40 + b" HEAD\n\nPACK"
    )
    bad_bundle.rename(world.spool.folder("new") / bad_bundle.name)
    good = world.submit("good")

    served = world.once()
    assert served.proc.returncode == 0
    assert world.spool.entries("accepted") == [good]
    reasons = {
        sid: json.loads((world.spool.folder("rejected") / sid / REJECTION_FILE).read_text())[
            "reason"
        ]
        for sid in world.spool.entries("rejected")
    }
    assert len(reasons) == 4
    assert all(ID_RE.match(sid) for sid in reasons)
    text = "\n".join(reasons.values())
    assert "submission.json is not an integrator.submission.v1" in text
    assert "has no submission.json" in text
    assert "'notes.txt' in new/ is not a submission folder" in text
    assert "the bundle's objects could not be imported" in text
    rejected = [e for e in served.events("decision") if e["decision"] == "REJECTED"]
    assert len(rejected) == 4 and all(e["reason"] for e in rejected)


def test_mirror_down_then_back_catches_up(world: World) -> None:
    """With the registry locked, integration goes on and the backlog grows; it drains on return."""
    registry = for_spool(world.spool.root).registry
    registry.write([])
    registry.close()
    holder = sqlite3.connect(world.spool.root / "registry.sqlite3", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    sids = [world.submit(f"t{i}") for i in range(3)]
    config = world.config("[serve]\nmirror-timeout = 0.05\n")
    served = world.serve("--http", "127.0.0.1:0", "--config", str(config))
    port = served.wait_event("http.listening")[0]["port"]
    served.wait_event("decision", 3)
    assert world.spool.entries("accepted") == sids  # integration did not wait for the mirror
    served.wait_event("mirror.unavailable")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz")
    assert err.value.code == 503
    assert json.loads(err.value.read())["checks"]["mirror"]["ok"] is False
    assert for_spool(world.spool.root).backlog.depth() == 3

    holder.execute("COMMIT")
    holder.close()
    wait_until(lambda: not for_spool(world.spool.root).backlog.depth(), what="catch-up")
    rows = for_spool(world.spool.root).registry.history()
    assert sorted(r.submission for r in rows) == sids
    assert json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz").read())["ready"]
    served.signal(signal.SIGTERM)
    assert served.wait() == 0


def test_sighup_reloads_and_systemd_is_notified(world: World) -> None:
    """READY/RELOADING/STOPPING reach $NOTIFY_SOCKET; SIGHUP applies a good config, keeps a bad one out."""
    address = f"@integrator-test-{os.getpid()}-{time.monotonic_ns()}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind("\0" + address[1:])
    sock.settimeout(15)
    config = world.config("[serve]\npoll = 0.2\n")
    served = world.serve("--config", str(config), env={"NOTIFY_SOCKET": address})
    try:
        assert sock.recv(4096).startswith(b"READY=1")
        config.write_text("[serve]\npoll = 0.5\nbatch-size = 8\n")
        served.signal(signal.SIGHUP)
        assert sock.recv(4096).startswith(b"RELOADING=1\nMONOTONIC_USEC=")
        assert sock.recv(4096).startswith(b"READY=1")
        reloaded = served.wait_event("daemon.reloaded")[0]
        assert (reloaded["batch_size"], reloaded["poll"]) == (8, 0.2)  # the command line wins
        config.write_text("[serve]\nno-such-setting = 1\n")
        served.signal(signal.SIGHUP)
        assert "no-such-setting" in served.wait_event("daemon.reload_failed")[0]["error"]
        sid = world.submit("after-reload")
        served.wait_event("decision")
        assert world.spool.find(sid) is not None and world.spool.find(sid)[0] == "accepted"  # type: ignore[index]
        served.signal(signal.SIGTERM)
        messages = [sock.recv(4096) for _ in range(3)]
        assert any(m.startswith(b"STOPPING=1") for m in messages)
        assert served.wait() == 0
    finally:
        sock.close()


def test_bundle_from_another_clone_lands_through_submit_wait(world: World, tmp_path: Path) -> None:
    """`submit --bundle --wait` from a clone without shared objects lands and cleans its quarantine."""
    data, _ = world.candidate("remote")
    contract = tmp_path / "contract.json"
    hand_over(world.repo, data, contract)
    clone = tmp_path / "clone"
    git("clone", "-q", str(world.repo), str(clone), cwd=tmp_path)
    (clone / "work" / "remote").mkdir(parents=True)
    (clone / "work" / "remote" / "f.txt").write_text("remote\n")
    git("add", "-A", cwd=clone)
    git("commit", "-qm", "remote work", cwd=clone)
    served = world.serve()
    result = subprocess.run(
        [PYTHON, "-m", "integrator", "submit", "--spool", str(world.spool.root),
         "--contract", str(contract), "--candidate", "HEAD", "--repo", str(clone),
         "--bundle", "--wait", "30", "--json"],
        capture_output=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr.decode()
    printed = json.loads(result.stdout)
    assert printed["verdict"]["decision"] == "ACCEPTED"
    assert git("for-each-ref", "refs/integrator/quarantine/", cwd=world.repo) == ""
    served.signal(signal.SIGTERM)
    assert served.wait() == 0


def test_second_daemon_on_a_spool_is_refused(world: World) -> None:
    """Only one daemon serves a spool; a second exits 2 naming the first."""
    first = world.serve()
    first.wait_event("daemon.ready")
    second = world.once()
    assert second.proc.returncode == 2
    assert f"pid {first.proc.pid}" in second.log.read_text()
    first.signal(signal.SIGTERM)
    assert first.wait() == 0


# --- in process, with a recording fake engine ---------------------------------------------


@dataclass
class FakeEngine:
    """Canned ACCEPTED verdicts, recorded calls, and injected failures.

    `failures` maps a candidate to exceptions raised once each; `poison` candidates raise
    every time. Like the real engine, `integrate_many` decides all of a batch or raises.
    """

    failures: dict[str, list[Exception]] = field(default_factory=dict)
    poison: set[str] = field(default_factory=set)
    calls: list[str] = field(default_factory=list)
    batches: list[int] = field(default_factory=list)
    reloads: int = 0

    def integrate(self, contract_data: bytes, candidate: str) -> Verdict:
        self.calls.append(candidate)
        pending = self.failures.get(candidate)
        if pending:
            raise pending.pop(0)
        if candidate in self.poison:
            raise RuntimeError("bug")
        task = json.loads(contract_data).get("taskId")
        return Verdict(decision=Decision.ACCEPTED, candidate=candidate, task_id=task, generation=1)

    def integrate_many(self, items: Sequence[tuple[bytes, str]]) -> list[Verdict]:
        self.batches.append(len(items))
        return [self.integrate(data, candidate) for data, candidate in items]

    def reload_policy(self) -> None:
        self.reloads += 1

    def candidate_problem(self, candidate: str) -> str | None:
        return None  # the fake's candidates are names only


def fake_daemon(tmp_path: Path, engine: FakeEngine) -> tuple[Daemon, Spool, Canonical]:
    canon = make_canon(tmp_path)
    spool = Spool(tmp_path / "spool").ensure()
    canonical = Canonical(canon.path)
    daemon = Daemon(
        spool=spool,
        canonical=canonical,
        engine=engine,
        mirror=for_spool(spool.root),
        settings=Settings(watch=False),
    )
    return daemon, spool, canonical


def submit_fake(spool: Spool, n: int) -> list[str]:
    return [spool.submit(submission({"taskId": f"t{i}"}, f"{i:040x}")) for i in range(n)]


def test_host_trouble_keeps_the_batch_and_its_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure while the host is in trouble leaves the undecided batch in work/, blaming
    no submission; the next drain retries it first."""
    engine = FakeEngine(failures={f"{1:040x}": [InfrastructureError("disk full")]})
    daemon, spool, canonical = fake_daemon(tmp_path, engine)
    probes: list[str] = []

    def full_disk(objects: object, need: int = 0) -> str:
        probes.append(str(objects))
        return "disk full"

    monkeypatch.setattr(repo_git, "store_trouble", full_disk)
    sids = submit_fake(spool, 3)
    with capture_logs() as logs:
        daemon.drain()
    assert probes  # the host was asked, not the error's text
    assert spool.entries("accepted") == []
    assert spool.entries("work") == sids
    assert [spool.attempts(sid) for sid in sids] == [0, 0, 0]
    assert daemon.last_error == "disk: disk full (InfrastructureError: disk full)"
    assert any(e["event"] == "daemon.retry_later" for e in logs)
    monkeypatch.undo()
    spool.submit(submission({"taskId": "later"}, "f" * 40))
    daemon.drain()
    assert spool.entries("accepted")[:3] == sids
    assert engine.calls == [f"{i:040x}" for i in (0, 1, 0, 1, 2)] + ["f" * 40]
    assert daemon.last_error is None
    canonical.close()


def test_a_failing_submission_does_not_hold_up_those_behind_it(tmp_path: Path) -> None:
    """On a healthy host, an error of one submission is counted on it; the rest are decided."""
    says_full: list[Exception] = [InfrastructureError("no space left, says git") for _ in "ab"]
    engine = FakeEngine(failures={f"{1:040x}": says_full})  # once in the batch, once alone
    daemon, spool, canonical = fake_daemon(tmp_path, engine)
    sids = submit_fake(spool, 3)
    with capture_logs():
        daemon.drain()
        assert spool.entries("accepted") == [sids[0], sids[2]]
        assert spool.entries("work") == [sids[1]]
        assert spool.attempts(sids[1]) == 1
        daemon.drain()
    assert spool.entries("accepted") == sids
    canonical.close()


def test_a_crashing_candidate_is_rejected_after_bounded_retries(tmp_path: Path) -> None:
    """An engine crash is pinned on its submission, retried a few times, then rejected."""
    engine = FakeEngine(poison={f"{1:040x}"})
    daemon, spool, canonical = fake_daemon(tmp_path, engine)
    sids = submit_fake(spool, 3)
    with capture_logs():
        daemon.drain()
        assert spool.entries("accepted") == [sids[0], sids[2]]
        for _ in range(2):
            daemon.drain()
    assert spool.entries("rejected") == [sids[1]]
    reason = json.loads((spool.folder("rejected") / sids[1] / REJECTION_FILE).read_text())["reason"]
    assert "integrate raised RuntimeError 3 times" in reason and ": bug." in reason
    canonical.close()


def test_the_crash_count_survives_restarts(tmp_path: Path) -> None:
    """`serve --once` runs (fresh daemons) share the count: the third attempt, whichever run
    makes it, rejects the poison (a run retries work/ once at start and once draining)."""
    engine = FakeEngine(poison={f"{0:040x}"})
    _, spool, canonical = fake_daemon(tmp_path, engine)
    (sid,) = submit_fake(spool, 1)

    def once() -> Daemon:
        return Daemon(
            spool=spool,
            canonical=canonical,
            engine=engine,
            mirror=for_spool(spool.root),
            settings=Settings(watch=False),
        )

    with capture_logs():
        with pytest.raises(InfrastructureError):
            once().run(once=True)
        assert spool.attempts(sid) == 1
        assert once().run(once=True) == 0
    assert spool.entries("rejected") == [sid]
    assert engine.calls.count(f"{0:040x}") == 2 * 3  # each attempt: the batch, then alone
    canonical.close()


def test_a_batch_is_integrated_in_one_call(tmp_path: Path) -> None:
    """Submissions are handed to `integrate_many` in batches of at most `batch-size`."""
    engine = FakeEngine()
    daemon, spool, canonical = fake_daemon(tmp_path, engine)
    daemon.settings = Settings(watch=False, batch_size=4, batch_seconds=60)
    sids = submit_fake(spool, 10)
    with capture_logs():
        assert daemon.drain() == 10
    assert engine.batches == [4, 4, 2]
    assert spool.entries("accepted") == sids
    canonical.close()


def test_summary_event_binds_the_decision(tmp_path: Path) -> None:
    """Each decision logs one event with submission, task, attempt, generation, decision, latency."""
    daemon, spool, canonical = fake_daemon(tmp_path, FakeEngine())
    (sid,) = submit_fake(spool, 1)
    with capture_logs() as logs:
        daemon.drain()
    (event,) = [e for e in logs if e["event"] == "decision"]
    assert event["submission"] == sid
    assert (event["task"], event["generation"], event["decision"]) == ("t0", 1, "ACCEPTED")
    assert "attempt" in event and event["latency_ms"] >= 0
    canonical.close()


def test_a_drain_of_200_decides_each_once_in_batches(tmp_path: Path) -> None:
    """200 submissions are drained in batches, each decided and filed once (the daemon's
    own cost per candidate is a row of `make bench`, not asserted here)."""
    engine = FakeEngine()
    daemon, spool, canonical = fake_daemon(tmp_path, engine)
    sids = submit_fake(spool, 200)
    with capture_logs():
        assert daemon.drain() == 200
    assert spool.entries("accepted") == sids
    assert sorted(engine.calls) == sorted(f"{i:040x}" for i in range(200))
    assert sum(engine.batches) == 200 and max(engine.batches) <= daemon.settings.batch_size
    canonical.close()


# --- the small operational pieces ----------------------------------------------------------


def test_notify_is_a_no_op_outside_systemd() -> None:
    """Without $NOTIFY_SOCKET nothing is sent and nothing fails; the watchdog stays off."""
    notifier = Notifier({})
    assert not notifier.enabled
    assert notifier.ready() is False
    assert notifier.watchdog_interval() is None
    assert notify("READY=1", {"NOTIFY_SOCKET": "relative/path"}) is False


def test_watchdog_interval_is_half_of_watchdog_sec() -> None:
    """WATCHDOG_USEC for this process gives a keep-alive every half period; another pid's does not."""
    assert Notifier({"WATCHDOG_USEC": "10000000"}).watchdog_interval() == 5.0
    mine = {"WATCHDOG_USEC": "4000000", "WATCHDOG_PID": str(os.getpid())}
    assert Notifier(mine).watchdog_interval() == 2.0
    assert Notifier({"WATCHDOG_USEC": "4000000", "WATCHDOG_PID": "1"}).watchdog_interval() is None


def test_logs_are_json_lines_off_a_terminal() -> None:
    """`auto` renders JSON lines when the stream is not a terminal, console text when forced."""
    stream = io.StringIO()
    logs.configure(stream=stream)
    structlog.get_logger("t").info("decision", submission="s1", latency_ms=1.5)
    event = json.loads(stream.getvalue())
    assert (event["event"], event["submission"], event["level"]) == ("decision", "s1", "info")
    assert "timestamp" in event
    stream = io.StringIO()
    logs.configure(fmt="console", stream=stream, level="warning")
    structlog.get_logger("t").info("hidden")
    structlog.get_logger("t").warning("shown", x=1)
    assert "hidden" not in stream.getvalue() and "shown" in stream.getvalue()
    logs.configure(stream=logs.STDERR)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("127.0.0.1:9464", ("127.0.0.1", 9464)), (":0", ("127.0.0.1", 0)), ("[::1]:80", ("::1", 80))],
)
def test_http_bind_addresses(text: str, expected: tuple[str, int]) -> None:
    """`--http` accepts HOST:PORT, an empty host for loopback, and bracketed IPv6."""
    assert parse_bind(text) == expected


def test_a_bad_http_bind_is_a_usage_error() -> None:
    """`--http` without a port is refused with the expected form."""
    with pytest.raises(UsageError, match="HOST:PORT"):
        parse_bind("localhost")


def test_settings_file_is_strict(tmp_path: Path) -> None:
    """Unknown keys and wrong types in [serve] are configuration errors, not ignored."""
    path = tmp_path / "c.toml"
    path.write_text("[serve]\npoll = 1\nbatch-size = 8\n")
    assert load_settings(path, Settings()) == Settings(poll=1.0, batch_size=8)
    path.write_text("[serve]\nbatch-size = true\n")
    with pytest.raises(ConfigurationError, match="batch-size must be of type int"):
        load_settings(path, Settings())
    path.write_text("[serve]\npol = 1\n")
    with pytest.raises(ConfigurationError, match=r"unknown setting serve\.pol"):
        load_settings(path, Settings())
