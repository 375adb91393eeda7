"""Bearer tokens for the local HTTP servers (the review pages, the MCP server).

A token lives in a file only its owner may read: one the operator names is refused when
its group or others may read it (`mode & 0o077`), and one integrator makes is written
0600 in one rename. Tokens are compared in constant time; no token is ever logged.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from pathlib import Path

from integrator.errors import ConfigurationError
from integrator.files import NotPrivate, atomic_write, read_private

TOKEN_MIN = 16
TOKEN_MAX = 4096


def read_token(path: Path) -> str:
    """The token from `path` (surrounding whitespace dropped); refused unless it is a
    regular file no one but its owner may use (`mode & 0o077 == 0`), holding one long
    token. The mode checked is the one of the file read (one descriptor for both)."""
    try:
        data = read_private(path, TOKEN_MAX + 1)
    except NotPrivate as err:
        if err.why == "type":
            raise ConfigurationError(f"--token-file {path} is not a regular file") from err
        if err.why == "mode":
            who = "every user" if err.mode & 0o007 else "its group"
            raise ConfigurationError(
                f"--token-file {path} is readable by {who} (mode {err.mode:o}); chmod 600 it first"
            ) from err
        raise ConfigurationError(f"cannot read --token-file {path}: {err.strerror}") from err
    try:
        token = data.decode("ascii").strip()
    except UnicodeDecodeError as err:
        raise ConfigurationError(f"--token-file {path} is not ASCII text") from err
    if len(token) < TOKEN_MIN or len(token) > TOKEN_MAX or any(c.isspace() for c in token):
        raise ConfigurationError(
            f"--token-file {path} must hold one token of {TOKEN_MIN} to {TOKEN_MAX} "
            "characters without spaces (e.g. `python3 -c 'import secrets; "
            "print(secrets.token_urlsafe(32))'`)"
        )
    return token


def new_token_file(path: Path) -> str:
    """A fresh random token written to `path` (0600, in one rename, never through a link
    at its name; its folder is made 0700 when missing); the token."""
    token = secrets.token_urlsafe(32)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    atomic_write(path, (token + "\n").encode("ascii"), mode=0o600)
    return token


def token_matches(expected: str | None, given: str | None) -> bool:
    """`given` is the configured token (constant time; False when none is configured)."""
    if not expected or given is None:
        return False
    return hmac.compare_digest(expected.encode(), given.encode("utf-8", "surrogateescape"))


def bearer(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer …` header."""
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve to anything
