"""Preparing a canonical repository: queue ref, policy ref, durable settings. Idempotent."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from integrator import refnames
from integrator.documents.policy import default_policy_text, parse_policy
from integrator.errors import ConfigurationError, RefMovedError, UsageError
from integrator.plumbing import git, transaction
from integrator.plumbing.checkout import UPDATE_CHECKOUT_CONFIG, server_refusal
from integrator.plumbing.signing import load_key
from integrator.records.canonical import Canonical
from integrator.records.policy_ref import write_policy_commit


@dataclass(frozen=True)
class Preparation:
    target: str
    queue_ref: str
    actions: tuple[str, ...]


def prepare(
    path: str | Path,
    *,
    target: str | None = None,
    policy_text: str | None = None,
    update_checkout: bool = False,
) -> Preparation:
    """Create what integration needs in the repository at `path`; a second run changes nothing.

    Everything that can refuse (another target, another policy, a shallow clone, a work
    tree that has the target checked out and is not to be kept in step with it) is checked
    before anything is written, so a refused run leaves the repository as it was.
    `update_checkout` records that such work trees are kept in step (`integrator.updateCheckout`).
    """
    with Canonical(path) as canonical:
        if canonical.remote is not None and update_checkout:
            raise UsageError(
                "--update-checkout is for a canonical repository on this host: a mirror is "
                "only a cache (a work tree of the server's repository is kept in step by the "
                "server's git: receive.denyCurrentBranch=updateInstead)"
            )
        target = target or canonical.target
        canonical.refuse_checkouts(target, keep=update_checkout)
        canonical.refresh()
        repo = canonical.repo
        configured = next((str(v) for v in repo.config.get_multivar("integrator.target")), None)
        if configured is not None and configured != target:
            raise ConfigurationError(
                f"{path} is already prepared for target {configured}, not {target}; to move "
                f"integration to {target} deliberately, run `git -C {path} config "
                f"integrator.target {target}` and then `integrator init` again"
            )
        target_ref = f"refs/heads/{target}"
        head = canonical.ref(target_ref)
        if head is None:
            raise ConfigurationError(
                f"{target_ref} does not exist in {path}; commit something to {target} first "
                "or pass --target"
            )
        identity = None
        if not list(repo.config.get_multivar("integrator.repoId")):
            identity = git.repo_identity(repo, target_ref)
            if identity is None:
                raise ConfigurationError(
                    f"{path} is a shallow clone: its root commit, the repository's identity, "
                    "is not here; prepare a full clone (or set integrator.repoId first)"
                )
        new_policy = None
        if canonical.ref(refnames.POLICY) is None:
            new_policy = policy_text if policy_text is not None else default_policy_text()
            parse_policy(new_policy)
        elif (
            policy_text is not None and parse_policy(policy_text) != canonical.policy_state().policy
        ):
            raise ConfigurationError(
                "a different policy is already set; use `integrator policy set FILE` to change "
                "it (that revokes unconsumed contracts)"
            )
        git.set_config(repo, git.DURABLE_CONFIG)
        repo.config["integrator.target"] = target
        actions: list[str] = []
        if update_checkout and not canonical.keeps_checkout:
            actions += _keep_checkouts(canonical, target)
        if identity is not None:
            repo.config["integrator.repoId"] = identity
            actions.append(f"recorded repository identity {identity}")
        ops = []
        queue_ref = f"{refnames.QUEUE}{target}"
        if canonical.ref(queue_ref) is None:
            ops.append(transaction.update(queue_ref, head, None))
            actions.append(f"created {queue_ref} at {head[:12]}")
        if new_policy is not None:
            commit = write_policy_commit(canonical, new_policy, 1, None, "init")
            ops.append(transaction.update(refnames.POLICY, commit, None))
            actions.append(f"created {refnames.POLICY} (generation 1)")
        if ops:
            git.sync_objects(repo)
            canonical.updater.apply(ops)
        return Preparation(target, queue_ref, tuple(actions))


def _keep_checkouts(canonical: Canonical, target: str) -> list[str]:
    """Record that work trees checking out `target` are kept in step; what that means now."""
    canonical.repo.config[UPDATE_CHECKOUT_CONFIG] = "true"
    actions = [f"work trees that check out {target} are kept in step with it"]
    actions += [f"keeps {c.path} in step with {target}" for c in canonical.target_checkouts()]
    return actions


def prepare_remote(
    mirror: str | Path,
    url: str,
    *,
    target: str | None = None,
    policy_text: str | None = None,
    key_files: Mapping[str, Path] | None = None,
    configure: Callable[[Path], list[str]] | None = None,
) -> Preparation:
    """Prepare a canonical repository on a git server, with a local bare mirror at `mirror`
    (created when missing; only a cache). The queue and policy refs are created on the
    server in one atomic push, each expected absent; a second run (from any host) changes
    nothing. A server without atomic pushes is refused. `key_files` (config setting →
    file) names the keys that sign pushes; each is read once here, so a bad one is refused
    before anything is pushed."""
    path = Path(mirror)
    if not path.exists():
        git.run_git(
            ["init", "-q", "--bare", str(path)], cwd=path.parent if path.parent.exists() else "."
        )
    repo = git.open_repo(path)
    if not repo.is_bare:
        raise ConfigurationError(f"{path} must be a bare repository (a mirror of {url})")
    configured = next((str(v) for v in repo.config.get_multivar("integrator.remote")), None)
    if configured is not None and configured != url:
        raise ConfigurationError(
            f"{path} already mirrors {configured}, not {url}; use another folder for the mirror"
        )
    chosen = target or next((str(v) for v in repo.config.get_multivar("integrator.target")), "main")
    server = server_refusal(url, chosen)  # a server here that refuses every landing
    if server is not None:
        raise ConfigurationError(server)
    for setting, key_file in (key_files or {}).items():
        load_key(key_file)
        repo.config[setting] = str(Path(key_file).resolve())
    repo.config["integrator.remote"] = url
    repo.config["integrator.target"] = chosen
    with Canonical(path) as canonical:
        canonical.refuse_checkouts(chosen)  # before a fetch refuses it
        canonical.refresh()
        assert canonical.remote is not None
        if canonical.ref(canonical.target_ref) is None:
            raise ConfigurationError(f"{url} has no {canonical.target_ref}; push it first")
        canonical.remote.check_atomic(canonical.target_ref)
    keyed: list[str] = configure(Path(repo.path)) if configure is not None else []
    try:
        done = prepare(path, target=chosen, policy_text=policy_text)
    except RefMovedError:
        # Another host prepared the server meanwhile: its refs are fetched, nothing is left.
        done = prepare(path, target=chosen, policy_text=policy_text)
    return Preparation(done.target, done.queue_ref, (*keyed, *done.actions))
