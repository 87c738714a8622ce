"""What a running daemon tells the outside world: systemd's READY=1 once the first listener
session is configured (and STATUS= lines after), WATCHDOG=1 every half WatchdogSec while the
event loop runs and the listener is healthy (`service.health`), STOPPING=1 on the way out.

It only watches: the coordinator's timeline (`on_add`) and a few read-only probes the caller
builds from the assembled assistant, so nothing here reaches into the coordinator.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Callable

from concurrency.changes import Changes
from decisions.timeline import Timeline, TimelineEntry, TimelineKind
from service.health import ListenerHealth
from service.notify import SystemdNotifier

log = logging.getLogger("handoff.service")


@dataclass(frozen=True)
class Probes:
    """Read-only views of the running assistant."""

    listener_up: Callable[[], bool]


class ServiceRuntime:
    """Use as `async with ServiceRuntime(...) as service:` around the running coordinator; call
    `stopping(why)` as soon as a stop begins (a signal), so systemd knows before the tasks are."""

    def __init__(
        self,
        timeline: Timeline,
        probes: Probes,
        notifier: SystemdNotifier,
        health: ListenerHealth,
        watchdog_s: float | None,
    ) -> None:
        self._timeline = timeline
        self._probes = probes
        self._notifier = notifier
        self._health = health
        self._watchdog_s = watchdog_s
        self._ready = False
        self._stopping = False
        self._pinger: asyncio.Task[None] | None = None
        self.vouching = True  # the last health check found the listener healthy
        self.checks = 0  # health checks made by the watchdog loop
        self.changes = Changes()  # notified after each check (tests await them)

    async def __aenter__(self) -> "ServiceRuntime":
        self._timeline.on_add.append(self._observe)
        if self._watchdog_s is not None:
            self._pinger = asyncio.create_task(self._ping(self._watchdog_s), name="watchdog")
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._timeline.on_add.remove(self._observe)
        if self._pinger is not None:
            self._pinger.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pinger
        self.stopping("stopped")
        self._notifier.close()

    def stopping(self, why: str) -> None:
        if not self._stopping:
            self._stopping = True
            self._notifier.stopping(why)

    def _observe(self, entry: TimelineEntry) -> None:
        self._health.news()
        if entry.kind is TimelineKind.LISTENING and not self._stopping:
            if not self._ready:
                self._ready = True
                self._notifier.ready(entry.text)
            else:
                self._notifier.status(entry.text)

    async def _ping(self, interval_s: float) -> None:
        """A ping only from a running loop, only for a healthy listener: a stuck one is left to
        the watchdog (systemd restarts handoff after WatchdogSec without one)."""
        while True:
            healthy = self._health.healthy(self._probes.listener_up())
            if healthy:
                self._notifier.watchdog()
            if healthy is not self.vouching:
                self.vouching = healthy
                log.warning("the listener is %s", "healthy again" if healthy else
                            f"down and silent for {self._health.stuck_after_s:g} s: no more watchdog pings")
            self.checks += 1
            self.changes.notify()
            await asyncio.sleep(interval_s)  # the protocol's heartbeat: a fixed period by design
