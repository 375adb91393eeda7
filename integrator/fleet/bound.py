"""A worktree's binding, read without the contract models.

The write guard runs before every file write an agent makes: one `git rev-parse` finds the
checkout and its git folder, and the bound `contract.json` is read as plain rules
(`integrator.documents.rules`).
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from integrator import jsontext
from integrator.documents.rules import ContractRules, rules_from_bytes
from integrator.errors import ConfigurationError
from integrator.plumbing.git import run_git

BINDING_DIR = "integrator"


class Checkout(NamedTuple):
    """A git checkout: its top folder and its git folder (`.git/worktrees/<id>` for a
    linked worktree)."""

    root: Path
    git_dir: Path

    @property
    def worktree_id(self) -> str | None:
        """The worktree's git name; None for the main checkout."""
        return self.git_dir.name if self.git_dir.parent.name == "worktrees" else None

    @property
    def binding_dir(self) -> Path:
        return self.git_dir / BINDING_DIR


def checkout_of(start: Path) -> Checkout:
    """The checkout `start` lies in, from one `git rev-parse`."""
    proc = run_git(["rev-parse", "--show-toplevel", "--absolute-git-dir"], cwd=start, check=False)
    lines = proc.stdout.decode("utf-8", "surrogateescape").splitlines()
    if proc.returncode != 0 or len(lines) != 2:
        raise ConfigurationError(f"{start} is not inside a git worktree")
    return Checkout(Path(lines[0]), Path(lines[1]))


def bound_rules(checkout: Checkout) -> ContractRules | None:
    """The rules of the contract bound to the checkout, or None when nothing is bound."""
    try:
        data = (checkout.binding_dir / "contract.json").read_bytes()
    except FileNotFoundError:
        return None
    return rules_from_bytes(data)


def binding_record(checkout: Checkout) -> dict[str, str]:
    """The binding's record (task, agent, workspace…); empty when there is none."""
    try:
        data = jsontext.loads((checkout.binding_dir / "binding.json").read_text("utf-8"))
    except (FileNotFoundError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(k): str(v) for k, v in data.items()}
