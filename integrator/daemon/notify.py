"""systemd's notify protocol over `$NOTIFY_SOCKET` (Type=notify), in stdlib socket code.

Messages are `KEY=VALUE` lines in one datagram; an address starting with `@` is in the
abstract namespace. Outside systemd (no socket) every call is a cheap no-op.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping


def notify(message: str, env: Mapping[str, str] | None = None) -> bool:
    """Send one datagram to the service manager; False when there is none or it failed."""
    address = (env if env is not None else os.environ).get("NOTIFY_SOCKET", "")
    if not address or address[0] not in ("/", "@"):
        return False
    target = "\0" + address[1:] if address[0] == "@" else address
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(target)
            sock.sendall(message.encode())
    except OSError:
        return False
    return True


class Notifier:
    """The daemon's side of the protocol: ready, reloading, stopping, status, watchdog."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self.env = dict(env if env is not None else os.environ)

    @property
    def enabled(self) -> bool:
        return bool(self.env.get("NOTIFY_SOCKET"))

    def send(self, message: str) -> bool:
        return notify(message, self.env) if self.enabled else False

    def ready(self, status: str = "serving") -> bool:
        return self.send(f"READY=1\nSTATUS={status}\nMAINPID={os.getpid()}")

    def reloading(self) -> bool:
        # MONOTONIC_USEC lets Type=notify-reload units match the reload to this message.
        usec = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        return self.send(f"RELOADING=1\nMONOTONIC_USEC={usec}")

    def stopping(self) -> bool:
        return self.send("STOPPING=1\nSTATUS=finishing the submissions in hand")

    def status(self, text: str) -> bool:
        return self.send(f"STATUS={text}")

    def watchdog(self) -> bool:
        return self.send("WATCHDOG=1")

    def watchdog_interval(self) -> float | None:
        """Seconds between keep-alives (half of WatchdogSec), or None when not asked for."""
        usec = self.env.get("WATCHDOG_USEC", "")
        pid = self.env.get("WATCHDOG_PID", "")
        if not usec.isdigit() or (pid and pid != str(os.getpid())):
            return None
        return int(usec) / 1e6 / 2
