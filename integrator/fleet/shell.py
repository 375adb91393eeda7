"""The patches a shell command hands to `apply_patch`.

Codex runs `apply_patch` from a shell too: it intercepts `apply_patch <<'EOF' … EOF` and
`cd DIR && apply_patch <<…` itself, and puts an `apply_patch` program on the PATH of the
shells it starts, so any command that runs that name may apply a patch. The guard therefore
reads a shell command that mentions apply_patch with a small, conservative lexer: every
place it runs must be found, with its patch text (heredoc, here-string or the single
argument) and the folder it runs in (`cd` prefixes followed). A command that mentions the
name anywhere the lexer cannot account for — an argument of another program, a heredoc fed
to one, a substitution, a compound command, a patch on a pipe or in a file — raises
ShellError, and the guard denies it. A command that does not mention it is not mediated
(docs/fleet.md: the pre-commit hook and the gate cover what a shell writes).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from integrator.fleet.patches import is_home_path, lexical, parse_patch, readings, resolve

APPLY_PATCH_NAMES = ("apply_patch", "applypatch")  # the names Codex's binary answers to

_NAMED = re.compile(r"(?<![\w.-])(?:apply_?patch)(?![\w.-])")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_RESERVED = frozenset(
    {
        "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case",
        "esac", "function", "select", "{", "}", "!", "[[", "]]", "time", "coproc",
    }
)  # fmt: skip
_METACHARS = " \t\n;&|<>()"


class ShellError(ValueError):
    """The command runs (or may run) apply_patch in a way the guard cannot follow."""


def mentions_apply_patch(script: str) -> bool:
    """Whether a shell command may run apply_patch (quotes and backslashes ignored)."""
    flat = re.sub(r"[\"'\\]", "", script)
    return any(name in flat for name in APPLY_PATCH_NAMES)


class _Word:
    """One shell word as the lexer builds it."""

    __slots__ = ("expands", "quoted", "text")

    def __init__(self) -> None:
        self.text = ""
        self.quoted = False
        self.expands = False  # $, a glob or a leading ~: its value is not the text


class _Command:
    """One simple command as the lexer builds it."""

    __slots__ = ("after", "opaque_stdin", "stdin", "words")

    def __init__(self) -> None:
        self.words: list[_Word] = []
        self.stdin: list[str] = []  # texts fed on stdin: heredoc bodies, here-strings
        self.opaque_stdin = False  # `< file`: a patch the guard cannot read
        self.after = ";"  # the operator that ends it


class Invocation(NamedTuple):
    """One apply_patch run: the patch texts it may apply and the folder it runs in
    (None: a `cd` the guard cannot follow came first)."""

    patches: tuple[str, ...]
    cwd: Path | None


class _Lexer:
    def __init__(self, script: str) -> None:
        self.s = script
        self.i = 0
        self.commands: list[_Command] = []
        self.current = _Command()
        self.heredocs: list[tuple[_Command, str, bool, bool]] = []

    def peek(self, n: int = 0) -> str:
        j = self.i + n
        return self.s[j] if j < len(self.s) else ""

    def next_is(self, chars: str, n: int = 0) -> bool:
        ch = self.peek(n)
        return ch != "" and ch in chars

    def word(self) -> _Word:
        out = _Word()
        while self.i < len(self.s) and self.s[self.i] not in _METACHARS:
            ch = self.s[self.i]
            if ch == "\\":
                nxt = self.peek(1)
                self.i += 2
                if nxt != "\n":
                    out.text += nxt
                    out.quoted = True
            elif ch == "'":
                end = self.s.find("'", self.i + 1)
                if end < 0:
                    raise ShellError("an unterminated single quote")
                out.text += self.s[self.i + 1 : end]
                out.quoted = True
                self.i = end + 1
            elif ch == '"':
                self.double_quoted(out)
            elif ch == "`" or (ch == "$" and self.next_is("('\"{", 1)):
                raise ShellError("a command substitution or expansion the guard cannot follow")
            else:
                if ch == "$" or ch in "*?[" or (ch == "~" and not out.text):
                    out.expands = True
                out.text += ch
                self.i += 1
        return out

    def double_quoted(self, out: _Word) -> None:
        self.i += 1
        out.quoted = True
        while True:
            if self.i >= len(self.s):
                raise ShellError("an unterminated double quote")
            ch = self.s[self.i]
            if ch == '"':
                self.i += 1
                return
            if ch == "\\" and self.next_is('$`"\\\n', 1):
                if self.peek(1) != "\n":
                    out.text += self.peek(1)
                self.i += 2
                continue
            if ch in "$`":
                out.expands = True
                if ch == "`" or self.next_is("({", 1):
                    raise ShellError("a command substitution the guard cannot follow")
            out.text += ch
            self.i += 1

    def end_command(self, operator: str) -> None:
        self.current.after = operator
        if self.current.words or self.current.stdin or self.current.opaque_stdin:
            self.commands.append(self.current)
        elif operator not in ("\n", ";") or self.heredocs:
            raise ShellError(f"an empty command before {operator!r}")
        self.current = _Command()

    def read_heredocs(self) -> None:
        for command, delimiter, strip_tabs, quoted in self.heredocs:
            lines: list[str] = []
            while self.i < len(self.s):
                end = self.s.find("\n", self.i)
                line = self.s[self.i : end if end >= 0 else len(self.s)]
                self.i = end + 1 if end >= 0 else len(self.s)
                if strip_tabs:
                    line = line.lstrip("\t")
                if line == delimiter:
                    break
                lines.append(line)
            body = "".join(line + "\n" for line in lines)
            if not quoted and re.search(r"[$`\\]", body):
                raise ShellError("an unquoted heredoc whose body the shell would expand")
            command.stdin.append(body)
        self.heredocs = []

    def redirect(self) -> None:
        for op in ("<<<", "<<-", "<<", "<>", "<&", "<", ">>", ">&", ">|", ">", "&>>", "&>"):
            if self.s.startswith(op, self.i):
                self.i += len(op)
                break
        while self.peek() in (" ", "\t"):
            self.i += 1
        target = self.word()
        if not target.text and not target.quoted:
            raise ShellError(f"a redirection {op!r} without a target")
        if op in ("<<", "<<-"):
            self.heredocs.append((self.current, target.text, op == "<<-", target.quoted))
        elif op == "<<<":
            if target.expands:
                raise ShellError("a here-string the shell would expand")
            self.current.stdin.append(target.text + "\n")
        elif op in ("<", "<>"):
            self.current.opaque_stdin = True

    def run(self) -> list[_Command]:
        while self.i < len(self.s):
            ch = self.s[self.i]
            if ch in " \t":
                self.i += 1
            elif ch == "\n":
                self.i += 1
                self.end_command("\n")
                self.read_heredocs()
            elif ch == "#" and self.at_word_start():
                end = self.s.find("\n", self.i)
                self.i = end if end >= 0 else len(self.s)
            elif ch in "()":
                raise ShellError("a subshell or function the guard cannot follow")
            elif ch in ";&|":
                self.operator()
            elif ch in "<>":
                self.redirect()
            else:
                word = self.word()
                if self.next_is("<>") and word.text.isdigit() and not word.quoted:
                    continue  # a file descriptor number: `2>&1`
                self.current.words.append(word)
        self.end_command(";")
        if self.heredocs:
            self.read_heredocs()
        return self.commands

    def at_word_start(self) -> bool:
        return self.i == 0 or self.s[self.i - 1] in _METACHARS

    def operator(self) -> None:
        if self.s.startswith("&>", self.i):
            self.redirect()
            return
        for op in ("&&", "||", ";;", "|&", ";", "&", "|"):
            if self.s.startswith(op, self.i):
                if op == ";;":
                    raise ShellError("a case statement the guard cannot follow")
                self.i += len(op)
                self.end_command(op)
                return


def _command_name(words: list[_Word]) -> tuple[int, str] | None:
    for index, word in enumerate(words):
        if not word.quoted and _ASSIGNMENT.match(word.text):
            continue
        return index, word.text
    return None


def _cd(words: list[_Word], cwd: Path | None) -> Path | None:
    args = [w for w in words[1:] if w.text not in ("-L", "-P", "-e", "-@", "--")]
    if cwd is None or len(args) != 1 or args[0].expands or not args[0].text:
        return None
    target = args[0].text
    if target == "-":
        return None  # $OLDPWD
    if os.environ.get("CDPATH") and not target.startswith(("/", "./", "../")):
        return None  # the shell would look in $CDPATH first
    return Path(lexical(target if target.startswith("/") else f"{cwd}/{target}"))


def _patches_of(command: _Command, index: int) -> tuple[str, ...]:
    args = command.words[index + 1 :]
    if any(a.expands for a in args):
        raise ShellError("apply_patch gets an argument the shell would expand")
    if len(args) > 1:
        raise ShellError("apply_patch gets more than one argument")
    if command.opaque_stdin and not args:
        raise ShellError("apply_patch reads its patch from a file; pass the patch inline")
    texts = tuple(a.text for a in args) + tuple(command.stdin)
    if not texts:
        raise ShellError("apply_patch reads a patch from standard input the guard cannot see")
    return texts


def _settle(target: Path | None, operator: str) -> Path | None:
    """The folder after `cd target OPERATOR`: certain behind `&&`; behind `;` only when
    the folder exists now (else the cd may fail and the next command run where it was)."""
    if target is None:
        return None
    if operator == "&&" or (operator in (";", "\n") and target.is_dir()):
        return target
    return None


def shell_patches(script: str, cwd: Path) -> list[Invocation]:
    """Every apply_patch a shell command runs, with the folder it runs in.

    Raises ShellError when the command mentions apply_patch anywhere the guard cannot
    account for: an argument of another command, a heredoc fed to another program, a
    substitution, a compound command. A command that does not mention it returns [].
    """
    if not mentions_apply_patch(script):
        return []
    found: list[Invocation] = []
    here: Path | None = cwd
    pending: tuple[Path | None, str] | None = None  # a cd whose effect the next operator settles
    previous = ";"
    for command in _Lexer(script).run():
        if pending is not None:
            here = _settle(*pending)
            pending = None
        named = _command_name(command.words)
        piped = previous in ("|", "|&") or command.after in ("|", "|&", "&")
        runs_patch = named is not None and os.path.basename(named[1]) in APPLY_PATCH_NAMES
        # An apply_patch's own argument is patch data; anywhere else the name is a command
        # the guard cannot see run (`xargs apply_patch`, `bash -c 'apply_patch …'`).
        checked = command.words[: named[0]] if runs_patch and named else command.words
        for word in checked:
            if _NAMED.search(word.text):
                raise ShellError(
                    f"{word.text[:60]!r} names apply_patch where the guard cannot follow it"
                )
        if named is not None and named[1] in _RESERVED:
            raise ShellError(f"a compound command ({named[1]!r}) the guard cannot follow")
        if runs_patch and named is not None:
            found.append(Invocation(_patches_of(command, named[0]), here))
        elif any(_NAMED.search(text) for text in command.stdin):
            raise ShellError("a heredoc that names apply_patch is fed to another program")
        elif named is not None and named[1] in ("cd", "pushd", "popd"):
            target = _cd(command.words, here) if named[1] == "cd" else None
            pending = None if piped else (target, command.after)
            if command.after == "&":
                here = None
        previous = command.after
    return found


def invocation_paths(invocation: Invocation) -> Iterator[tuple[str, str | None]]:
    """(given, absolute) for every place the invocation's patches may write (see
    `patches.readings`); absolute is None when the path is relative and the folder
    unknown. Raises PatchError."""
    for text in invocation.patches:
        for hunk in parse_patch(text):
            for given in hunk.paths():
                if invocation.cwd is not None or given.startswith("/"):
                    for where in readings(given, invocation.cwd or Path("/")):
                        yield given, where
                elif is_home_path(given):
                    yield given, resolve(given, Path("/"))
                    yield given, None  # also a folder named `~` under the unknown cwd
                else:
                    yield given, None
