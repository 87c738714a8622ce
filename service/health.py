"""Is the listener doing its job? The watchdog's question, answered without I/O.

Healthy: the listener's session is up, or handoff has had news of it (any timeline entry: a
session ready, a drop, a failed connection attempt, a narration) within `stuck_after_s`. A
listener retrying a dead network keeps reporting its failed attempts (at least one every
reconnect cap + connect timeout), so it stays healthy: it does what it should, and restarting
handoff would not bring the network back. A listener that is down and silent for longer is
stuck, and the watchdog stops vouching for it, so systemd restarts handoff.
"""

from __future__ import annotations

import time
from typing import Callable

from config.settings import Settings


def stuck_after_s(settings: Settings) -> float:
    """Twice the longest quiet gap a reconnecting listener can leave: the backoff cap (plus
    jitter) and a connect attempt's timeout. 81 s with the default settings."""
    reconnect = settings.reconnect
    return 2 * (reconnect.max_s + reconnect.jitter_s + settings.realtime.connect_timeout_s)


class ListenerHealth:
    def __init__(self, stuck_after_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.stuck_after_s = stuck_after_s
        self._clock = clock
        self._last_news = clock()  # starting counts as news: connecting takes a moment

    def news(self) -> None:
        """Something was reported (a timeline entry)."""
        self._last_news = self._clock()

    def healthy(self, listener_up: bool) -> bool:
        return listener_up or self._clock() - self._last_news < self.stuck_after_s
