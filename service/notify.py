"""systemd's notify protocol (sd_notify(3)): one datagram of `KEY=VALUE` lines to the socket
named in NOTIFY_SOCKET. Written here rather than taken from a library: the protocol is one
`sendto`, `sdnotify` (PyPI) is these same lines unmaintained since 2017, and `systemd-python`
needs libsystemd's headers and a compiler to install.

Outside systemd (no NOTIFY_SOCKET) every call does nothing, so the same code runs anywhere.
"""

from __future__ import annotations

import logging
import os
import socket
from typing import Mapping

log = logging.getLogger("handoff.service")


class SystemdNotifier:
    """Sends READY=1, STATUS=..., WATCHDOG=1 and STOPPING=1 to the service manager."""

    def __init__(self, environ: Mapping[str, str] = os.environ) -> None:
        address = environ.get("NOTIFY_SOCKET", "")
        # "@name" is a socket in the abstract namespace (a leading NUL byte on the wire).
        self._address = "\0" + address[1:] if address.startswith("@") else address
        self._socket: socket.socket | None = None
        self._failed = False  # said once in the log, not every watchdog period
        self.sent: list[str] = []  # what went out (tests and the status file read it)

    @property
    def enabled(self) -> bool:
        return bool(self._address)

    def send(self, *fields: str) -> bool:
        """Send one message (its fields joined by newlines); False when not under systemd or the
        manager's socket is gone (logged once: the assistant runs on without it)."""
        if not self._address:
            return False
        message = "\n".join(fields)
        try:
            if self._socket is None:
                self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            self._socket.sendto(message.encode(), self._address)
        except OSError as exc:  # the manager went away or the address is wrong: nothing to retry
            if not self._failed:
                log.warning("cannot notify the service manager at %s: %s", self._address.lstrip("\0"), exc.strerror or exc)
                self._failed = True
            return False
        self.sent.append(message)
        return True

    def ready(self, status: str) -> bool:
        return self.send("READY=1", f"STATUS={status}")

    def status(self, status: str) -> bool:
        return self.send(f"STATUS={status}")

    def watchdog(self) -> bool:
        return self.send("WATCHDOG=1")

    def stopping(self, status: str) -> bool:
        return self.send("STOPPING=1", f"STATUS={status}")

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None


def watchdog_interval_s(environ: Mapping[str, str] = os.environ, pid: int | None = None) -> float | None:
    """How often to send WATCHDOG=1: half of WatchdogSec (WATCHDOG_USEC), as sd_watchdog_enabled(3)
    advises; None when no watchdog is set for this process (WATCHDOG_PID names another one)."""
    usec = environ.get("WATCHDOG_USEC", "")
    if not usec.isdigit() or int(usec) == 0:
        return None
    owner = environ.get("WATCHDOG_PID", "")
    if owner and owner != str(os.getpid() if pid is None else pid):
        return None
    return int(usec) / 2_000_000
