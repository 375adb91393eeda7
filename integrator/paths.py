"""Repository-relative paths and the allow/deny glob matcher.

A path is POSIX, relative to the repository root, in Unicode NFC. Globs use gitignore
syntax (pathspec): a pattern with a slash is anchored at the root, one without matches at
any depth, `dir/**` matches everything below `dir`. Allow and deny are two separate specs
and deny wins; `!` negation is refused so a line reads the same to people and tools.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable
from typing import NamedTuple

from integrator.caches import Shared

_CONTROL = re.compile("[\x00-\x1f\x7f]")
_UNDECODABLE = re.compile("[\udc80-\udcff]")  # bytes that were not UTF-8 (surrogateescape)


# Code points HFS+ ignores when it compares names (git's is_hfs_dotgit skips the same).
HFS_IGNORABLE = re.compile("[\u200c-\u200f\u202a-\u202e\u206a-\u206f\ufeff]")
NAME_MAX = 255  # bytes in one path component on common filesystems
PATH_MAX = 4096  # bytes in a whole path


def is_dotgit(component: str) -> bool:
    """Whether some checkout would take `component` for `.git` (git's is_hfs_dotgit and
    is_ntfs_dotgit): any case; HFS+ ignorable code points inside; on NTFS trailing spaces
    or dots, an alternate data stream (`.git::$INDEX_ALLOCATION`) or the short name `git~1`.
    """
    if HFS_IGNORABLE.sub("", component).casefold() == ".git":
        return True
    name = component.casefold()
    for short in (".git", "git~1"):
        if name.startswith(short) and not name[len(short) :].split(":", 1)[0].strip(" ."):
            return True
    return False


def unsafe_reason(path: str) -> str | None:  # noqa: PLR0911 — one return per unsafe shape, naming it
    """Why `path` is not a safe repository-relative path, or None when it is."""
    if not path:
        return "empty path"
    if "\x00" in path:
        return "contains NUL"
    if _CONTROL.search(path):
        return "contains a control character"
    if _UNDECODABLE.search(path):
        return "is not valid UTF-8"
    if path.startswith("/"):
        return "is absolute"
    if "\\" in path:
        return "contains a backslash"
    for part in path.split("/"):
        if part == "":
            return "has an empty component"
        if part in (".", ".."):
            return f"has a {part!r} component"
        if is_dotgit(part):
            return f"has a .git component ({part!r} is .git to some checkout)"
        if len(part.encode("utf-8", "surrogatepass")) > NAME_MAX:
            return f"has a component longer than {NAME_MAX} bytes"
    if len(path.encode("utf-8", "surrogatepass")) > PATH_MAX:
        return f"is longer than {PATH_MAX} bytes"
    return None


_C_ESCAPES = {
    "\a": "\\a", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\v": "\\v", "\f": "\\f",
    "\r": "\\r", '"': '\\"', "\\": "\\\\",
}  # fmt: skip


def quote_path(path: str) -> str:
    """A repository path as verdicts and every machine format write it.

    git allows any bytes in a name; JSON, XML and SARIF carry only Unicode text. A path
    that is valid UTF-8 (and does not begin with `"`) is written as it is. Any other is
    written the way git quotes names: in double quotes, each byte that is not part of valid
    UTF-8 as a three-digit octal escape (`\\377`), `"` `\\` and control characters C-escaped.
    So a written path that begins with `"` is always a quoted one, and the form is lossless
    (`unquote_path` restores the bytes).
    """
    if not _UNDECODABLE.search(path) and not path.startswith('"'):
        return path
    out = ['"']
    for ch in path:
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:
            out.append(f"\\{code - 0xDC00:03o}")
        elif ch in _C_ESCAPES:
            out.append(_C_ESCAPES[ch])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\{code:03o}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


_UNQUOTE = re.compile(r'\\([0-7]{3}|[abtnvfr"\\])')
_UNESCAPES = {v[1]: k for k, v in _C_ESCAPES.items()}


def unquote_path(written: str) -> str:
    """The path (surrogate-escaped where its bytes are not UTF-8) `quote_path` wrote."""
    if not (len(written) >= 2 and written.startswith('"') and written.endswith('"')):
        return written

    def one(match: re.Match[str]) -> str:
        token = match.group(1)
        if len(token) == 1:
            return _UNESCAPES[token]
        byte = int(token, 8)
        return chr(0xDC00 + byte) if byte >= 0x80 else chr(byte)

    return _UNQUOTE.sub(one, written[1:-1])


def escape_undecodable(text: str) -> str:
    """Free text with each byte that was not UTF-8 written as `\\ooo` (never fails to encode)."""
    if not _UNDECODABLE.search(text):
        return text
    return _UNDECODABLE.sub(lambda m: f"\\{ord(m.group(0)) - 0xDC00:03o}", text)


def normalize(path: str) -> str:
    """The NFC form of a repository-relative path (validation is `unsafe_reason`)."""
    return unicodedata.normalize("NFC", path)


# Answers of `glob_problem` kept, counted by the characters of their patterns.
CHECKED_CHARS = 1_000_000
_CHECKED: Shared[str, tuple[str | None, int]] = Shared(CHECKED_CHARS, lambda v: v[1])


def glob_problem(pattern: str) -> str | None:
    """Why `pattern` is not acceptable as a contract glob, or None (kept: a flood of
    contracts repeats the same globs)."""
    found = _CHECKED.get(pattern)
    if found is None:
        found = _CHECKED.put(pattern, (_glob_problem(pattern), len(pattern) + 1))
    return found[0]


def _glob_problem(pattern: str) -> str | None:  # noqa: PLR0911 — one return per refused pattern shape, naming it
    if not pattern or not pattern.strip():
        return "empty pattern"
    if pattern != pattern.strip():
        return "has leading or trailing whitespace (gitignore strips it; write it without)"
    if not pattern.strip("/"):
        return "names no path ('/' alone matches nothing; use '**' for everything)"
    if "[:" in pattern:
        # git knows [[:alpha:]] and friends; the matcher here would read them as plain
        # sets and answer otherwise than git: refuse rather than guess.
        return "uses a POSIX character class ('[:…:]'); spell the characters out"
    if pattern.startswith("!"):
        return "negation ('!') is not allowed in contracts"
    if pattern.startswith("#"):
        return "a pattern may not start with '#'"
    if any(ord(ch) < 0x20 for ch in pattern):
        return "contains a control character"
    body = pattern.lstrip("/")
    for part in body.split("/"):
        if part in (".", ".."):
            return f"has a {part!r} component"
        if is_dotgit(part):
            return "names a .git component"
    if not _WILD & set(pattern) or _as_prefix(pattern) is not None:
        return None  # a literal or `dir/**`: nothing pathspec could refuse (a test pins this)
    import pathspec  # loaded only for wildcards: the write guard starts faster without it

    try:
        pathspec.PathSpec.from_lines("gitignore", [pattern])
    except Exception as exc:  # pathspec raises several types for bad patterns
        return f"not a valid gitignore pattern: {exc}"
    return None


class Match(NamedTuple):
    """The outcome of matching one path: allowed or not, and the lines that decided it."""

    allowed: bool
    denied_by: str | None = None
    allowed_by: str | None = None

    @property
    def reason(self) -> str:
        if self.denied_by is not None:
            return f"denied by {self.denied_by!r}"
        if self.allowed_by is not None:
            return f"allowed by {self.allowed_by!r}"
        return "matched by no allowed pattern"


class PathMatcher:
    """Allow and deny glob sets; deny wins.

    A path is allowed when an allow line matches the path itself — `*.md` allows `a.md`,
    not `a.md/run.sh`; `src/config` allows that one path — or explicitly names a folder's
    contents (`src/**`, `src/`): the narrow reading. It is denied when a deny line matches
    it or any folder above it (git's own reading of an ignore file: the broad one).

    Each set is compiled into one regular expression with a named group per pattern (the
    gitignore translations pathspec produces), so one match answers for the whole set and
    names the line that decided it. With negation refused, "some pattern matches" is
    exactly gitignore's answer for the set.
    """

    allow: tuple[str, ...]
    deny: tuple[str, ...]
    _allow: _Compiled
    _deny: _Compiled

    def __init__(self, allow: tuple[str, ...], deny: tuple[str, ...] = ()) -> None:
        # Immutable (a plain class, not a dataclass: the write guard imports this module
        # on every hook call, and `dataclasses` brings `inspect` with it).
        for name, value in (
            ("allow", allow),
            ("deny", deny),
            ("_allow", _compile(allow, narrow=True)),
            ("_deny", _compile(deny)),
        ):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"PathMatcher is immutable: cannot set {name}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"PathMatcher is immutable: cannot delete {name}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PathMatcher):
            return NotImplemented
        return (self.allow, self.deny) == (other.allow, other.deny)

    def __hash__(self) -> int:
        return hash((self.allow, self.deny))

    def __repr__(self) -> str:
        return f"PathMatcher(allow={self.allow!r}, deny={self.deny!r})"

    @classmethod
    def of(cls, allow: Iterable[str], deny: Iterable[str] = ()) -> PathMatcher:
        return cls(tuple(allow), tuple(deny))

    def match(self, path: str) -> Match:
        """Match one path (NFC); `denied_by`/`allowed_by` name the deciding pattern.

        git matches globs byte by byte (`?` is one byte of `é`'s two). For a non-ASCII
        path both readings are taken, each on the safe side: denied when either denies,
        allowed only when both allow.
        """
        if path.isascii():
            return self._match(path, self._deny, self._allow)
        path = normalize(path)
        by_char = self._match(path, self._deny, self._allow)
        by_byte = self._match(_as_bytes(path), self._deny_bytes, self._allow_bytes)
        return by_byte if by_char.allowed and not by_byte.allowed else by_char

    @functools.cached_property
    def _deny_bytes(self) -> _Compiled:
        return _compile(tuple(_as_bytes(p) for p in self.deny))

    @functools.cached_property
    def _allow_bytes(self) -> _Compiled:
        return _compile(tuple(_as_bytes(p) for p in self.allow), narrow=True)

    def _match(self, path: str, deny: _Compiled, allow: _Compiled) -> Match:
        denied = deny.first(path)
        if denied is None and deny.patterns:
            # gitignore semantics: a line that matches a folder covers everything in it
            # (`secret/*` denies `secret/sub/key`). Deny is where being broad is safe.
            parts = path.split("/")
            for depth in range(1, len(parts)):
                denied = deny.first("/".join(parts[:depth]) + "/")
                if denied is not None:
                    break
        if denied is not None:
            return Match(False, denied_by=denied)
        allowed = allow.first(path)
        if allowed is not None:
            return Match(True, allowed_by=allowed)
        return Match(False)

    def covers(self, path: str) -> bool:
        return self.match(path).allowed


def _as_bytes(text: str) -> str:
    """`text`'s UTF-8 bytes, one character each: matching it is git's byte-wise match."""
    return text.encode("utf-8", "surrogateescape").decode("latin-1")


class _Compiled(NamedTuple):
    """One glob set: folder prefixes answered by string tests, the rest by one regex."""

    # (pattern, "dir/", whether "dir" itself matches) for `dir/**` and anchored literals
    prefixes: tuple[tuple[str, str, bool], ...]
    regex: re.Pattern[str] | None
    patterns: tuple[str, ...]
    # The same prefixes as one tuple for str.startswith, and the folders matched themselves:
    # a miss (the common answer) costs two C-level tests instead of a loop.
    starts: tuple[str, ...]
    exact: frozenset[str]
    # Narrow sets only: anchored literals, which name one path (name → pattern).
    literals: dict[str, str]

    def first(self, path: str) -> str | None:
        if (self.starts and path.startswith(self.starts)) or path in self.exact:
            for pattern, prefix, itself in self.prefixes:
                if path.startswith(prefix) or (itself and path == prefix[:-1]):
                    return pattern
        literal = self.literals.get(path)
        if literal is not None:
            return literal
        if self.regex is None:
            return None
        found = self.regex.search(path)  # pathspec searches: not every regex starts with ^
        if found is None or found.lastgroup is None:
            return None
        return self.patterns[int(found.lastgroup[1:])]


_WILD = frozenset("*?[\\!")


def _as_prefix(pattern: str) -> tuple[str, bool] | None:
    """`a/b/**`, `a/b/` → (`a/b/`, False); `a/b`, `/a/b` → (`a/b/`, True); else None.

    In gitignore terms `a/b/**` and `a/b/` match everything below the folder `a/b`, and an
    anchored literal `a/b` also matches `a/b` itself: string tests answer these exactly and
    far faster than a regex. Unanchored patterns (no slash but a trailing one) match at any
    depth; `src/**` is anchored (its slash is not at the end), `src/` is not.
    """
    itself = not (pattern.endswith("/**") or pattern.endswith("/"))
    body = pattern[:-3] if pattern.endswith("/**") else pattern.rstrip("/")
    anchored = pattern.startswith("/") or "/" in pattern.rstrip("/")
    body = body.lstrip("/")
    if not body or not anchored or _WILD & set(body):
        return None
    return body + "/", itself


# pathspec ends a pattern that names a file *or a folder* with this: "here, or a folder
# above the path". A narrow set ends it with "$" instead: the path itself must match.
_FOLDER_OR_SELF = "(?:/|$)"


# Compiled glob sets kept, counted by their patterns (~220 bytes each compiled): a contract
# holds one glob or, under raised limits, thousands, so a count of sets bounds nothing.
COMPILED_PATTERNS = 50_000
_COMPILED: Shared[tuple[tuple[str, ...], bool], _Compiled] = Shared(
    COMPILED_PATTERNS, lambda c: len(c.patterns) + 1
)


def _compile(patterns: tuple[str, ...], narrow: bool = False) -> _Compiled:
    """A glob set; `narrow`: a line must match the path itself, unless it names a folder's
    contents explicitly (`dir/**`, `dir/`). Otherwise git's ignore reading: a line that
    matches a folder matches everything in it. Kept (`_COMPILED`) while it is used."""
    found = _COMPILED.get((patterns, narrow))
    if found is None:
        found = _COMPILED.put((patterns, narrow), _compiled(patterns, narrow))
    return found


def _compiled(patterns: tuple[str, ...], narrow: bool) -> _Compiled:
    unique = tuple(dict.fromkeys(patterns))
    prefixes = []
    literals: dict[str, str] = {}
    parts = []
    for index, pattern in enumerate(unique):
        simple = _as_prefix(pattern)
        if simple is not None:
            prefix, itself = simple
            if narrow and itself:
                literals.setdefault(prefix[:-1], pattern)  # `a/b` names the path a/b
            else:
                prefixes.append((pattern, prefix, itself))
            continue
        import pathspec  # only wildcard patterns need its translation

        for compiled in pathspec.PathSpec.from_lines("gitignore", [pattern]).patterns:
            regex = getattr(compiled, "regex", None)
            if regex is None or not getattr(compiled, "include", True):
                continue
            text = regex.pattern
            if narrow and text.endswith(_FOLDER_OR_SELF):
                text = text[: -len(_FOLDER_OR_SELF)] + "$"
            parts.append(f"(?P<p{index}>{text})")
    regex_all = re.compile("|".join(parts)) if parts else None
    starts = tuple(prefix for _, prefix, _ in prefixes)
    exact = frozenset(prefix[:-1] for _, prefix, itself in prefixes if itself)
    return _Compiled(tuple(prefixes), regex_all, unique, starts, exact, literals)


def literal_prefix(pattern: str) -> str:
    """The folder part of a glob before its first wildcard, without a trailing slash.

    `packages/billing/**` → `packages/billing`; `src/*.py` → `src`; `*.env` → ``
    (unanchored patterns match at any depth, so their prefix is the root).
    """
    body = pattern.strip()
    anchored = "/" in body.rstrip("/")
    body = body.lstrip("/")
    if not anchored:
        return ""
    parts: list[str] = []
    for part in body.rstrip("/").split("/"):
        if any(ch in part for ch in "*?[\\"):
            break
        parts.append(part)
    else:
        # No wildcard at all: the pattern names a file or folder itself.
        return "/".join(parts)
    return "/".join(parts)


def is_literal(pattern: str) -> bool:
    """True when the pattern has no wildcard and is anchored (names one path exactly)."""
    body = pattern.strip()
    return "/" in body.rstrip("/") and not any(ch in body for ch in "*?[\\")
