"""Seeded synthetic workloads, written with one `git fast-import` per base repository.

The base tree holds small text files in three levels of folders, `d<a>/s<b>/t<c>/`, plus a
root `CHANGELOG`. Candidate commits are built on the base in the same import stream, so a
run with the same seed and sizes produces byte-identical objects (dates are pinned) and
figures compare across releases. Candidate i owns five leaf folders that no other
candidate of its set owns, edits 1–45 files there, adds one, sometimes deletes one,
renames up to two (some renamed and edited) and flips up to two exec bits.
"""

from __future__ import annotations

import hashlib
import random
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from integrator.plumbing import git

COMMITTER = "bench <bench@localhost> 1700000000 +0000"
CHANGELOG = "CHANGELOG"
CHANGELOG_BASE = b"# Changelog\n\n"
FOLDERS_PER_CANDIDATE = 5
MAX_EDITS = 45


@dataclass(frozen=True)
class Layout:
    """How many leaf folders, and how many files in each, make a repository of `files`."""

    files: int
    leaves: int
    per_leaf: int

    def leaf(self, i: int) -> str:
        # The top level is d0–d9 at every size, so trees keep the same depth and fan-out
        # at the root; smaller repositories have fewer t-folders (and files) below it.
        return f"d{i % 10}/s{(i // 10) % 10}/t{i // 100}"

    def file(self, leaf: str, k: int) -> str:
        return f"{leaf}/f{k:03d}.txt"

    @property
    def max_candidates(self) -> int:
        return self.leaves // FOLDERS_PER_CANDIDATE


def layout_for(files: int) -> Layout:
    """1,000 files: 100 leaves of 10; 10,000: 1,000 of 10; 100,000: 1,000 of 100.

    Ten files per leaf is the least that holds every candidate shape (45 edits, two renames
    and a deletion across five folders); the 100,000-file tree is the spec's `d0-9/s0-9/t0-9`
    with 100 files in each leaf.
    """
    if files <= 1_000:
        return Layout(1_000, 100, 10)
    if files <= 10_000:
        return Layout(10_000, 1_000, 10)
    return Layout(100_000, 1_000, 100)


def content(path: str) -> bytes:
    """The base content of a file: a few lines, unique per path, so renames pair exactly."""
    return "".join(f"{path} line {j}\n" for j in range(4)).encode()


def blob_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass(frozen=True)
class Shape:
    """What one candidate does to its folders (paths relative to the repository root)."""

    index: int
    folders: tuple[str, ...]
    edits: tuple[str, ...]
    added: str
    deleted: str | None
    renames: tuple[tuple[str, str, bool], ...]  # (old, new, also edited)
    exec_flips: tuple[str, ...]
    changelog: bool

    @property
    def task_id(self) -> str:
        return f"bench-{self.index:04d}"

    @property
    def contract_paths(self) -> tuple[str, ...]:
        return tuple(f"{folder}/**" for folder in self.folders)

    @property
    def edit_count(self) -> int:
        return len(self.edits) + sum(1 for _, _, edited in self.renames if edited)


def shapes(layout: Layout, count: int, seed: str, *, changelog: bool) -> list[Shape]:
    """`count` candidate shapes on disjoint folders, drawn from `seed` alone.

    How many files a candidate edits, renames, deletes and flips is drawn before which
    files, so candidate i has the same shape in every layout (the scaling curve compares
    like with like); only the folders and file names differ.
    """
    if count > layout.max_candidates:
        raise ValueError(
            f"{layout.files} files hold at most {layout.max_candidates} disjoint candidates"
        )
    leaves = [layout.leaf(i) for i in range(layout.leaves)]
    random.Random(f"{seed}:folders").shuffle(leaves)
    out: list[Shape] = []
    for i in range(count):
        size = random.Random(f"{seed}:shape:{i}")
        deletes = size.random() < 0.3
        renamed_edited = [size.random() < 0.5 for _ in range(size.randint(0, 2))]
        edits = max(size.randint(1, MAX_EDITS) - sum(renamed_edited), 0)
        flips = size.randint(0, 2)
        pick = random.Random(f"{seed}:files:{layout.files}:{i}")
        folders = tuple(sorted(leaves[i * FOLDERS_PER_CANDIDATE : (i + 1) * FOLDERS_PER_CANDIDATE]))
        pool = [layout.file(f, k) for f in folders for k in range(layout.per_leaf)]
        pick.shuffle(pool)
        deleted = pool.pop() if deletes else None
        renames = tuple(
            (old, old.replace(".txt", f"-r{i:04d}.txt"), edited)
            for old, edited in ((pool.pop(), e) for e in renamed_edited)
        )
        out.append(
            Shape(
                index=i,
                folders=folders,
                edits=tuple(pool[:edits]),
                added=f"{folders[0]}/new-c{i:04d}.txt",
                deleted=deleted,
                renames=renames,
                exec_flips=tuple(pick.sample(pool, flips)),
                changelog=changelog,
            )
        )
    return out


def _data(body: bytes) -> bytes:
    return b"data %d\n" % len(body) + body + b"\n"


def _edited(path: str, shape: Shape) -> bytes:
    return content(path) + f"edited by candidate {shape.index}\n".encode()


def candidate_stream(shape: Shape, ref: str, mark: int, base_mark: int) -> bytes:
    """The fast-import commands of one candidate commit on the base."""
    lines = [
        f"commit {ref}\nmark :{mark}\ncommitter {COMMITTER}\n".encode(),
        _data(f"candidate {shape.index}: {shape.edit_count} edits\n".encode()),
        f"from :{base_mark}\n".encode(),
    ]
    if shape.deleted is not None:
        lines.append(f"D {shape.deleted}\n".encode())
    flips = set(shape.exec_flips)
    for old, new, edited in shape.renames:
        lines.append(f"R {old} {new}\n".encode())
        if edited:
            lines.append(f"M 100644 inline {new}\n".encode() + _data(_edited(old, shape)))
    for path in shape.edits:
        mode = "100755" if path in flips else "100644"
        lines.append(f"M {mode} inline {path}\n".encode() + _data(_edited(path, shape)))
    for path in shape.exec_flips:
        if path not in shape.edits:
            lines.append(f"M 100755 {blob_oid(content(path))} {path}\n".encode())
    lines.append(f"M 100644 inline {shape.added}\n".encode())
    lines.append(_data(f"added by candidate {shape.index}\n".encode()))
    if shape.changelog:
        entry = f"- candidate {shape.index}: {shape.edit_count} edits in {shape.folders[0]}\n"
        lines.append(f"M 100644 inline {CHANGELOG}\n".encode())
        lines.append(_data(CHANGELOG_BASE + entry.encode()))
    lines.append(b"\n")
    return b"".join(lines)


@dataclass(frozen=True)
class CandidateSet:
    """Candidates of one workload, in submission order, with their commit OIDs."""

    name: str
    shapes: tuple[Shape, ...]
    oids: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.shapes)


@dataclass(frozen=True)
class Workload:
    """A built base repository (bare) and the candidate sets imported into it."""

    path: Path
    layout: Layout
    base: str
    sets: dict[str, CandidateSet]

    def copy(self, dest: Path) -> Path:
        """An identical copy (objects, refs, config) for one contender."""
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(self.path, dest, symlinks=True)
        return dest


def build(dest: Path, files: int, seed: int, sets: dict[str, tuple[int, bool]]) -> Workload:
    """Create a bare repository at `dest`: the base on `main`, then every candidate set.

    `sets` maps a set name to (candidate count, whether candidates append to CHANGELOG);
    candidates of set `name` land under `refs/bench/<name>/<index>`.
    """
    layout = layout_for(files)
    if dest.exists():
        shutil.rmtree(dest)
    git.run_git(["init", "-q", "--bare", "-b", "main", str(dest)], cwd=dest.parent)
    marks = dest / "bench-marks"
    proc = subprocess.Popen(
        ["git", "fast-import", "--quiet", f"--export-marks={marks}"],
        cwd=dest,
        stdin=subprocess.PIPE,
        env=git.git_env(),
    )
    assert proc.stdin is not None
    head = [f"commit refs/heads/main\nmark :1\ncommitter {COMMITTER}\n".encode(), _data(b"base\n")]
    proc.stdin.write(b"".join(head))
    chunk: list[bytes] = [f"M 100644 inline {CHANGELOG}\n".encode(), _data(CHANGELOG_BASE)]
    for i in range(layout.leaves):
        leaf = layout.leaf(i)
        for k in range(layout.per_leaf):
            path = layout.file(leaf, k)
            chunk.append(f"M 100644 inline {path}\n".encode() + _data(content(path)))
        if len(chunk) > 4096:
            proc.stdin.write(b"".join(chunk))
            chunk = []
    chunk.append(b"\n")
    proc.stdin.write(b"".join(chunk))
    mark = 2
    planned: dict[str, tuple[list[Shape], list[int]]] = {}
    for name, (count, changelog) in sorted(sets.items()):
        # Every set draws from the same sequence: the shared-file set is the fleet plus a
        # CHANGELOG line, and the scaling set is the fleet's first candidates.
        drawn = shapes(layout, count, f"{seed}:candidates", changelog=changelog)
        planned[name] = (drawn, [])
        for shape in drawn:
            proc.stdin.write(
                candidate_stream(shape, f"refs/bench/{name}/{shape.index:04d}", mark, 1)
            )
            planned[name][1].append(mark)
            mark += 1
    proc.stdin.close()
    if proc.wait() != 0:
        raise RuntimeError(f"git fast-import failed building {dest}")
    by_mark = dict(line.split()[:2] for line in marks.read_text().splitlines())
    marks.unlink()
    built = {
        name: CandidateSet(name, tuple(drawn), tuple(by_mark[f":{m}"] for m in ms))
        for name, (drawn, ms) in planned.items()
    }
    return Workload(dest, layout, by_mark[":1"], built)
