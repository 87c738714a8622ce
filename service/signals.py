"""SIGTERM, SIGINT and SIGHUP for a daemon: the first one stops it cleanly, a second one at once.
SIGHUP is what closing the terminal it runs in sends: a stop like any other (tasks stopped and
recorded, the status says stopped, history flushed), not the instant death its default is."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from typing import Callable, Iterator

log = logging.getLogger("handoff.service")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class StopSignals:
    """Installs loop signal handlers. The first signal calls `on_stop(signal)` (which cancels
    the coordinator: everything is then closed by its owners, tasks stopped and recorded); a
    second one, for someone who does not want to wait, ends the process at once with the
    shell's code for that signal (whatever tasks are left are found and stopped, by their
    marker, at the next start)."""

    def __init__(self, on_stop: Callable[[signal.Signals], object]) -> None:
        self._on_stop = on_stop
        self.received: signal.Signals | None = None

    @contextlib.contextmanager
    def installed(self, loop: asyncio.AbstractEventLoop) -> Iterator["StopSignals"]:
        for sig in STOP_SIGNALS:
            loop.add_signal_handler(sig, self._handle, sig)
        try:
            yield self
        finally:
            for sig in STOP_SIGNALS:
                loop.remove_signal_handler(sig)

    def _handle(self, sig: signal.Signals) -> None:
        if self.received is not None:
            with contextlib.suppress(OSError):  # the terminal may be gone (SIGHUP)
                os.write(2, f"handoff: {sig.name} again: stopping at once\n".encode())
            os._exit(128 + sig)
        self.received = sig
        log.warning("%s: stopping (tasks are stopped and recorded; %s again stops at once)", sig.name, sig.name)
        self._on_stop(sig)
