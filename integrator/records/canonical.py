"""The canonical repository as integrator sees it: refs, policy, claims, identity.

Reads are cached by object id (a ref that did not move costs one lookup), so a flood of
stale submissions re-reads nothing. Ref writes go through a `transaction.RefWriter` only.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import datetime
from functools import cached_property
from pathlib import Path

import pygit2

from integrator import refnames
from integrator.caches import Bounded
from integrator.clock import Clock, utcnow
from integrator.docpath import doc
from integrator.documents.authority_key import sign_commit, signature_problem
from integrator.documents.bounds import CEILING_LIMITS
from integrator.documents.claim import Claim, parse_claim_state, view_from_state
from integrator.documents.contract import parse_contract
from integrator.documents.policy import (
    PolicyState,
    default_policy,
    default_policy_text,
    parse_policy,
)
from integrator.documents.verdict_key import VerdictKey
from integrator.errors import ConfigurationError
from integrator.limits import AUTHORITY_COMMIT_BYTES
from integrator.plumbing import git, transaction
from integrator.plumbing.checkout import (
    UPDATE_CHECKOUT_CONFIG,
    Checkout,
    KeptCheckouts,
    checked_out,
    refusal,
    repair,
    server_refusal,
)
from integrator.plumbing.packs import ObjectBuffer, commit_bytes, flush_loose
from integrator.plumbing.remote import KEY_FILE_CONFIG, RemotePush
from integrator.plumbing.signing import load_key
from integrator.records import verdict_keys
from integrator.records.rollback import descends, heads_problem, seen_ref

CLAIM_CACHE_BYTES = 4 * 1024 * 1024  # the documents of the claims kept parsed (a few times that)
SIGNATURE_NAME = "integrator"
SIGNATURE_EMAIL = "integrator@localhost"


def signature(now: datetime) -> pygit2.Signature:
    return pygit2.Signature(SIGNATURE_NAME, SIGNATURE_EMAIL, int(now.timestamp()), 0)


class Canonical:
    """One canonical repository, opened once and read through caches."""

    def __init__(self, path: str | Path, *, clock: Clock = utcnow) -> None:
        self.path = Path(path)
        self.repo = git.open_repo(path)
        self.clock = clock
        # Parsed claims by commit, counted by the bytes of their documents (a contract is a
        # few hundred bytes or, under a raised limit, megabytes).
        self._claims: Bounded[str, tuple[Claim, int]] = Bounded(CLAIM_CACHE_BYTES, lambda c: c[1])
        self._policies: dict[str, PolicyState] = {}
        self._updater: transaction.RefUpdater | None = None
        self._kept: KeptCheckouts | None = None
        self._bulk_updater: transaction.RefUpdater | None = None
        self._remote: RemotePush | None = None
        # Claims whose ref the server rewrote (task → (last seen, now)); see `refresh`.
        self.rewritten: dict[str, tuple[str, str]] = {}
        self._signed: dict[tuple[str, str], str] = {}  # (ref, oid) → why not signed, or ""
        # Values derived from immutable commits, by (what, whose), each naming its commit.
        self.memos: dict[tuple[str, str], object] = {}
        # Why the queue or target moved back on the server, as the last fetch found it
        # (`rollback.heads_problem`): nothing lands or is promoted while it is set.
        self.rolled_back: str | None = None
        self._kept_view: int | None = None  # the thread a `refresh(keep=True)` fetched for
        self.kept_views = 0
        self.remote_url = next(
            (str(v) for v in self.repo.config.get_multivar("integrator.remote")), None
        )

    # -- basics ---------------------------------------------------------------------------

    @property
    def local_updater(self) -> transaction.RefUpdater:
        """Ref transactions on this repository's own refs (in remote mode: the mirror's)."""
        if self._updater is None:
            self._updater = transaction.RefUpdater(self.repo.path)
        return self._updater

    @property
    def remote(self) -> RemotePush | None:
        """The server this repository mirrors (remote mode), or None."""
        if self.remote_url is not None and self._remote is None:
            self._remote = RemotePush(
                self.repo.path, self.remote_url, self.target,
                key=self.push_key(KEY_FILE_CONFIG), also=self._seen_pushed,
            )  # fmt: skip
        return self._remote

    # -- authority keys (docs/security.md, "Authority keys") ---------------------------------

    @cached_property
    def authority_key(self) -> VerdictKey | None:
        """The key this host signs authority records with (`integrator.authorityKeyFile`)."""
        return verdict_keys.daemon_key(self.repo, verdict_keys.AUTHORITY)

    @cached_property
    def trusted_authority(self) -> frozenset[str]:
        """The authority keys this repository trusts; empty: nothing is checked."""
        return verdict_keys.trusted(self.repo, verdict_keys.AUTHORITY)

    def authority_commit(
        self,
        buffer: ObjectBuffer,
        ref: str,
        tree: bytes,
        parents: list[bytes],
        sig: pygit2.Signature,
        message: str,
    ) -> str:
        """Add to `buffer` the commit of an authority record for `ref`, signed with this
        host's authority key when it has one; its id."""
        raw = commit_bytes(tree, parents, sig, sig, message)
        if self.authority_key is not None:
            raw = sign_commit(raw, ref, self.authority_key, self._signed_identity())
        return buffer.add("commit", raw).hex()

    def authority_problem(self, ref: str, oid: str) -> str | None:
        """Why the commit `oid` at `ref` is not an authority record a trusted key signed;
        None when it is, or when this repository trusts no authority key."""
        trusted = self.trusted_authority
        if not trusted:
            return None
        known = self._signed.get((ref, oid))
        if known is None:
            try:
                kind, size = self.repo.odb.read_header(oid)
                if kind != pygit2.enums.ObjectType.COMMIT:
                    return "it is not a commit"
                if size > AUTHORITY_COMMIT_BYTES:
                    return f"its commit is over {AUTHORITY_COMMIT_BYTES} bytes"
                raw = bytes(self.repo.odb.read(oid)[1])
            except (KeyError, ValueError, pygit2.GitError):
                return "its commit is not in this repository"
            known = signature_problem(trusted, raw, ref, self._signed_identity()) or ""
            if len(self._signed) > 10_000:
                self._signed.clear()
            self._signed[(ref, oid)] = known
        return known or None

    def _signed_identity(self) -> str:
        """The repository identity authority signatures are bound to (a record of one
        repository is none of another that trusts the same key); asked again while it is
        not known yet (a mirror before its first fetch), never signed without."""
        found = self.identity
        if found is None:
            self.__dict__.pop("identity", None)
            raise ConfigurationError(
                f"cannot sign or check authority records in {self.path}: its identity is "
                "not known (a shallow clone, or a mirror before its first fetch); set "
                "`git config integrator.repoId` to the canonical repository's"
            )
        return found

    def push_key(self, setting: str) -> bytes | None:
        """The key that signs pushes to a server whose hook checks them (`setting` names
        the key file in this repository's config), or None when none is configured."""
        files = [str(v) for v in self.repo.config.get_multivar(setting)]
        return load_key(files[-1]) if files else None

    @property
    def updater(self) -> transaction.RefWriter:
        """Where authority refs move: one `update-ref --stdin` transaction here (never
        leaving a work tree that has the target checked out behind: `kept_updater`), or in
        remote mode one atomic push to the server with a lease per moved ref."""
        return self.remote or self.kept_updater

    @property
    def keeps_checkout(self) -> bool:
        """Whether work trees that have the target checked out are kept in step with it
        (`integrator init --update-checkout`)."""
        return git.config_flag(self.repo, UPDATE_CHECKOUT_CONFIG)

    @property
    def kept_updater(self) -> KeptCheckouts:
        """The local updater, refusing (or, opted in, keeping in step) checked-out branches."""
        if self._kept is None:
            self._kept = KeptCheckouts(
                self.local_updater, git.common_dir(self.repo), bare=self.repo.is_bare,
                keep=self.keeps_checkout, repo=self.path,
            )  # fmt: skip
        return self._kept

    def target_checkouts(self) -> list[Checkout]:
        """The work trees of this repository that have the target checked out."""
        return self.kept_updater.checkouts(self.target_ref)

    def refuse_checkouts(self, target: str | None = None, *, keep: bool = False) -> list[Checkout]:
        """The work trees that have `target` (default: the target) checked out, when each
        is kept in step; ConfigurationError when one is not: a mirror's never are (its refs
        follow the server's), a canonical repository's only when it asked (`keep`, or
        `integrator.updateCheckout`). A server on this host whose git would refuse every
        push of the target, for a checkout of its own, is refused too."""
        ref = f"refs/heads/{target or self.target}"
        if self.remote_url is not None:
            server = server_refusal(self.remote_url, target or self.target)
            if server is not None:
                raise ConfigurationError(server)
        found = checked_out(git.common_dir(self.repo), ref, bare=self.repo.is_bare)
        if found and self.remote_url is not None:
            raise ConfigurationError(
                f"{found[0].path} has {ref} checked out, but {self.path} is a mirror of "
                f"{self.remote_url}, only a cache whose refs follow the server's. Check out "
                f"another branch there (git -C {found[0].path} switch --detach), or clone "
                "the server for a checkout of your own"
            )
        if found and not (keep or self.keeps_checkout):
            raise refusal(found[0], self.path)
        return found

    def start_checkouts(self) -> list[str]:
        """What `integrator serve` does at start with work trees that have the target
        checked out: refuses them as `refuse_checkouts` does, else repairs each (an update
        a crash interrupted); one line for each that it keeps in step, or repaired."""
        notes: list[str] = []
        at = self.ref(self.target_ref)
        for checkout in self.refuse_checkouts():
            notes.append(
                repair(checkout, at) or f"keeps {checkout.path} in step with {self.target}"
            )
        return notes

    def hold_for_checkout(self) -> None:
        """Raise now when the target cannot move because of a work tree that has it
        checked out (CheckedOutError, CheckoutDirtyError), before anything is written for
        a move the transaction would refuse anyway; in remote mode, nothing."""
        if self.remote is None:
            self.kept_updater.check(self.target_ref, self.ref(self.target_ref))

    def record(self, buffer: ObjectBuffer, ops: list[transaction.RefOp]) -> None:
        """Write a one-off record's objects (loose: a pack of three would pile up), make them
        durable, then move `ops` in one transaction: no ref names an object not on disk."""
        flush_loose(buffer)
        if git.durable(self.repo):
            git.sync_objects(self.repo)
        self.updater.apply(ops)

    @property
    def bulk_updater(self) -> transaction.RefWriter:
        """An updater that only writes refs out: many creations made durable by one
        `sync_refs` (remote mode: the server's own durability)."""
        if self.remote is not None:
            return self.remote
        if self._bulk_updater is None:
            self._bulk_updater = transaction.RefUpdater(self.repo.path, writeout_only=True)
        return self._bulk_updater

    def refresh(self, *, keep: bool = False, reuse: bool = False) -> None:
        """Read authority fresh: in remote mode, fetch the target and the authority refs
        into the mirror (every command that decides calls this first); here, nothing.

        A claim chain only grows: each claim commit descends from the one before. A claim
        ref the server now holds that does not descend from the one this mirror last saw
        was rewritten by someone who can write the server's refs (on hosts that cannot
        protect custom refs, any writer): it is remembered in `rewritten`, and the gate
        fences that task's candidates (CLAIM_REWRITTEN) until a person looks. A new mirror
        trusts the claims it first fetches: keep a mirror, not a fresh clone per run.

        One fetch per batch: the daemon fetches with `keep` when its batch starts (the
        attempt keys are checked against that view), and the engine's `reuse` refresh on
        the same thread takes that view instead of fetching again, once. Every other
        refresh fetches. Reading a view a batch old is safe because nothing is decided
        from the mirror alone: each landing's push carries a lease on the queue and on
        every claim it consumes at the values the batch read, and a policy change moves
        every live claim, so a ref that moved since makes the push fail and the batch is
        planned again from the server's refs.
        """
        if self.remote is None:
            return
        thread = threading.get_ident()
        if reuse and self._kept_view == thread:
            self._kept_view = None
            return
        self._kept_view = None
        self.remote.fetch()  # this mirror's own pushes were seen as they were applied
        self._check_claim_chains()
        self.rolled_back, seen = heads_problem(
            self.repo, self.target, self._watched(), self.authority_problem
        )
        if seen:
            self.local_updater.apply(seen)
        if keep:
            self._kept_view = thread
            self.kept_views += 1

    def traffic(self) -> dict[str, int]:
        """The connections made to the server so far (remote mode; empty here), and how
        many batch views were fetched: what the daemon logs when it is ready and drained."""
        if self._remote is None:
            return {}
        return {**self._remote.traffic(), "batch_views": self.kept_views}

    def _seen_pushed(self, moves: Sequence[transaction.RefOp]) -> list[transaction.RefOp]:
        """The claim commits a push of this mirror's just placed on the server, as seen (the
        server checked each lease): moved with the mirror's refs, so a later fetch judges
        the server's claims against them, not against what this mirror read before."""
        ops: list[transaction.RefOp] = []
        heads = self._watched()
        for op in moves:
            if op.verb != "delete" and op.new is not None and op.ref in heads:
                # this host's own move (a landing, a promotion, a rebuild), leased on the
                # server's value: the queue or target as seen (`rollback.heads_problem`)
                ops.append(transaction.RefOp("set", seen_ref(heads[op.ref], self.target), op.new))
                continue
            if op.verb == "delete" or op.new is None or not op.ref.startswith(refnames.CLAIMS):
                continue
            seen = refnames.SEEN_CLAIMS + op.ref.removeprefix(refnames.CLAIMS)
            before = self.ref(seen)
            if before is None or descends(self.repo, op.new, before):
                ops.append(transaction.RefOp("set", seen, op.new))
        return ops

    def _watched(self) -> dict[str, str]:
        """The refs that only move forward, checked after each fetch: ref → kind."""
        return {
            self.queue_ref: "queue", self.target_ref: "target", refnames.POLICY: "policy",
            refnames.PAUSE: "pause", f"{refnames.QUEUE_CONTROL}{self.target}": "control",
        }  # fmt: skip

    def _check_claim_chains(self) -> None:
        claims, seen = git.refs_under_each(self.repo, (refnames.CLAIMS, refnames.SEEN_CLAIMS))
        ops: list[transaction.RefOp] = []
        for ref, oid in claims.items():
            task = ref.removeprefix(refnames.CLAIMS)
            before = seen.get(refnames.SEEN_CLAIMS + task)
            if before == oid or self.authority_problem(ref, oid) is not None:
                continue  # a claim no trusted key signed is never "seen" (the gate fences it)
            if before is not None and not descends(self.repo, oid, before):
                self.rewritten[task] = (before, oid)
                continue
            ops.append(transaction.RefOp("set", refnames.SEEN_CLAIMS + task, oid))
        if ops:
            self.local_updater.apply(ops)

    def close(self) -> None:
        for updater in (self._updater, self._bulk_updater, self._remote):
            if updater is not None:
                updater.close()
        self._updater = self._bulk_updater = None
        self._remote = None
        self._kept = None

    def __enter__(self) -> Canonical:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @cached_property
    def identity(self) -> str | None:
        return git.repo_identity(self.repo, f"refs/heads/{self.target}")

    @property
    def target(self) -> str:
        for value in self.repo.config.get_multivar("integrator.target"):
            return str(value)
        head = self.repo.references.get("HEAD")
        if head is not None and head.type == pygit2.enums.ReferenceType.SYMBOLIC:
            name = str(head.target)
            if name.startswith("refs/heads/"):
                return name.removeprefix("refs/heads/")
        return "main"

    @property
    def target_ref(self) -> str:
        return f"refs/heads/{self.target}"

    @property
    def queue_ref(self) -> str:
        return f"{refnames.QUEUE}{self.target}"

    @property
    def initialized(self) -> bool:
        return self.repo.references.get(refnames.POLICY) is not None

    def ref(self, name: str) -> str | None:
        return git.ref_target(self.repo, name)

    def commit(self, oid: str) -> pygit2.Commit:
        obj = self.repo[oid]
        if not isinstance(obj, pygit2.Commit):
            raise ConfigurationError(f"{oid} is not a commit")
        return obj

    def blob_at(self, commit_oid: str, path: str) -> bytes:
        tree = self.commit(commit_oid).tree
        entry = tree[path]
        blob = self.repo[entry.id]
        assert isinstance(blob, pygit2.Blob)
        return bytes(blob.data)

    # -- policy ---------------------------------------------------------------------------

    def policy_state(self, oid: str | None = None, *, signed: bool = True) -> PolicyState:
        """The policy at `oid` (default: the policy ref; the default policy when absent).
        The ref's own value must be signed when this repository trusts authority keys
        (`signed=False` only for the policy a signed one replaces)."""
        current = self.ref(refnames.POLICY)
        oid = oid or current
        if oid is None:
            return PolicyState(default_policy(), 0, default_policy_text())
        check = signed and oid == current
        problem = self.authority_problem(refnames.POLICY, oid) if check else None
        if problem is not None:
            raise ConfigurationError(
                f"{refnames.POLICY} at {oid[:12]} is not a policy a trusted authority key "
                f"signed ({problem}): nothing is decided under it; set the policy again with "
                f'the key (`integrator policy set`; {doc("security.md")}, "Authority keys")'
            )
        cached = self._policies.get(oid)
        if cached is None:
            text = self.blob_at(oid, "policy.toml").decode("utf-8")
            generation = int(self.blob_at(oid, "generation").decode().strip())
            policy = parse_policy(text, source=f"{refnames.POLICY}@{oid[:12]}")
            cached = PolicyState(policy, generation, text)
            self._policies[oid] = cached
        return cached

    # -- claims ---------------------------------------------------------------------------

    @staticmethod
    def claim_ref(task_id: str) -> str:
        return f"{refnames.CLAIMS}{task_id}"

    def claim_at(self, oid: str) -> Claim:
        found = self._claims.get(oid)
        if found is None:
            state, document = self.blob_at(oid, "claim.json"), self.blob_at(oid, "contract.json")
            view = view_from_state(parse_claim_state(state))
            # Admitted when it was issued; read back up to any policy's limits.
            contract = parse_contract(document, limits=CEILING_LIMITS)
            found = self._claims.put(oid, (Claim(oid, view, contract), len(state) + len(document)))
        return found[0]

    def claim(self, task_id: str) -> Claim | None:
        oid = self.ref(self.claim_ref(task_id))
        return self.claim_at(oid) if oid is not None else None

    def claims(self) -> list[Claim]:
        refs = git.refs_under(self.repo, refnames.CLAIMS)
        return [self.claim_at(oid) for _, oid in sorted(refs.items())]

    def forget_documents(self) -> None:
        """Forget the cached policy and claim documents (after SIGHUP or `policy set`)."""
        self._policies.clear()
        self._claims.clear()

    def has_claims(self) -> bool:
        """Whether this repository holds claim refs (live, or folded into their archive)."""
        return any(
            name.startswith(refnames.CLAIMS) or name == f"{refnames.ARCHIVE}claims"
            for name in self.repo.references
        )
