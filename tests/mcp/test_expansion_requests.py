"""Issue #21 hole 7: `request_expansion` granted on the spot (an agent added
`.github/workflows/**` and `ci:github` to its own claim). Now the agent only files a
request; the coordinator grants it (`contract expand --id`), or the policy's `[expansion]
auto_grant` does for the categories it names — never CI, migrations, codegen, lockfiles."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from integrator.documents.digests import digest_of
from integrator.documents.policy import (
    POLICY_SCHEMA,
    default_policy,
    default_policy_text,
    parse_policy,
    policy_digest,
)
from integrator.errors import ConfigurationError
from integrator.fleet.keys import BOUND_KEY
from integrator.fleet.workspace import binding_dir
from integrator.mcp.tools import AgentTools
from tests.gitutil import GIT_ENV, git
from tests.gitutil import run_integrator as cli
from tests.mcp.world import claim_for_bob, exit_code, make_world, session, structured, text

AUTO_SOURCE = default_policy_text() + '\n[expansion]\nauto_grant = ["source"]\n'


def claim_of(main: Path, task: str) -> dict[str, Any]:
    """The task's row of `contract list --json`."""
    listed = cli("contract", "list", "--repo", str(main), "--json", cwd=main)
    assert listed.returncode == 0, listed.stderr
    (row,) = [r for r in json.loads(listed.stdout) if r["taskId"] == task]
    assert isinstance(row, dict)
    return row


def test_request_expansion_files_a_request_and_the_coordinator_grants_it(
    tmp_path: Path,
) -> None:
    """Through `integrator mcp` as a real process: asking for `.github/workflows/**` and
    `ci:github` leaves the claim at generation 1 with its paths, and the request pending
    in `contract list --json` (an answer with exit 3, not a grant); `contract request-
    expansion --send` gives the same answer. Once the coordinator runs `contract expand
    --id`, asking again binds generation 2 (with its attempt key) and the guard allows."""
    main, worktree, spool = make_world(tmp_path)
    ask = {"add_paths": [".github/workflows/**"], "add_resources": ["ci:github"]}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "integrator", "mcp", "--worktree", str(worktree), "--spool", str(spool)],
        env={**os.environ, **GIT_ENV},
        cwd=str(worktree),
    )
    seen: dict[str, Any] = {}

    async def ask_and_check(key: str) -> None:
        async with Client(params) as client:
            seen[key] = await client.call_tool("request_expansion", ask)
            seen[key + "-check"] = structured(
                await client.call_tool("check_paths", {"paths": [".github/workflows/ci.yml"]})
            )

    anyio.run(ask_and_check, "filed")
    filed = structured(seen["filed"])
    assert exit_code(seen["filed"]) == 3 and filed["state"] == "pending"
    assert filed["contract"] is None and filed["generation"] == 1
    assert "waits for the coordinator" in filed["reason"]
    assert seen["filed-check"]["decision"] == "deny"
    row = claim_of(main, "CODE")
    assert row["generation"] == 1 and row["paths"] == ["src/**"]
    assert row["resources"] == []
    (pending,) = row["pendingExpansions"]
    assert pending["requestId"] == filed["requestId"] and pending["state"] == "pending"
    assert pending["addPaths"] == ask["add_paths"] and pending["ref"] == filed["ref"]
    again = cli("contract", "request-expansion", "--send", "--add-path", ".github/workflows/**",
                "--add-resource", "ci:github", cwd=worktree)  # fmt: skip
    assert again.returncode == 3 and json.loads(again.stdout) == filed
    granted = cli("contract", "expand", "--repo", str(main), "--id", filed["requestId"], cwd=main)
    assert granted.returncode == 0, granted.stderr
    assert claim_of(main, "CODE")["pendingExpansions"] == []
    (binding_dir(worktree) / BOUND_KEY).unlink()
    anyio.run(ask_and_check, "bound")
    bound = structured(seen["bound"])
    assert exit_code(seen["bound"]) == 0 and bound["state"] == "granted"
    assert bound["contract"]["ownershipGeneration"] == 2
    assert bound["contract"]["paths"] == ["src/**", ".github/workflows/**"]
    assert seen["bound-check"]["decision"] == "allow"
    assert (binding_dir(worktree) / BOUND_KEY).exists()  # the key of generation 2, to sign
    twice = cli("contract", "expand", "--repo", str(main), "--id", filed["requestId"], cwd=main)
    assert twice.returncode == 1 and "already granted" in twice.stderr


def test_auto_grant_covers_the_named_category_and_never_ci(tmp_path: Path) -> None:
    """Under `auto_grant = ["source"]`: `tests/**` is granted and bound at once; a CI path,
    a glob that may match one (`*.yml`), a `ci:` or a `lockfile:` resource is filed and
    waits; a source path another live claim holds is refused as `contract expand` refuses
    it, recorded for review, the claim unchanged."""
    main, worktree, _ = make_world(tmp_path, policy=AUTO_SOURCE)
    claim_for_bob(main)
    seen: dict[str, Any] = {}
    asks = {
        "source": {"add_paths": ["tests/**"]},
        "ci-path": {"add_paths": [".github/workflows/**"]},
        "any-yml": {"add_paths": ["*.yml"]},
        "ci": {"add_resources": ["ci:github"]},
        "lockfile": {"add_resources": ["lockfile:uv.lock"]},
        "bobs": {"add_paths": ["docs/**"]},
        "bad": {"add_resources": ["nonsense"]},
    }

    async def body(client: Any) -> None:
        for key, arguments in asks.items():
            seen[key] = await client.call_tool("request_expansion", arguments)
        seen["check"] = structured(await client.call_tool("check_paths", {"paths": ["tests/t.py"]}))

    session(AgentTools(worktree), body)
    granted = structured(seen["source"])
    assert exit_code(seen["source"]) == 0 and granted["state"] == "granted"
    assert granted["contract"]["paths"] == ["src/**", "tests/**"]
    assert seen["check"]["decision"] == "allow"
    for key in ("ci-path", "any-yml", "ci", "lockfile"):
        answer = structured(seen[key])
        assert exit_code(seen[key]) == 3 and answer["state"] == "pending", key
    assert "may touch ci" in structured(seen["any-yml"])["reason"]
    assert "resource lockfile:uv.lock is lockfiles" in structured(seen["lockfile"])["reason"]
    conflict = seen["bobs"]
    assert conflict.is_error and exit_code(conflict) == 3
    assert "not granted" in text(conflict) and "DOCS" in text(conflict)
    assert seen["bad"].is_error and "invalid expansion request" in text(seen["bad"])
    row = claim_of(main, "CODE")
    assert row["generation"] == 2 and row["paths"] == ["src/**", "tests/**"]
    assert row["resources"] == []
    assert len(row["pendingExpansions"]) == 5
    # The refused one is the request `contract expand` refuses with the same words.
    refs = git("for-each-ref", "--format=%(refname)", "refs/integrator/expansions/CODE", cwd=main)
    (ref,) = [r for r in refs.split() if "docs/**" in git("show", f"{r}:request.json", cwd=main)]
    request = tmp_path / "request.json"
    request.write_text(git("show", f"{ref}:request.json", cwd=main))
    again = cli("contract", "expand", "--repo", str(main), "--request", str(request), cwd=main)
    assert again.returncode == 3 and again.stderr.strip() == text(conflict)


@pytest.mark.parametrize("category", ["ci", "migrations", "codegen", "lockfiles", "submodules"])
def test_a_policy_cannot_grant_ci_migrations_codegen_or_lockfiles_automatically(
    category: str,
) -> None:
    with pytest.raises(ConfigurationError, match="never granted automatically"):
        parse_policy(f'[expansion]\nauto_grant = ["source", "{category}"]\n')


def test_policy_set_refuses_auto_grant_of_ci_and_the_digest_records_auto_grant(
    tmp_path: Path,
) -> None:
    """`policy set` with `auto_grant = ["ci"]` is a configuration error (exit 2) and leaves
    the policy as it was; a policy that names auto_grant has a digest of its own, and one
    without keeps the digest it had before the section existed."""
    main, _, _ = make_world(tmp_path)
    before = cli("policy", "show", "--repo", str(main), cwd=main).stdout
    bad = tmp_path / "bad.toml"
    bad.write_text(default_policy_text() + '\n[expansion]\nauto_grant = ["ci"]\n')
    refused = cli("policy", "set", str(bad), "--repo", str(main), cwd=main)
    assert refused.returncode == 2 and "never granted automatically" in refused.stderr
    assert cli("policy", "show", "--repo", str(main), cwd=main).stdout == before
    plain = default_policy()
    document = plain.model_dump(mode="json")
    document.pop("expansion")
    document.pop("validation")  # None: left out as before, too
    document.pop("limits")  # the default [limits]: left out too
    assert policy_digest(plain, 1) == digest_of(
        {"schema": POLICY_SCHEMA, "generation": 1, "policy": document}
    )
    assert policy_digest(parse_policy(AUTO_SOURCE), 1) != policy_digest(plain, 1)
