"""A rollout world for tests: a canonical repository with categories, a spool, and a daemon
driven in-process on a fake clock (so a week of submissions takes a second)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import pygit2

from integrator.daemon.loop import Daemon
from integrator.daemon.settings import Settings
from integrator.documents.contract import OwnershipContract
from integrator.documents.verdict import Verdict
from integrator.landing.engine import Integrator
from integrator.records.canonical import Canonical
from integrator.records.claims import Claims, IssueRequest
from integrator.store.mirror import for_spool
from integrator.store.spool import VERDICT_FILE, Spool
from tests.canon import Canon, make_canon
from tests.daemon_world import key_for, submission
from tests.gitutil import Spec

FILES: dict[str, Spec] = {
    "db/migrations/0001_init.sql": "create table t (id int);\n",
    "schema/invoice.json": '{"type": "object"}\n',
    "gen/client.py": "client = 1\n",
    "src/billing/invoice.py": "invoice = 1\n",
    "src/auth/login.py": "login = 1\n",
    "docs/index.md": "# docs\n",
}


def policy_text(**modes: str) -> str:
    """A policy naming each category's paths, every category observed unless `modes` says."""
    chosen = {
        c: modes.get(c, "observe") for c in ("migrations", "schemas", "codegen", "ci", "source")
    }
    lines = ["version = 1", "", "# rollout: categories start in observe", "[enforcement]"]
    lines += [f'{c} = "{m}"' for c, m in chosen.items()]
    lines += [
        "",
        "[categories]",
        'migrations = ["db/migrations/**"]',
        'schemas = ["schema/**"]',
        'codegen = ["gen/**"]',
        'ci = [".github/**"]',
        "",
        "[[resource]]",
        'paths = ["db/migrations/**"]',
        'resource = "migration-slot:{path}"',
        "",
    ]
    return "\n".join(lines)


@dataclass
class Rollout:
    canon: Canon
    spool: Spool
    sids: dict[str, str] = field(default_factory=dict)  # label → submission id
    candidates: dict[str, str] = field(default_factory=dict)  # label → candidate

    @property
    def repo(self) -> Path:
        return self.canon.path

    def open(self) -> Canonical:
        return self.canon.open()

    def issue(
        self,
        task: str,
        paths: list[str],
        *,
        resources: tuple[str, ...] = (),
        force_shared: bool = False,
    ) -> OwnershipContract:
        with self.open() as canonical:
            request = IssueRequest(
                task_id=task, paths=tuple(paths), resources=resources, lease=timedelta(hours=4)
            )
            return Claims(canonical).issue(request, force_shared=force_shared)

    def commit(self, base: str, files: Mapping[str, Spec], message: str = "agent work") -> str:
        with self.open() as canonical:
            repo = canonical.repo
            parent = canonical.commit(base)
            index = pygit2.Index()
            index.read_tree(parent.tree)
            for path, text in files.items():
                if text is None:
                    index.remove(path)
                    continue
                blob = repo.create_blob(text if isinstance(text, bytes) else str(text).encode())
                index.add(pygit2.IndexEntry(path, blob, pygit2.enums.FileMode.BLOB))
            tree = index.write_tree(repo)
            sig = pygit2.Signature("agent", "agent@example.invalid", 1767225600, 0)
            return str(repo.create_commit(None, sig, sig, message, tree, [parent.id]))

    def submit(
        self,
        label: str,
        task: str,
        paths: list[str],
        files: Mapping[str, Spec],
        *,
        contract: OwnershipContract | None = None,
        force_shared: bool = False,
    ) -> str:
        """Issue (unless `contract` is given), commit on the contract's base, hand it in."""
        contract = contract or self.issue(task, paths, force_shared=force_shared)
        candidate = self.commit(contract.base_commit, files, f"{label}: work on {task}")
        return self.hand_in(label, contract.wire(), candidate)

    def hand_in(self, label: str, contract: dict[str, object], candidate: str) -> str:
        sid = self.spool.submit(submission(contract, candidate), key=key_for(self.repo, contract))
        self.sids[label] = sid
        self.candidates[label] = candidate
        return sid

    def drain(self) -> None:
        with self.open() as canonical:
            Daemon(
                spool=self.spool,
                canonical=canonical,
                engine=Integrator(canonical),
                mirror=for_spool(self.spool.root),
                settings=Settings(watch=False),
                clock=self.canon.clock,
            ).run(once=True)

    def verdict(self, label: str) -> tuple[str, Verdict]:
        found = self.spool.find(self.sids[label])
        assert found is not None
        folder, path = found
        return folder, Verdict.model_validate_json((path / VERDICT_FILE).read_bytes())

    def staging(self, label: str) -> str:
        folder, verdict = self.verdict(label)
        assert folder == "accepted" and verdict.staging_commit, (folder, verdict)
        return verdict.staging_commit

    def policy_file(self, **modes: str) -> Path:
        path = self.repo.parent / f"policy-{len(list(self.repo.parent.glob('policy-*')))}.toml"
        path.write_text(policy_text(**modes))
        return path


def make_rollout(tmp_path: Path, **modes: str) -> Rollout:
    canon = make_canon(tmp_path, FILES, policy=policy_text(**modes))
    return Rollout(canon, Spool(tmp_path / "spool").ensure())


def legacy_contract(contract: OwnershipContract) -> dict[str, object]:
    """What a runner from before ownership generations sends: the contract without one."""
    doc = json.loads(contract.to_json())
    doc.pop("ownershipGeneration")
    return dict(doc)
