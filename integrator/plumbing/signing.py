"""Signed pushes: the `integrator-hmac` push option an integrator's transport sends, and
the check the server's hook makes of it (docs/server-hook.md, "Servers that authenticate
no one").

The signature is HMAC-SHA256 over the pushed updates (sorted lines), a time and a nonce,
under a key both sides read from a file. The client signs each push attempt anew; the
server accepts a signature once, and only for `DEFAULT_MAX_AGE` seconds around its clock.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from integrator.errors import ConfigurationError, UsageError
from integrator.limits import MAX_KEY_BYTES, MIN_KEY_BYTES
from integrator.refnames import shown

OPTION = "integrator-hmac"
VERSION = "v1"
DEFAULT_MAX_AGE = 300  # seconds a signature stays valid, either side of the server's clock
OID = re.compile(rb"[0-9a-f]{40}|[0-9a-f]{64}")
_SIGNATURE = re.compile(r"v1:(\d{1,12}):([0-9a-f]{32}):([0-9a-f]{64})")


@dataclass(frozen=True)
class Update:
    """One pushed command: `ref` from `old` to `new` (all zeros: absent)."""

    old: str
    new: str
    ref: str  # decoded with surrogateescape: bytes that are not UTF-8 survive, and are refused

    @property
    def action(self) -> str:
        if set(self.old) == {"0"}:
            return "create"
        return "delete" if set(self.new) == {"0"} else "update"

    def line(self) -> bytes:
        return f"{self.old} {self.new} {self.ref}\n".encode("utf-8", "surrogateescape")


def _message(updates: Iterable[Update], stamp: int, nonce: str) -> bytes:
    head = f"integrator-hmac {VERSION}\ntime {stamp}\nnonce {nonce}\n".encode()
    return head + b"".join(sorted(u.line() for u in updates))


def signature(key: bytes, updates: Iterable[Update], stamp: int, nonce: str) -> str:
    """HMAC-SHA256 over a canonical form of the updates (sorted lines), the time and nonce."""
    return hmac.new(key, _message(updates, stamp, nonce), hashlib.sha256).hexdigest()


def push_option(
    key: bytes,
    updates: Iterable[Update | tuple[str, str, str]],
    *,
    now: int | None = None,
    nonce: str | None = None,
) -> str:
    """The `-o` value that lets a push of `updates` past the hook: `integrator-hmac=v1:…`.

    Each update is (old, new, ref) as git will send it: old is the value the lease expects
    (all zeros to create), new all zeros to delete. An update whose old equals its new is
    left out, as git sends no command for it. Sign each push attempt anew: a signature is
    accepted once, and only for `DEFAULT_MAX_AGE` seconds around the server's clock.
    """
    given = [u if isinstance(u, Update) else Update(*u) for u in updates]
    for update in given:
        if not (OID.fullmatch(update.old.encode()) and OID.fullmatch(update.new.encode())):
            raise UsageError(f"update of {shown(update.ref)}: old and new must be full object ids")
    sent = [u for u in given if u.old != u.new]
    if not sent:
        raise UsageError("nothing to sign: every update leaves its ref where it is")
    if len(key) < MIN_KEY_BYTES:
        raise UsageError(f"the key has {len(key)} bytes; at least {MIN_KEY_BYTES} are needed")
    stamp = int(time.time()) if now is None else now
    nonce = nonce or secrets.token_hex(16)
    return f"{OPTION}={VERSION}:{stamp}:{nonce}:{signature(key, sent, stamp, nonce)}"


@dataclass(frozen=True)
class SignatureCheck:
    present: bool
    valid: bool
    status: str
    nonce: tuple[int, str] | None = None


def check_signature(  # noqa: PLR0911 — one return per reason a signature fails, naming it
    options: Sequence[str],
    key: bytes | None,
    updates: Sequence[Update],
    *,
    now: int,
    max_age: int,
    used: Collection[str],
) -> SignatureCheck:
    """Whether the push's `integrator-hmac` option signs exactly these updates, lately and
    for the first time."""
    values = [o.removeprefix(f"{OPTION}=") for o in options if o.startswith(f"{OPTION}=")]
    if not values:
        return SignatureCheck(False, False, "none")
    if key is None:
        return SignatureCheck(True, False, "this server has no key (integrator.hook.keyFile)")
    if len(values) > 1:
        return SignatureCheck(True, False, f"the push carries {len(values)} {OPTION} options")
    match = _SIGNATURE.fullmatch(values[0])
    if not match:
        return SignatureCheck(True, False, f"the {OPTION} option is malformed")
    stamp, nonce, mac = int(match[1]), match[2], match[3]
    if now - stamp > max_age:
        return SignatureCheck(
            True, False, f"the signature is {now - stamp} s old (limit {max_age} s)"
        )
    if stamp - now > max_age:
        return SignatureCheck(
            True, False, f"the signature is dated {stamp - now} s ahead of the server's clock"
        )
    if not hmac.compare_digest(mac, signature(key, updates, stamp, nonce)):
        return SignatureCheck(True, False, "the signature does not match the pushed updates")
    if nonce in used:
        return SignatureCheck(True, False, "the signature was used before (a replay)")
    return SignatureCheck(True, True, "valid", (stamp, nonce))


def load_key(path: str | Path) -> bytes:
    """The shared key: the file's content without surrounding whitespace, ≥ 32 bytes."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_KEY_BYTES + 1).strip()
    except OSError as err:
        raise ConfigurationError(f"cannot read the key file {path}: {err.strerror}") from err
    if not MIN_KEY_BYTES <= len(data) <= MAX_KEY_BYTES:
        raise ConfigurationError(
            f"the key file {path} holds {len(data)} bytes; it needs {MIN_KEY_BYTES} to "
            f"{MAX_KEY_BYTES} (`integrator server-hook keygen` writes one)"
        )
    return data
