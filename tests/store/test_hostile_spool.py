"""A submitter's folder is hostile: the daemon never writes into it, never follows its links,
and whatever it finds wrong there rejects that submission only, never the queue behind it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from integrator.errors import UsageError
from integrator.store.spool import REJECTION_FILE, SUBMISSION_FILE, VERDICT_FILE, submitted
from integrator.store.submitted import read_submitted
from tests.daemon_world import PYTHON, World, key_for, signed, submission
from tests.gitutil import git


def _publish(world: World, sid: str, doc: dict[str, object], plant: dict[str, object]) -> str:
    """Publish a submission folder built by hand, with hostile entries planted in it."""
    draft = world.spool.folder("tmp") / sid
    draft.mkdir()
    (draft / SUBMISSION_FILE).write_text(json.dumps(doc))
    for name, what in plant.items():
        target = draft / name
        if what == "dir":
            target.mkdir()
        elif what == "fifo":
            os.mkfifo(target)
        elif isinstance(what, Path):
            target.symlink_to(what)
        else:
            target.write_bytes(bytes(what))  # type: ignore[call-overload]
    draft.rename(world.spool.folder("new") / sid)
    return sid


def _sentinel(tmp_path: Path) -> Path:
    path = tmp_path / "sentinel"
    path.write_text("untouched\n")
    return path


@pytest.mark.parametrize("kind", ["symlink", "dir", "fifo"])
@pytest.mark.parametrize("name", [VERDICT_FILE, REJECTION_FILE, "review.json", "attempts.json"])
def test_planted_entries_in_the_submitters_folder_are_never_written(
    world: World, tmp_path: Path, name: str, kind: str
) -> None:
    """A link, folder or pipe named like a file the daemon writes is left alone: the
    verdict is filed in the daemon's own folder and the link's target is untouched."""
    sentinel = _sentinel(tmp_path)
    data, oid = world.candidate("t")
    planted: object = sentinel if kind == "symlink" else kind
    sid = _publish(
        world,
        "20200101T000000000000Z-0000000a",
        signed(
            world.repo, submission(json.loads(data), oid), "20200101T000000000000Z-0000000a"
        ).wire(),
        {name: planted},
    )
    assert world.once().proc.returncode == 0
    assert sentinel.read_text() == "untouched\n"
    assert world.spool.entries("accepted") == [sid]
    folder = world.spool.folder("accepted") / sid
    assert (folder / VERDICT_FILE).is_file() and not (folder / VERDICT_FILE).is_symlink()
    assert json.loads((folder / VERDICT_FILE).read_text())["decision"] == "ACCEPTED"
    inner = submitted(folder)
    assert inner != folder and (inner / name).is_symlink() == (kind == "symlink")


def test_a_canonical_ref_linked_from_the_folder_is_not_overwritten(world: World) -> None:
    """The audit's instance: `verdict.json` → the canonical repository's refs/heads/main."""
    main_ref = world.repo / ".git" / "refs" / "heads" / "main"
    before = git("rev-parse", "refs/heads/main", cwd=world.repo)
    data, oid = world.candidate("t")
    sid = "20200101T000000000000Z-0000000b"
    doc = signed(world.repo, submission(json.loads(data), oid), sid).wire()
    _publish(world, sid, doc, {VERDICT_FILE: main_ref})
    world.once()
    after = git("rev-parse", "refs/heads/main", cwd=world.repo)
    assert after != "" and git("cat-file", "-t", after, cwd=world.repo) == "commit"
    assert main_ref.read_text().strip() == after
    assert after != before  # it moved by landing the candidate, not by a verdict written over it


@pytest.mark.parametrize(
    "bundle",
    ["link-to-proc", "link-to-sentinel", "fifo", "dir", "huge"],
)
def test_a_bundle_that_is_not_a_plain_file_rejects_only_its_submission(
    world: World, tmp_path: Path, bundle: str
) -> None:
    """A bundle that is a link (even to /proc/self/mem), a pipe, a folder or over the limit
    is the submission's rejection; the good submission behind it still lands."""
    _, oid = world.candidate("bundled")
    doc = submission({"taskId": "bundled"}, oid).wire() | {"bundle": "candidate.bundle"}
    planted: object = {
        "link-to-proc": Path("/proc/self/mem"),
        "link-to-sentinel": _sentinel(tmp_path),
        "fifo": "fifo",
        "dir": "dir",
        "huge": b"# v2 git bundle\n" + b"0" * 1024,
    }[bundle]
    bad = _publish(world, "20200101T000000000000Z-0000000c", doc, {"candidate.bundle": planted})
    good = world.submit("good")
    config = world.config("[serve]\nbundle-max-bytes = 512\n")
    served = world.once("--config", str(config))
    assert served.proc.returncode == 0, served.log.read_text()
    assert world.spool.entries("rejected") == [bad]
    assert world.spool.entries("accepted") == [good]
    reason = json.loads((world.spool.folder("rejected") / bad / REJECTION_FILE).read_text())
    assert "bundle" in reason["reason"]


@pytest.mark.parametrize(
    "ref_name",
    ["refs/heads/No space left", "refs/heads/a\tb", "refs/heads/../x", "refs/x.lock", "main"],
)
def test_bundle_ref_names_are_validated_not_read_as_errors(
    world: World, tmp_path: Path, ref_name: str
) -> None:
    """A bundle whose ref names could pass for git's 'local trouble' messages (or are not
    ref names at all) is rejected; it is never retried, and nothing behind it waits."""
    _, oid = world.candidate("bundled")
    body = f"# v2 git bundle\n{oid} {ref_name}\n\nPACK".encode()
    doc = submission({"taskId": "bundled"}, oid).wire() | {"bundle": "candidate.bundle"}
    bad = _publish(world, "20200101T000000000000Z-0000000d", doc, {"candidate.bundle": body})
    good = world.submit("good")
    served = world.once()
    assert served.proc.returncode == 0, served.log.read_text()
    assert world.spool.entries("rejected") == [bad]
    assert world.spool.entries("accepted") == [good]
    assert world.spool.entries("work") == []


def test_a_bundle_whose_objects_fail_on_a_healthy_host_is_rejected(
    world: World, tmp_path: Path
) -> None:
    """A bundle that verifies but whose pack is corrupt is the submission's fault on a
    healthy host (probed), whatever git's message says."""
    clone = tmp_path / "clone"
    git("clone", "-q", str(world.repo), str(clone), cwd=tmp_path)
    (clone / "work" / "b").mkdir(parents=True)
    (clone / "work" / "b" / "f.txt").write_text("b\n")
    git("add", "-A", cwd=clone)
    git("commit", "-qm", "b", cwd=clone)
    head = git("rev-parse", "HEAD", cwd=clone)
    bundle = tmp_path / "b.bundle"
    base = git("rev-parse", "HEAD~1", cwd=clone)
    git("bundle", "create", str(bundle), "HEAD", f"^{base}", cwd=clone)
    data = bytearray(bundle.read_bytes())
    data[-30:-25] = b"XXXXX"  # inside the pack, after the header git verifies
    doc = submission({"taskId": "b"}, head).wire() | {"bundle": "candidate.bundle"}
    bad = _publish(world, "20200101T000000000000Z-0000000e", doc, {"candidate.bundle": bytes(data)})
    served = world.once()
    assert served.proc.returncode == 0, served.log.read_text()
    assert world.spool.entries("rejected") == [bad]


def test_a_submission_folder_swapped_for_a_link_is_rejected(world: World, tmp_path: Path) -> None:
    """If the claimed folder is a link (swapped in after the claim), it is not followed."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    data, oid = world.candidate("t")
    (elsewhere / SUBMISSION_FILE).write_text(json.dumps(submission(json.loads(data), oid).wire()))
    holder = world.spool.folder("work") / "20200101T000000000000Z-0000000f"
    holder.mkdir()
    (holder / "submission").symlink_to(elsewhere)
    served = world.once()
    assert served.proc.returncode == 0, served.log.read_text()
    assert world.spool.entries("rejected") == [holder.name]
    assert world.landed() == []


def test_reading_a_submitted_file_checks_size_before_reading(tmp_path: Path) -> None:
    """`read_submitted` refuses a file over the limit by its size, and links and folders."""
    (tmp_path / "big").write_bytes(b"x" * 100)
    (tmp_path / "link").symlink_to(tmp_path / "big")
    (tmp_path / "sub").mkdir()
    assert read_submitted(tmp_path, "big", 100) == b"x" * 100
    for name, why in (
        ("big", "more than the limit"),
        ("link", "cannot be read"),
        ("sub", "not a regular"),
    ):
        with pytest.raises(UsageError, match=why):
            read_submitted(tmp_path, name, 99 if name == "big" else 100)


def test_review_of_a_folder_with_planted_entries_writes_only_its_own(
    world: World, tmp_path: Path
) -> None:
    """Rejecting a held candidate whose folder holds a `review.json` link writes the review
    into the daemon's folder; the link's target is untouched."""
    sentinel = _sentinel(tmp_path)
    data, oid = world.candidate("t", {"elsewhere/x.txt": "x\n"})  # outside work/t/**: fenced
    sid = _publish(
        world,
        "20200101T000000000000Z-00000010",
        signed(
            world.repo, submission(json.loads(data), oid), "20200101T000000000000Z-00000010"
        ).wire(),
        {"review.json": sentinel},
    )
    world.once()
    assert world.spool.entries("fenced") == [sid]
    proc = subprocess.run(
        [PYTHON, "-m", "integrator", "review", "reject", sid, "--spool", str(world.spool.root),
         "--reason", "out of scope"],
        capture_output=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    assert sentinel.read_text() == "untouched\n"
    folder = world.spool.folder("archived") / sid
    assert json.loads((folder / "review.json").read_text())["action"] == "reject"


def _candidate_with_raw_name(world: World, task: str, name: bytes) -> tuple[bytes, str]:
    """A candidate on the task's base adding a file whose name holds bytes that are not UTF-8."""
    data, _ = world.candidate(task)
    base = json.loads(data)["baseCommit"]
    env = {**os.environ, "GIT_INDEX_FILE": str(world.tmp / f"index-{task}")}

    def run(*args: str | bytes, stdin: bytes | None = None) -> str:
        proc = subprocess.run(
            ["git", *args], cwd=world.repo, env=env, input=stdin, capture_output=True, check=True
        )
        return proc.stdout.decode().strip()

    run("read-tree", base)
    blob = run("hash-object", "-w", "--stdin", stdin=b"raw\n")
    run("update-index", "--add", "--cacheinfo", f"100644,{blob},".encode() + name)
    tree = run("write-tree")
    return data, run("commit-tree", tree, "-p", base, "-m", "raw name")


def test_a_name_that_is_not_utf8_is_decided_and_filed(world: World) -> None:
    """A candidate adding a non-UTF-8 name is FENCED UNSAFE_PATH, held and filed with a
    verdict that is valid UTF-8 JSON naming the path in git's quoted form; the next lands."""
    data, oid = _candidate_with_raw_name(world, "raw", b"work/raw/\xff\xfe.txt")
    sid = world.spool.submit(
        submission(json.loads(data), oid), key=key_for(world.repo, json.loads(data))
    )
    good = world.submit("good")
    served = world.once()
    assert served.proc.returncode == 0, served.log.read_text()
    assert world.spool.entries("fenced") == [sid]
    assert world.spool.entries("accepted") == [good]
    raw = (world.spool.folder("fenced") / sid / VERDICT_FILE).read_bytes()
    verdict = json.loads(raw.decode("utf-8"))
    paths = {v["path"] for v in verdict["violations"] if v["code"] == "UNSAFE_PATH"}
    assert paths == {'"work/raw/\\377\\376.txt"'}
    assert git("for-each-ref", "--format=%(refname)", "refs/integrator/held/", cwd=world.repo)
