"""`integrator serve`'s wiring: the daemon built from typed options (spool, repository,
mirror, engine, evaluation workers, intake, shadow policy), its /readyz checks, and the run
with its health server beside it."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import structlog

from integrator.daemon import logs
from integrator.daemon.answer import OverviewServer
from integrator.daemon.health import Check, HealthServer, Metrics, repository_check
from integrator.daemon.intake import Intake
from integrator.daemon.loop import Daemon
from integrator.daemon.memory import bound_git_cache
from integrator.daemon.notify import Notifier
from integrator.daemon.probe import CachedProbe
from integrator.daemon.settings import Settings, resolve_settings
from integrator.errors import ConfigurationError
from integrator.landing.engine import Integrator
from integrator.landing.workers import EvaluationPool, default_workers
from integrator.plumbing import git
from integrator.plumbing.packs import Repacker
from integrator.records.canonical import Canonical
from integrator.store.mirror import Mirror, for_spool
from integrator.store.spool import Spool


@dataclass(frozen=True)
class ServeOptions:
    """What `integrator serve` was asked for (see its --help)."""

    repo: Path
    spool: Path
    once: bool = False
    poll: float | None = None
    no_watch: bool = False
    http: str | None = None
    mirror: Path | None = None
    config: Path | None = None
    evaluation_workers: int | None = None
    intake: str | None = None
    no_promote: bool = False
    shadow_policy: Path | None = None
    log_format: logs.Format = "auto"

    def settings(self) -> Settings:
        """Defaults, then the config file, then the options (read again on SIGHUP)."""
        return resolve_settings(
            self.config,
            poll=self.poll,
            watch=not self.no_watch,
            evaluation_workers=self.evaluation_workers,
            intake=bool(self.intake),
        )


def serve(options: ServeOptions) -> int:
    """Run the daemon until the spool is drained (`once`) or SIGTERM; its exit code."""
    settings = options.settings()
    logs.configure(fmt=options.log_format, level=settings.log_level)
    bound_git_cache()  # a daemon reads its records for days (daemon/memory.py)
    log = structlog.get_logger("integrator.serve")
    spool = Spool(options.spool).ensure()
    canonical = Canonical(options.repo)
    for note in canonical.start_checkouts():  # refuses a checkout nothing keeps in step
        log.info("checkout.kept", note=note)
    canonical.refresh()
    if not canonical.initialized:
        raise ConfigurationError(
            f"{options.repo} is not prepared; run `integrator init --repo {options.repo}`"
        )
    if canonical.trusted_authority and canonical.authority_key is None:
        raise ConfigurationError(
            f"{options.repo} believes only signed claims (integrator.trustedAuthorityKey) "
            "but has no authority key to sign the claims its landings consume: give it one "
            "(`integrator init --authority-key F`, its public half trusted by every mirror)"
        )
    mirror = for_spool(spool.root, options.mirror, timeout=settings.mirror_timeout)
    metrics = Metrics()
    metrics.bind(
        queue_depth=spool.depth,
        mirror_backlog=mirror.backlog.depth,
        mirror_lag=mirror.backlog.lag_seconds,
        mirror_up=lambda: 1.0 if mirror.healthy else 0.0,
    )

    def reload() -> Settings:
        fresh = options.settings()
        logs.configure(fmt=options.log_format, level=fresh.log_level)
        return fresh

    shadow = None
    if options.shadow_policy is not None:
        from integrator.documents.policy import PolicyState, read_policy_file
        from integrator.rollout.shadow import DaemonShadow

        read, text = read_policy_file(options.shadow_policy)
        state = PolicyState(read, 0, text)
        shadow = DaemonShadow(canonical, state)
    repacker = Repacker(background=True)  # one child at a time, for both of them
    workers = settings.evaluation_workers
    pool = EvaluationPool(canonical.path, default_workers() if workers < 0 else workers)
    daemon = Daemon(
        spool=spool,
        canonical=canonical,
        engine=Integrator(canonical, repacker=repacker, pool=pool),
        repacker=repacker,
        mirror=mirror,
        settings=settings,
        metrics=metrics,
        notifier=Notifier(),
        reload=reload,
        intake=Intake(canonical, spool, options.intake) if options.intake else None,
        promote=not options.no_promote,
        shadow=shadow,
    )
    daemon.answer = OverviewServer(
        spool.root, partial(overview_answer, canonical.path, spool.root), log=log
    )
    daemon.install_signal_handlers()
    server: HealthServer | None = None
    if options.http:
        probe = CachedProbe(daemon.probe)
        server = HealthServer(
            options.http, lambda: readiness(canonical, spool, mirror, daemon, probe), metrics
        )
        server.start()
        host, port = server.address
        log.info("http.listening", host=host, port=port)
    try:
        return daemon.run(once=options.once)
    finally:
        pool.close()
        if server is not None:
            server.stop()
        if shadow is not None:
            shadow.close()
        mirror.close()
        canonical.close()


def overview_answer(repo: Path, root: Path) -> bytes:
    """The overview document `status` asks the daemon for, as the command would read it."""
    from integrator.daemon.overview import document, gather
    from integrator.daemon.overview_text import now

    doc = {**document(gather(repo, Spool(root)), now()), "answeredBy": {"daemon": os.getpid()}}
    return json.dumps(doc, ensure_ascii=True, default=str).encode()


def readiness(
    canonical: Canonical, spool: Spool, mirror: Mirror, daemon: Daemon, probe: CachedProbe
) -> dict[str, Check]:
    """What /readyz reports: each dependency (the git server and the intake asked, at most
    every few seconds), and whether integration is making progress."""
    problem = spool.check()
    error = mirror.last_error
    checks = {
        "repository": repository_check(git.common_dir(canonical.repo)),
        "spool": Check(problem is None, problem or str(spool.root)),
        "mirror": Check(
            mirror.healthy,
            f"{mirror.backlog.depth()} records waiting" + (f"; {error}" if error else ""),
        ),
        "integration": Check(daemon.last_error is None, daemon.last_error or "ok"),
    }
    trouble = probe()
    if daemon.probe.remote_url is not None:
        down = trouble is not None and trouble.kind == "git-server"
        checks["remote"] = Check(not down, str(trouble) if down else daemon.probe.remote_url)
    if daemon.probe.intake_url is not None:
        shared = daemon.probe.intake_url == daemon.probe.remote_url
        down = trouble is not None and (
            trouble.kind == "intake" or (shared and trouble.kind == "git-server")
        )
        intake = daemon.intake.trouble if daemon.intake is not None else None
        checks["intake"] = Check(
            not down and intake is None,
            str(trouble) if down else (intake or daemon.probe.intake_url),
        )
    if trouble is not None and trouble.kind == "disk":
        checks["repository"] = Check(False, trouble.detail)
    return checks
