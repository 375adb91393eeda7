"""A canonical repository fixture: initialized, with a controllable clock."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from integrator.documents.contract import OwnershipContract
from integrator.documents.verdict import Verdict
from integrator.landing.engine import Integrator
from integrator.records.canonical import Canonical
from integrator.records.claims import Claims, IssueRequest
from integrator.records.prepare import prepare
from tests.factories import NOW
from tests.gitutil import Spec, commit_files, declare_bare, git, make_repo


@dataclass
class Clock:
    now: datetime = NOW

    def __call__(self) -> datetime:
        return self.now

    def advance(self, minutes: float) -> None:
        self.now += timedelta(minutes=minutes)


@dataclass
class Canon:
    path: Path
    clock: Clock = field(default_factory=Clock)

    def open(self) -> Canonical:
        return Canonical(self.path, clock=self.clock)

    def issue(self, task: str, paths: list[str], **kw: object) -> OwnershipContract:
        with self.open() as canonical:
            return Claims(canonical).issue(
                IssueRequest(task_id=task, paths=tuple(paths), **kw)  # type: ignore[arg-type]
            )

    def integrate(self, contract: OwnershipContract | bytes, candidate: str) -> Verdict:
        data = contract if isinstance(contract, bytes) else contract.to_json().encode()
        with self.open() as canonical:
            return Integrator(canonical).integrate(data, candidate)

    def check(self, contract: OwnershipContract, candidate: str) -> Verdict:
        with self.open() as canonical:
            return Integrator(canonical).check(contract.to_json().encode(), candidate)

    def ref(self, name: str) -> str | None:
        with self.open() as canonical:
            return canonical.ref(name)

    def commit(self, files: Mapping[str, Spec], *, parent: str | None = None) -> str:
        return commit_files(
            self.path,
            files,
            "agent change",
            parent=parent or "main",
            ref=None,
        )

    def tree_of(self, rev: str) -> str:
        return git("rev-parse", f"{rev}^{{tree}}", cwd=self.path)


def make_canon(
    tmp_path: Path, files: Mapping[str, Spec] | None = None, *, policy: str | None = None
) -> Canon:
    path = declare_bare(make_repo(tmp_path / "canon"))
    commit_files(
        path,
        files
        or {
            "billing/invoice.py": "invoice = 1\n",
            "billing/tax.py": "tax = 1\n",
            "auth/login.py": "login = 1\n",
            "docs/index.md": "# docs\n",
        },
        "base",
        ref="refs/heads/main",
    )
    prepare(path, target="main", policy_text=policy)
    return Canon(path)


def contract_bytes(contract: OwnershipContract) -> bytes:
    return json.dumps(contract.wire()).encode()
