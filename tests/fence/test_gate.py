"""The one-shot gate on real repositories: every violation code and the accepted shapes."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest

from integrator.documents.verdict import Code, Decision, Determination
from tests.factories import Gate, contract_doc, later
from tests.gitutil import commit_files, git, make_repo

SUB_A = "a" * 40
SUB_B = "b" * 40


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = make_repo(tmp_path / "repo")
    commit_files(
        path,
        {
            "src/app.py": "print('hi')\n",
            "src/util.py": "x = 1\n",
            "docs/guide.md": "# guide\n",
            "README": "readme\n",
            "vendor/lib": (SUB_A, "g"),
            "src/run.sh": "#!/bin/sh\n",
        },
        "base",
    )
    return path


@pytest.fixture
def gate(repo: Path) -> Gate:
    return Gate(repo)


def base_of(repo: Path) -> str:
    return git("rev-parse", "HEAD", cwd=repo)


def change(repo: Path, files: dict[str, object]) -> str:
    return commit_files(repo, files, "candidate", ref=None)  # type: ignore[arg-type]


def codes(verdict: object) -> list[Code]:
    return list(verdict.codes)  # type: ignore[attr-defined]


def test_owned_edit_is_accepted(repo: Path, gate: Gate) -> None:
    """An edit inside the allowed globs is ACCEPTED with no violations."""
    base = base_of(repo)
    cand = change(repo, {"src/app.py": "print('bye')\n"})
    verdict = gate.run(base, cand)
    assert verdict.decision is Decision.ACCEPTED
    assert verdict.violations == []
    assert verdict.changes == 1


def test_unowned_path_is_fenced(repo: Path, gate: Gate) -> None:
    """A change outside the allowed globs is PATH_NOT_OWNED and FENCED."""
    base = base_of(repo)
    cand = change(repo, {"src/app.py": "y\n", "docs/guide.md": "changed\n"})
    verdict = gate.run(base, cand)
    assert verdict.decision is Decision.FENCED
    assert [(v.code, v.path) for v in verdict.violations] == [
        (Code.PATH_NOT_OWNED, "docs/guide.md")
    ]


def test_deletion_outside_contract_is_fenced(repo: Path, gate: Gate) -> None:
    """A deletion must be owned like any other change: deletions do not escape detection."""
    base = base_of(repo)
    cand = change(repo, {"README": None})
    verdict = gate.run(base, cand)
    assert codes(verdict) == [Code.PATH_NOT_OWNED]
    assert "deletes README" in verdict.violations[0].detail


def test_denied_path_wins_over_allowed(repo: Path, gate: Gate) -> None:
    """A path matched by both allow and deny globs is PATH_DENIED (deny wins)."""
    base = base_of(repo)
    cand = change(repo, {"src/util.py": "x = 2\n"})
    verdict = gate.run(base, cand, deny=["src/util.py"])
    assert codes(verdict) == [Code.PATH_DENIED]
    assert "src/util.py" in verdict.violations[0].detail


def test_every_violation_is_reported(repo: Path, gate: Gate) -> None:
    """The gate reports all violations, not only the first."""
    base = base_of(repo)
    cand = change(repo, {"docs/guide.md": "a\n", "README": "b\n", "src/util.py": "c\n"})
    verdict = gate.run(base, cand, deny=["src/util.py"])
    assert sorted(codes(verdict)) == sorted(
        [Code.PATH_NOT_OWNED, Code.PATH_NOT_OWNED, Code.PATH_DENIED]
    )


def test_rename_needs_both_ends(repo: Path, gate: Gate) -> None:
    """A rename out of the contract names the uncovered end in RENAME_NOT_OWNED."""
    base = base_of(repo)
    cand = change(repo, {"src/app.py": None, "docs/app.py": "print('hi')\n"})
    verdict = gate.run(base, cand)
    assert [(v.code, v.path) for v in verdict.violations] == [
        (Code.RENAME_NOT_OWNED, "docs/app.py")
    ]
    assert "new end" in verdict.violations[0].detail


def test_rename_into_contract_from_outside_is_fenced(repo: Path, gate: Gate) -> None:
    """Moving a file into the contract from outside it leaves the old end uncovered."""
    base = base_of(repo)
    cand = change(repo, {"docs/guide.md": None, "src/guide.md": "# guide\n"})
    verdict = gate.run(base, cand)
    assert [(v.code, v.path) for v in verdict.violations] == [
        (Code.RENAME_NOT_OWNED, "docs/guide.md")
    ]
    assert "old end" in verdict.violations[0].detail


def test_owned_rename_with_edit_is_accepted(repo: Path, gate: Gate) -> None:
    """A rename with an edit inside the contract is ACCEPTED and reported as a rename."""
    base = base_of(repo)
    body = "".join(f"line {i}\n" for i in range(20))
    base2 = commit_files(repo, {"src/big.py": body}, "more")
    cand = change(repo, {"src/big.py": None, "src/moved/big.py": body + "one more\n"})
    verdict = gate.run(base2, cand)
    assert verdict.decision is Decision.ACCEPTED
    with gate.canonical() as canonical:
        from integrator.fence.diff import recompute

        repo_obj = canonical.repo
        diff = recompute(repo_obj, repo_obj[base2].tree, repo_obj[cand].tree)
    assert [(c.status.value, c.old_path, c.new_path) for c in diff.changes] == [
        ("R", "src/big.py", "src/moved/big.py")
    ]
    assert base != base2


def test_mode_change_outside_contract(repo: Path, gate: Gate) -> None:
    """Flipping the exec bit on an unowned path is MODE_NOT_OWNED."""
    base = base_of(repo)
    cand = change(repo, {"README": ("readme\n", "x")})
    verdict = gate.run(base, cand)
    assert codes(verdict) == [Code.MODE_NOT_OWNED]
    assert "100644 → 100755" in verdict.violations[0].detail


def test_owned_mode_change_and_symlink_inside_repo_are_accepted(repo: Path, gate: Gate) -> None:
    """Exec-bit flips and symlinks that stay inside the repository are ACCEPTED."""
    base = base_of(repo)
    cand = change(
        repo,
        {
            "src/run.sh": ("#!/bin/sh\n", "x"),
            "src/link": ("../docs/guide.md", "l"),
            "src/app.py": ("util.py", "l"),
        },
    )
    verdict = gate.run(base, cand)
    assert verdict.decision is Decision.ACCEPTED, verdict.violations


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ("/etc/passwd", "absolute"),
        ("../../etc/passwd", "climbs above"),
        ("../.git/config", "into .git"),
        ("sub/../../../x", "down and back up"),
        ("a/b/c/d/up/../../../../../../etc/passwd", "down and back up"),  # through a link
        ("lib/../lib/x", "down and back up"),
        ("../.git./config", "into .git"),
        ("../git~1/config", "into .git"),
        (".. /.. /.. /x", "read as '..'"),
        (".../x", "read as '..'"),
        ("../.GIT/hooks", "into .git"),
    ],
)
def test_symlink_escape(repo: Path, gate: Gate, target: str, why: str) -> None:
    """A symlink that escapes the repository or points into .git is SYMLINK_ESCAPE."""
    base = base_of(repo)
    cand = change(repo, {"src/evil": (target, "l")})
    verdict = gate.run(base, cand)
    assert codes(verdict) == [Code.SYMLINK_ESCAPE]
    assert why in verdict.violations[0].detail


def test_deny_line_matching_a_folder_denies_its_contents(repo: Path, gate: Gate) -> None:
    """`src/secret/*` matches the folder `src/secret/sub`, so git (and the fence) deny
    everything in it."""
    base = base_of(repo)
    cand = change(repo, {"src/secret/sub/key": "k\n"})
    verdict = gate.run(base, cand, deny=["src/secret/*"])
    assert [(v.code, v.path) for v in verdict.violations] == [
        (Code.PATH_DENIED, "src/secret/sub/key")
    ]


def test_symlink_chain_cannot_escape(repo: Path, gate: Gate) -> None:
    """Two links, each inside the repository on its own text, that escape together: the
    second climbs out of the first (`up` points at the root). The chain is refused."""
    base = base_of(repo)
    cand = change(
        repo,
        {
            "src/a/b/c/d/up": ("../../../../..", "l"),
            "src/x": ("a/b/c/d/up/../../../../../../etc/passwd", "l"),
        },
    )
    verdict = gate.run(base, cand)
    assert verdict.decision is Decision.FENCED
    assert [(v.code, v.path) for v in verdict.violations] == [(Code.SYMLINK_ESCAPE, "src/x")]


def test_submodule_bump_needs_resource(repo: Path, gate: Gate) -> None:
    """A gitlink moved to another commit needs the path and submodule:<path>."""
    base = base_of(repo)
    cand = change(repo, {"vendor/lib": (SUB_B, "g")})
    verdict = gate.run(base, cand, paths=["src/**", "vendor/lib"])
    assert codes(verdict) == [Code.SUBMODULE_NOT_OWNED]
    violation = verdict.violations[0]
    assert violation.resource == "submodule:vendor/lib"
    assert SUB_A in violation.detail
    assert SUB_B in violation.detail


def test_submodule_bump_with_resource_is_accepted(repo: Path, gate: Gate) -> None:
    """A submodule bump with both the path and the resource is ACCEPTED and OWNED."""
    base = base_of(repo)
    cand = change(repo, {"vendor/lib": (SUB_B, "g")})
    verdict = gate.run(
        base, cand, paths=["src/**", "vendor/lib"], resources=["submodule:vendor/lib"]
    )
    assert verdict.decision is Decision.ACCEPTED
    assert [(r.resource, r.determination) for r in verdict.resources] == [
        ("submodule:vendor/lib", Determination.OWNED)
    ]


def test_moving_a_submodule_needs_both_ends(repo: Path, gate: Gate) -> None:
    """A gitlink moved to another path (git: R100) deletes the submodule at the old path:
    that end needs its path and `submodule:<old>` too, not only the new one."""
    base = base_of(repo)
    cand = change(repo, {"vendor/lib": None, "src/lib": (SUB_A, "g")})
    verdict = gate.run(base, cand, resources=["submodule:src/lib"])
    assert [(v.code, v.path, v.resource) for v in verdict.violations] == [
        (Code.SUBMODULE_NOT_OWNED, "vendor/lib", "submodule:vendor/lib")
    ]
    owned = gate.run(
        base, cand, paths=["src/**", "vendor/lib"],
        resources=["submodule:src/lib", "submodule:vendor/lib"],
    )  # fmt: skip
    assert owned.decision is Decision.ACCEPTED, owned.violations


GITMODULES = '[submodule "lib"]\n\tpath = vendor/lib\n\turl = https://example.org/lib.git\n'


def test_repointing_a_submodule_in_gitmodules_needs_its_resource(repo: Path, gate: Gate) -> None:
    """Changing a submodule's url in .gitmodules touches submodule:<path>, like a bump."""
    base = commit_files(repo, {".gitmodules": GITMODULES}, "gitmodules")
    evil = GITMODULES.replace("example.org/lib.git", "evil.example/lib.git")
    cand = change(repo, {".gitmodules": evil})
    verdict = gate.run(base, cand, paths=[".gitmodules"])
    assert [(v.code, v.resource) for v in verdict.violations] == [
        (Code.RESOURCE_NOT_OWNED, "submodule:vendor/lib")
    ]
    owned = gate.run(base, cand, paths=[".gitmodules"], resources=["submodule:vendor/lib"])
    assert owned.decision is Decision.ACCEPTED, owned.violations
    comment = change(repo, {".gitmodules": "# lib\n" + GITMODULES})
    assert gate.run(base, comment, paths=[".gitmodules"]).decision is Decision.ACCEPTED


def test_escaped_section_name_cannot_hide_a_repointed_submodule(repo: Path, gate: Gate) -> None:
    """git reads `[submodule "l\\ib"]` as submodule lib and the last url wins: the change
    re-points lib although the section looks new (read with git's own config parser)."""
    base = commit_files(repo, {".gitmodules": GITMODULES}, "gitmodules")
    sneaky = (
        '[submodule "lib"]\n\turl = https://example.org/lib.git\n'
        '[submodule "l\\ib"]\n\turl = https://evil.example/lib.git\n\tpath = src/mine\n'
        '[submodule "lib"]\n\tpath = vendor/lib\n'
    )
    cand = change(repo, {".gitmodules": sneaky})
    verdict = gate.run(
        base, cand, paths=[".gitmodules", "src/**"], resources=["submodule:src/mine"]
    )
    assert (Code.RESOURCE_NOT_OWNED, "submodule:vendor/lib") in [
        (v.code, v.resource) for v in verdict.violations
    ]


def test_unreadable_gitmodules_goes_to_review(repo: Path, gate: Gate) -> None:
    """A .gitmodules git itself cannot read as config is UNKNOWN: review."""
    base = commit_files(repo, {".gitmodules": GITMODULES}, "gitmodules")
    cand = change(repo, {".gitmodules": GITMODULES + '[submodule "broken\n'})
    verdict = gate.run(base, cand, paths=[".gitmodules"])
    assert verdict.decision is Decision.REVIEW
    assert [(v.code, v.resource) for v in verdict.violations] == [
        (Code.RESOURCE_UNKNOWN, "submodule:.gitmodules")
    ]


def test_case_collision(repo: Path, gate: Gate) -> None:
    """Adding a path that equals another under case folding is CASE_COLLISION."""
    base = base_of(repo)
    cand = change(repo, {"src/App.py": "x\n"})
    verdict = gate.run(base, cand)
    assert codes(verdict) == [Code.CASE_COLLISION]
    assert "src/app.py" in verdict.violations[0].detail


def test_case_collision_on_a_folder(repo: Path, gate: Gate) -> None:
    """A new folder whose name case-folds onto an existing one collides too."""
    base = base_of(repo)
    cand = change(repo, {"SRC/new.py": "x\n"})
    verdict = gate.run(base, cand, paths=["src/**", "SRC/**"])
    assert codes(verdict) == [Code.CASE_COLLISION]


def test_unicode_collision(repo: Path, gate: Gate) -> None:
    """NFC and NFD spellings of one name in one folder are UNICODE_COLLISION."""
    nfc = unicodedata.normalize("NFC", "src/café.txt")
    nfd = unicodedata.normalize("NFD", "src/café.txt")
    base = commit_files(repo, {nfc: "one\n"}, "nfc")
    cand = change(repo, {nfd: "two\n"})
    verdict = gate.run(base, cand)
    assert Code.UNICODE_COLLISION in codes(verdict)


def test_hfs_ignorable_code_point_collides(repo: Path, gate: Gate) -> None:
    """`app\u200c.py` is `app.py` to an HFS+ checkout: UNICODE_COLLISION."""
    base = base_of(repo)
    cand = change(repo, {"src/app\u200c.py": "two\n"})
    verdict = gate.run(base, cand)
    assert Code.UNICODE_COLLISION in codes(verdict)


def test_unsafe_path_in_tree(repo: Path, gate: Gate) -> None:
    """A path with a control character or a backslash is UNSAFE_PATH."""
    base = base_of(repo)
    cand = change(repo, {"src/bad\x01name": "x\n", "src/back\\slash": "y\n"})
    verdict = gate.run(base, cand)
    assert codes(verdict) == [Code.UNSAFE_PATH, Code.UNSAFE_PATH]


def test_patch_too_large(repo: Path, gate: Gate) -> None:
    """A change larger than maxPatchBytes is PATCH_TOO_LARGE, with the measured size."""
    base = base_of(repo)
    cand = change(repo, {"src/blob.bin": "x" * 5000})
    verdict = gate.run(base, cand, maxPatchBytes=4000)
    assert codes(verdict) == [Code.PATCH_TOO_LARGE]
    assert verdict.patch_bytes == 5000
    assert "5000 bytes" in verdict.violations[0].detail


def test_patch_size_counts_old_and_new_blobs(repo: Path, gate: Gate) -> None:
    """A modification counts the old and the new blob; an exact rename counts nothing."""
    base = base_of(repo)
    cand = change(
        repo, {"src/util.py": "x = 22\n", "src/app.py": None, "src/b.py": "print('hi')\n"}
    )
    verdict = gate.run(base, cand)
    assert verdict.patch_bytes == len("x = 1\n") + len("x = 22\n")


def test_base_missing_goes_to_review(repo: Path, gate: Gate) -> None:
    """An unknown base commit is REVIEW with BASE_MISSING, never ACCEPTED."""
    cand = change(repo, {"src/app.py": "z\n"})
    verdict = gate.run("1234567890" * 4, cand)
    assert verdict.decision is Decision.REVIEW
    assert codes(verdict) == [Code.BASE_MISSING]


def test_base_not_ancestor(repo: Path, gate: Gate) -> None:
    """A base that is not an ancestor of the candidate is BASE_NOT_ANCESTOR."""
    base = base_of(repo)
    other = commit_files(repo, {"src/x.py": "1\n"}, "side", ref=None)
    cand = change(repo, {"src/app.py": "z\n"})
    verdict = gate.run(other, cand)
    assert codes(verdict) == [Code.BASE_NOT_ANCESTOR]
    assert base != other


def test_invalid_contract_is_fenced_with_errors(repo: Path, gate: Gate) -> None:
    """A contract with an unknown field or resource kind is FENCED CONTRACT_INVALID naming it."""
    base = base_of(repo)
    cand = change(repo, {"src/app.py": "q\n"})
    doc = gate.doc(base, resources=["database:main"])
    doc["surprise"] = True
    verdict = gate.run_raw(json.dumps(doc).encode(), cand)
    assert verdict.decision is Decision.FENCED
    assert codes(verdict) == [Code.CONTRACT_INVALID]
    detail = verdict.violations[0].detail
    assert "database" in detail
    assert "surprise" in detail


def test_legacy_submission_goes_to_review(repo: Path, gate: Gate) -> None:
    """A submission without an ownership generation goes only to review."""
    base = base_of(repo)
    cand = change(repo, {"src/app.py": "q\n"})
    doc = gate.doc(base)
    del doc["ownershipGeneration"]
    verdict = gate.run_raw(json.dumps(doc).encode(), cand)
    assert verdict.decision is Decision.REVIEW
    assert codes(verdict) == [Code.LEGACY_SUBMISSION]


def test_repo_mismatch(repo: Path, gate: Gate) -> None:
    """A contract issued for another repository is REPO_MISMATCH."""
    base = base_of(repo)
    cand = change(repo, {"src/app.py": "q\n"})
    data = json.dumps(
        contract_doc(baseCommit=base, policyDigest=gate.policy.digest, repo="sha256:" + "e" * 64)
    ).encode()
    verdict = gate.run_raw(data, cand)
    assert codes(verdict) == [Code.REPO_MISMATCH]


def test_expired_lease_without_claims(repo: Path, gate: Gate) -> None:
    """Without claims, the contract's own expired lease fences it."""
    base = base_of(repo)
    cand = change(repo, {"src/app.py": "q\n"})
    verdict = gate.run(base, cand, lease={"holder": "agent-a", "expiresAt": later(-1)})
    assert codes(verdict) == [Code.LEASE_EXPIRED]


def test_candidate_missing(repo: Path, gate: Gate) -> None:
    """A candidate that is not in the repository is CANDIDATE_MISSING."""
    verdict = gate.run(base_of(repo), "f" * 40)
    assert codes(verdict) == [Code.CANDIDATE_MISSING]


def test_lockfile_resource_not_owned(repo: Path, gate: Gate) -> None:
    """Rewriting a well-known lockfile touches lockfile:<path>; unowned it is fenced."""
    base = commit_files(repo, {"src/pnpm-lock.yaml": "a\n"}, "lock")
    cand = change(repo, {"src/pnpm-lock.yaml": "b\n", "src/app.py": "c\n"})
    verdict = gate.run(base, cand)
    assert codes(verdict) == [Code.RESOURCE_NOT_OWNED]
    assert verdict.violations[0].resource == "lockfile:src/pnpm-lock.yaml"
    owned = gate.run(base, cand, resources=["lockfile:src/pnpm-lock.yaml"])
    assert owned.decision is Decision.ACCEPTED
    assert [(r.resource, r.determination) for r in owned.resources] == [
        ("lockfile:src/pnpm-lock.yaml", Determination.OWNED)
    ]


POLICY = """
version = 1
[[resource]]
paths = ["gen/**"]
resource = "codegen:client"
unknown = true

[[resource]]
paths = ["db/migrations/billing/**"]
resource = "migration-slot:billing"

[shared]
resources = ["migration-slot:billing"]
paths = ["CHANGELOG"]

[enforcement]
source = "observe"

[categories]
ci = [".github/**"]
"""


def test_unknown_resource_goes_to_review(repo: Path) -> None:
    """Touching output whose owner cannot be resolved statically is REVIEW RESOURCE_UNKNOWN."""
    gate = Gate(repo, POLICY)
    base = base_of(repo)
    cand = change(repo, {"gen/client.py": "x\n"})
    verdict = gate.run(base, cand, paths=["gen/**"])
    assert verdict.decision is Decision.REVIEW
    assert codes(verdict) == [Code.RESOURCE_UNKNOWN]
    assert verdict.resources[0].determination is Determination.UNKNOWN
    expanded = gate.run(base, cand, paths=["gen/**"], resources=["codegen:client"])
    assert expanded.decision is Decision.ACCEPTED


def test_shared_resource_and_path(repo: Path) -> None:
    """Shared resources are SHARED and shared paths need no ownership."""
    gate = Gate(repo, POLICY)
    base = base_of(repo)
    cand = change(repo, {"db/migrations/billing/001.sql": "x\n", "CHANGELOG": "entry\n"})
    verdict = gate.run(base, cand, paths=["db/**"])
    assert verdict.decision is Decision.ACCEPTED
    assert [(r.resource, r.determination) for r in verdict.resources] == [
        ("migration-slot:billing", Determination.SHARED)
    ]


def test_observe_mode_records_but_lets_through(repo: Path) -> None:
    """In observe mode an ownership violation is recorded and the candidate passes."""
    gate = Gate(repo, POLICY)
    base = base_of(repo)
    cand = change(repo, {"docs/guide.md": "x\n", ".github/ci.yml": "y\n"})
    verdict = gate.run(base, cand)
    assert verdict.decision is Decision.FENCED  # .github is category ci: enforced
    modes = {v.path: v.mode for v in verdict.violations}
    assert modes == {"docs/guide.md": "observe", ".github/ci.yml": "enforce"}
    observed_only = gate.run(base, change(repo, {"docs/guide.md": "x\n"}))
    assert observed_only.decision is Decision.ACCEPTED
    assert codes(observed_only) == [Code.PATH_NOT_OWNED]


def test_tree_with_duplicate_names_is_refused(repo: Path, gate: Gate) -> None:
    """A hand-made tree with two entries of one name (git fsck rejects it) is UNSAFE_PATH."""
    base = base_of(repo)
    blob = git("hash-object", "-w", "--stdin", cwd=repo, input=b"one\n")
    other = git("hash-object", "-w", "--stdin", cwd=repo, input=b"two\n")
    raw = b"100644 app.py\x00" + bytes.fromhex(blob) + b"100644 app.py\x00" + bytes.fromhex(other)
    src = git("hash-object", "-t", "tree", "-w", "--literally", "--stdin", cwd=repo, input=raw)
    root = git("ls-tree", base, cwd=repo)
    lines = [line for line in root.splitlines() if not line.endswith("\tsrc")]
    lines.append(f"040000 tree {src}\tsrc")
    tree = git("mktree", cwd=repo, input=("\n".join(lines) + "\n").encode())
    cand = git("commit-tree", tree, "-p", base, "-m", "dup", cwd=repo)
    verdict = gate.run(base, cand)
    assert verdict.decision is Decision.FENCED
    assert codes(verdict) == [Code.UNSAFE_PATH]
    assert "duplicate" in verdict.violations[0].detail


def _candidate_with_src(repo: Path, base: str, *records: bytes) -> str:
    """A candidate whose `src` tree is exactly `records`, written byte for byte."""
    src = git("hash-object", "-t", "tree", "-w", "--literally", "--stdin", cwd=repo,
              input=b"".join(records))  # fmt: skip
    root = git("ls-tree", base, cwd=repo)
    lines = [line for line in root.splitlines() if not line.endswith("\tsrc")]
    lines.append(f"040000 tree {src}\tsrc")
    tree = git("mktree", cwd=repo, input=("\n".join(lines) + "\n").encode())
    return git("commit-tree", tree, "-p", base, "-m", "hand-made", cwd=repo)


def _record(mode: str, name: str, oid: str) -> bytes:
    return f"{mode} {name}".encode() + b"\0" + bytes.fromhex(oid)


@pytest.mark.parametrize(
    ("mode", "kind"),
    [
        ("040000", "tree"),  # git reads it as a tree: its contents would go unchecked
        ("120644", "blob"),  # read as a symlink
        ("170000", "blob"),  # read as a gitlink
        ("0", "blob"),
    ],
)
def test_modes_git_reads_loosely_are_refused(repo: Path, gate: Gate, mode: str, kind: str) -> None:
    """A mode spelled other than git writes it is UNSAFE_PATH, never an opaque file."""
    base = base_of(repo)
    blob = git("hash-object", "-w", "--stdin", cwd=repo, input=b"/etc/passwd")
    inner = git("mktree", cwd=repo, input=f"100644 blob {blob}\tkey\n".encode())
    oid = inner if kind == "tree" else blob
    app = git("rev-parse", f"{base}:src/app.py", cwd=repo)
    cand = _candidate_with_src(
        repo, base, _record("100644", "app.py", app), _record(mode, "x", oid)
    )
    verdict = gate.run(base, cand)
    assert verdict.decision is Decision.FENCED
    assert codes(verdict) == [Code.UNSAFE_PATH]
    assert "mode git does not write" in verdict.violations[0].detail


def test_entries_naming_the_wrong_kind_of_object_are_refused(repo: Path, gate: Gate) -> None:
    """A file entry naming a tree, or a folder entry naming a blob (even one whose bytes
    parse as a tree): git fsck rejects both and checkouts fail, so UNSAFE_PATH."""
    base = base_of(repo)
    app = git("rev-parse", f"{base}:src/app.py", cwd=repo)
    subtree = git("rev-parse", f"{base}:src", cwd=repo)
    as_file = _candidate_with_src(
        repo, base, _record("100644", "app.py", app), _record("100644", "evil", subtree)
    )
    assert codes(gate.run(base, as_file)) == [Code.UNSAFE_PATH]
    tree_bytes = _record("100644", "key", app)
    disguised = git("hash-object", "-w", "--stdin", cwd=repo, input=tree_bytes)
    as_folder = _candidate_with_src(
        repo, base, _record("100644", "app.py", app), _record("40000", "sub", disguised)
    )
    verdict = gate.run(base, as_folder)
    assert codes(verdict) == [Code.UNSAFE_PATH]
    assert "not a tree" in verdict.violations[0].detail


def test_empty_folder_entries_are_refused(repo: Path, gate: Gate) -> None:
    """A folder entry naming the empty tree (git's index never writes one) would land
    unseen by a walk that follows files: UNSAFE_PATH."""
    base = base_of(repo)
    empty = git("mktree", cwd=repo, input=b"")
    app = git("rev-parse", f"{base}:src/app.py", cwd=repo)
    cand = _candidate_with_src(
        repo, base, _record("100644", "app.py", app), _record("40000", "zz", empty)
    )
    verdict = gate.run(base, cand)
    assert codes(verdict) == [Code.UNSAFE_PATH]
    assert "empty folder" in verdict.violations[0].detail


def test_legacy_group_writable_mode_is_a_regular_file(repo: Path, gate: Gate) -> None:
    """100664, which old git wrote and fsck accepts, is read as a regular file: a folder
    holding one can still be edited."""
    base = base_of(repo)
    app = git("rev-parse", f"{base}:src/app.py", cwd=repo)
    util = git("rev-parse", f"{base}:src/util.py", cwd=repo)
    old = _candidate_with_src(
        repo, base, _record("100644", "app.py", app), _record("100664", "util.py", util)
    )
    assert gate.run(base, old).decision is Decision.ACCEPTED
    edited = git("hash-object", "-w", "--stdin", cwd=repo, input=b"x = 2\n")
    newer = _candidate_with_src(
        repo, old, _record("100644", "app.py", app), _record("100664", "util.py", edited)
    )
    assert gate.run(old, newer).decision is Decision.ACCEPTED


def test_unsorted_tree_is_refused(repo: Path, gate: Gate) -> None:
    """Entries out of git's order (fsck: treeNotSorted) are UNSAFE_PATH."""
    base = base_of(repo)
    app = git("rev-parse", f"{base}:src/app.py", cwd=repo)
    util = git("rev-parse", f"{base}:src/util.py", cwd=repo)
    cand = _candidate_with_src(
        repo, base, _record("100644", "util.py", util), _record("100644", "app.py", app)
    )
    verdict = gate.run(base, cand)
    assert codes(verdict) == [Code.UNSAFE_PATH]
    assert "not sorted" in verdict.violations[0].detail


@pytest.mark.parametrize("name", ["a/b", ".", ".."])
def test_names_that_are_not_one_component_are_refused(repo: Path, gate: Gate, name: str) -> None:
    """A name holding a slash, or '.'/'..', is UNSAFE_PATH (fsck: fullPathname, hasDot…)."""
    base = base_of(repo)
    blob = git("hash-object", "-w", "--stdin", cwd=repo, input=b"x\n")
    cand = _candidate_with_src(repo, base, _record("100644", name, blob))
    assert codes(gate.run(base, cand)) == [Code.UNSAFE_PATH]


@pytest.mark.parametrize(
    ("raw", "good"),
    [
        (b"100644 a\x00" + b"\x01" * 20 + b"40000 d\x00" + b"\x02" * 20, True),
        (b"", True),
        (b"100644 a\x00" + b"\x01" * 20 + b"junk", False),  # bytes no record explains
        (b"100644 a\x00" + b"\x01" * 19, False),  # truncated id
        (b"100644 a\x00" + b"\x01" * 20 + b"100755 a\x00" + b"\x02" * 20, False),  # a twice
    ],
)
def test_tree_reader_refuses_what_git_would_not_write(raw: bytes, good: bool) -> None:
    """Raw tree records parse only when they explain every byte, each name once."""
    from integrator.fence.trees import MalformedTree, TreeReader

    reader = TreeReader(None, pending=lambda oid: raw)  # type: ignore[arg-type]
    if good:
        records = reader.records(b"\x09" * 20)
        assert len(records) == len(reader.entries(b"\x09" * 20)) == raw.count(b"\x00")
    else:
        with pytest.raises(MalformedTree):
            reader.records(b"\x09" * 20)


def test_shallow_clone_of_canonical_repo_reports_base_missing(repo: Path, tmp_path: Path) -> None:
    """A CI gate in a shallow clone without a configured id says BASE_MISSING, not a mismatch.

    Regression: the identity was derived from the shallow boundary commit, so every contract
    looked issued for another repository (REPO_MISMATCH) and the base check never ran.
    """
    canonical = Gate(repo)
    base = base_of(repo)
    commit_files(repo, {"src/app.py": "two\n"}, "second")
    tip = commit_files(repo, {"src/app.py": "three\n"}, "third")
    doc = canonical.doc(base)  # issued against the full repository's identity
    clone = tmp_path / "ci"
    git("clone", "-q", "--depth", "1", f"file://{repo}", str(clone), cwd=tmp_path)
    verdict = Gate(clone).run_raw(json.dumps(doc).encode(), tip)
    assert verdict.decision is Decision.REVIEW
    assert codes(verdict) == [Code.BASE_MISSING, Code.REPO_UNVERIFIED]
    git("config", "integrator.repoId", doc["repo"], cwd=clone)
    configured = Gate(clone).run_raw(json.dumps(doc).encode(), tip)
    assert codes(configured) == [Code.BASE_MISSING]


OBSERVE_CI = """
[enforcement]
ci = "observe"

[categories]
ci = ["ci/**"]
"""


def test_a_gitlink_moved_into_an_observed_folder_is_still_fenced(repo: Path) -> None:
    """Moving an unowned gitlink into an observed category deletes it where it was: that
    end is decided by its own (enforced) category, so the move is FENCED."""
    gate = Gate(repo, OBSERVE_CI)
    base = base_of(repo)
    cand = change(repo, {"vendor/lib": None, "ci/lib": (SUB_A, "g")})
    verdict = gate.run(base, cand, paths=["docs/**"])
    assert verdict.decision is Decision.FENCED
    modes = {(v.code, v.path): v.mode for v in verdict.violations}
    assert modes == {
        (Code.SUBMODULE_NOT_OWNED, "vendor/lib"): "enforce",
        (Code.SUBMODULE_NOT_OWNED, "ci/lib"): "observe",
    }


def test_a_gitlink_moved_out_of_an_observed_folder_is_fenced(repo: Path) -> None:
    """The other way round: the new end, outside every observed category, is enforced."""
    gate = Gate(repo, OBSERVE_CI)
    base = commit_files(repo, {"vendor/lib": None, "ci/lib": (SUB_A, "g")}, "move", ref="HEAD")
    cand = change(repo, {"ci/lib": None, "vendor/lib": (SUB_A, "g")})
    verdict = gate.run(base, cand, paths=["docs/**"])
    assert verdict.decision is Decision.FENCED
    modes = {v.path: v.mode for v in verdict.violations}
    assert modes == {"ci/lib": "observe", "vendor/lib": "enforce"}


def test_a_rename_into_an_observed_folder_needs_its_old_end(repo: Path) -> None:
    """Both ends of a rename are decided by their own categories."""
    gate = Gate(repo, OBSERVE_CI)
    base = base_of(repo)
    cand = change(repo, {"src/util.py": None, "ci/util.py": "x = 1\n"})
    verdict = gate.run(base, cand, paths=["docs/**"])
    assert verdict.decision is Decision.FENCED
    modes = {v.path: v.mode for v in verdict.violations if v.code is Code.RENAME_NOT_OWNED}
    assert modes == {"src/util.py": "enforce", "ci/util.py": "observe"}
