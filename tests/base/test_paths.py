"""Repository paths and the allow/deny matcher."""

from __future__ import annotations

import re
import unicodedata

import pathspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from integrator.fence.overlap import find_overlaps, patterns_overlap
from integrator.paths import (
    PathMatcher,
    glob_problem,
    is_dotgit,
    literal_prefix,
    unsafe_reason,
)


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("/etc/passwd", "absolute"),
        ("a/../b", "'..'"),
        ("a//b", "empty"),
        (".git/config", ".git"),
        ("sub/.GIT/hooks/x", ".git"),
        ("a\x00b", "NUL"),
        ("a\nb", "control"),
        ("", "empty"),
        ("a\\b", "backslash"),
    ],
)
def test_unsafe_paths(path: str, why: str) -> None:
    """Absolute, '..', empty components, .git (any case), NUL and control characters are unsafe."""
    reason = unsafe_reason(path)
    assert reason is not None
    assert why in reason


def test_safe_path() -> None:
    """An ordinary relative path is safe."""
    assert unsafe_reason("src/app/main.py") is None
    assert unsafe_reason(".github/workflows/ci.yml") is None


def test_deny_wins_and_names_the_pattern() -> None:
    """A path in both sets is denied, and the deciding deny pattern is named."""
    matcher = PathMatcher.of(["src/**"], ["src/secret/**"])
    match = matcher.match("src/secret/key.pem")
    assert not match.allowed
    assert match.denied_by == "src/secret/**"
    ok = matcher.match("src/app.py")
    assert ok.allowed
    assert ok.allowed_by == "src/**"


def test_gitignore_semantics() -> None:
    """Slash-anchored patterns match at the root; slash-less ones at any depth."""
    matcher = PathMatcher.of(["docs/**", "*.md"])
    assert matcher.covers("docs/a/b.txt")
    assert matcher.covers("deep/down/README.md")
    assert not matcher.covers("src/docs/a.txt")


def test_matching_is_on_nfc() -> None:
    """An NFD spelling matches an NFC pattern."""
    matcher = PathMatcher.of([unicodedata.normalize("NFC", "café/**")])
    assert matcher.covers(unicodedata.normalize("NFD", "café/menu.txt"))


@pytest.mark.parametrize(
    ("pattern", "prefix"),
    [
        ("packages/billing/**", "packages/billing"),
        ("src/*.py", "src"),
        ("*.env", ""),
        ("/top/x", "top/x"),
        ("**/lock", ""),
        ("a/b?/c", "a"),
    ],
)
def test_literal_prefix(pattern: str, prefix: str) -> None:
    """The literal prefix is the folder part before the first wildcard (root if unanchored)."""
    assert literal_prefix(pattern) == prefix


@pytest.mark.parametrize(
    ("a", "b", "overlap"),
    [
        ("billing/**", "billing/tax.py", True),
        ("billing/**", "auth/**", False),
        ("a/b/**", "a/bc/**", False),
        ("src/a*", "src/b*", True),  # conservative: same prefix
        ("*.md", "docs/**", True),  # unanchored overlaps everything
        ("Docs/**", "docs/x.md", True),  # case-insensitive filesystems collide
    ],
)
def test_overlap_rule(a: str, b: str, overlap: bool) -> None:
    """Patterns overlap when one's literal prefix contains the other's (component-wise)."""
    assert patterns_overlap(a, b) is overlap
    assert patterns_overlap(b, a) is overlap


def test_resource_overlap_skips_shared() -> None:
    """Claims on the same resource overlap unless the policy shares it."""
    found = find_overlaps(
        [], ["api:X", "lockfile:a"], [], ["api:X", "lockfile:a"], shared_resources=["lockfile:a"]
    )
    assert [(o.kind, o.mine) for o in found] == [("resource", "api:X")]


_COMPONENTS = st.sampled_from(["a", "b", "c", "*", "**", "x?", "[ab]", "a.md"])
_NAMES = st.sampled_from(["a", "b", "c", "xa", "x1", "a.md", "ab"])


@st.composite
def _pattern(draw: st.DrawFn) -> str:
    parts = draw(st.lists(_COMPONENTS, min_size=1, max_size=4))
    body = "/".join(parts)
    lead = draw(st.sampled_from(["", "/"]))
    tail = draw(st.sampled_from(["", "/", "/**"]))
    return lead + body + tail


@settings(max_examples=400, deadline=None)
@given(
    st.lists(_pattern(), min_size=1, max_size=3),
    st.lists(st.lists(_NAMES, min_size=1, max_size=4).map("/".join), min_size=1, max_size=6),
)
def test_matcher_agrees_with_pathspec(patterns: list[str], paths: list[str]) -> None:
    """Allow lines answer as pathspec's gitignore translations read narrowly: a line that
    names a file or a folder must match the path itself (its "or a folder above" ending
    becomes "$"); lines naming a folder's contents (`dir/`, `dir/**`) cover them. The
    matcher's string fast paths must agree with those regular expressions."""
    regexes = []
    for pattern in patterns:
        for compiled in pathspec.PathSpec.from_lines("gitignore", [pattern]).patterns:
            assert compiled.regex is not None
            text = compiled.regex.pattern
            if text.endswith("(?:/|$)"):
                text = text[: -len("(?:/|$)")] + "$"
            regexes.append(re.compile(text))
    matcher = PathMatcher.of(patterns)
    for path in paths:
        expected = any(regex.search(path) for regex in regexes)
        assert matcher.covers(path) == expected, (patterns, path)


def test_allow_lines_match_the_path_itself() -> None:
    """`*.md` allows `a.md`, not `a.md/run.sh`; `CHANGELOG` is that file, not a folder of
    that name anywhere; `src/config` is one path; `docs/` and `docs/**` are contents."""
    matcher = PathMatcher.of(["*.md", "CHANGELOG", "src/config", "docs/", "lib/**"])
    for path in ("a.md", "x/y.md", "CHANGELOG", "pkg/CHANGELOG", "src/config", "docs/a/b",
                 "lib/x"):  # fmt: skip
        assert matcher.covers(path), path
    for path in ("a.md/run.sh", "billing/CHANGELOG/__init__.py", "CHANGELOG/run.sh",
                 "src/config/x.py", "docs", "lib"):  # fmt: skip
        assert not matcher.covers(path), path


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=12))
def test_character_rules_match_a_plain_scan(name: str) -> None:
    """Control characters (C0 and DEL) and undecodable bytes are found wherever they are."""
    path = f"src/{name}x"
    control = any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in path)
    undecodable = any("\udc80" <= ch <= "\udcff" for ch in path)
    reason = unsafe_reason(path) or ""
    if "\x00" in path:
        assert reason == "contains NUL"
    elif control:
        assert reason == "contains a control character"
    elif undecodable:
        assert reason == "is not valid UTF-8"
    else:
        assert reason not in ("contains NUL", "contains a control character", "is not valid UTF-8")


@pytest.mark.parametrize(
    "name",
    [".git", ".GIT", ".git ", ".git.", ".git. . ", ".git::$INDEX_ALLOCATION", "git~1", "GIT~1",
     ".g\u200cit", "\ufeff.git", ".gi\u200dt"],
)  # fmt: skip
def test_names_a_checkout_reads_as_dotgit(name: str) -> None:
    """NTFS and HFS+ spellings of .git are refused like .git itself (git's own rules)."""
    assert is_dotgit(name)
    reason = unsafe_reason(f"src/{name}/config")
    assert reason is not None and ".git component" in reason


@pytest.mark.parametrize("name", [".gitignore", ".github", "git", ".git-blame", "xgit~1", ".gitx"])
def test_names_like_dotgit_but_not(name: str) -> None:
    assert not is_dotgit(name)
    assert unsafe_reason(f"src/{name}") is None


def test_overlong_paths_are_unsafe() -> None:
    """A component past 255 bytes or a path past 4096 cannot be checked out everywhere."""
    assert "longer than 255" in (unsafe_reason("src/" + "a" * 256) or "")
    assert unsafe_reason("src/" + "a" * 255) is None
    assert "longer than 4096" in (unsafe_reason("/".join(["d" * 200] * 21)) or "")


@pytest.mark.parametrize(
    ("pattern", "why"),
    [("/", "names no path"), ("//", "names no path"), ("src/secret ", "whitespace"),
     (" src/**", "whitespace"), (".git./**", ".git"), ("src/git~1/*", ".git"),
     ("src/*.[[:alpha:]]*", "POSIX character class")],
)  # fmt: skip
def test_globs_refused(pattern: str, why: str) -> None:
    problem = glob_problem(pattern)
    assert problem is not None and why in problem


@settings(max_examples=400, deadline=None)
@given(
    st.lists(_pattern(), min_size=1, max_size=3),
    st.lists(st.lists(_NAMES, min_size=1, max_size=4).map("/".join), min_size=1, max_size=6),
)
def test_deny_covers_what_git_would_ignore(patterns: list[str], paths: list[str]) -> None:
    """A deny set refuses a path when git's ignore rules would: the path or a folder above
    it matches (pathspec on the path and on each folder, written with a trailing slash)."""
    spec = pathspec.PathSpec.from_lines("gitignore", patterns)
    matcher = PathMatcher.of(["**"], patterns)
    for path in paths:
        parts = path.split("/")
        folders = ["/".join(parts[:i]) + "/" for i in range(1, len(parts))]
        ignored = spec.match_file(path) or any(spec.match_file(f) for f in folders)
        assert matcher.covers(path) is not ignored, (patterns, path)


def test_deny_of_a_folders_children_covers_their_contents() -> None:
    """`secret/*` denies `secret/sub/key` as git would ignore it (the audit's case)."""
    matcher = PathMatcher.of(["src/**"], ["src/secret/*"])
    assert not matcher.covers("src/secret/sub/key")
    assert matcher.match("src/secret/sub/key").denied_by == "src/secret/*"
    assert matcher.covers("src/secrets.txt")


def test_non_ascii_names_are_matched_both_ways_on_the_safe_side() -> None:
    """git matches byte by byte: `?` is one byte of the two in `é`. A deny line that
    either reading matches denies; an allow line must match in both."""
    deny = PathMatcher.of(["src/**"], ["src/??"])
    assert not deny.covers("src/é") and deny.match("src/é").denied_by == "src/??"
    assert not PathMatcher.of(["?/x"]).covers("é/x")  # git: '?' is not both bytes
    assert PathMatcher.of(["é/*"]).covers("é/x")
    assert PathMatcher.of(["*.md"]).covers("dé.md")
    assert PathMatcher.of(["src/**"]).covers("src/é/ü.txt")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_characters="*?[\\!", codec="utf-8"), max_size=40))
def test_patterns_without_wildcards_are_never_refused_by_pathspec(pattern: str) -> None:
    """glob_problem skips pathspec for a pattern with no wildcard character, or a folder's
    contents (`dir/**`): pathspec accepts every such pattern, so the shortcut answers as the
    full check would."""
    for form in (pattern, f"{pattern}/**", f"/{pattern}/**"):
        pathspec.PathSpec.from_lines("gitignore", [form])  # raises if the shortcut were wrong
