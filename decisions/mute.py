"""Who holds the microphone muted: the upload to the listener is muted while anyone holds it."""

from __future__ import annotations

import contextlib
import time
from collections import deque
from typing import Callable, Iterator

class MuteHolders:
    """The mic upload is muted while anyone holds it; each holder removes itself in `finally`."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, on_change: Callable[[], None] = lambda: None) -> None:
        self._holders: set[str] = set()
        self._clock = clock
        self._on_change = on_change
        self.history: deque[tuple[str, float, float]] = deque(maxlen=100)  # (holder, start, end), recent
        self.releases = 0  # holds ended so far: a reader can tell that a mute came and went

    @property
    def muted(self) -> bool:
        return bool(self._holders)

    @contextlib.contextmanager
    def hold(self, holder: str) -> Iterator[None]:
        if holder in self._holders:
            raise RuntimeError(f"{holder} already holds the mute")
        self._holders.add(holder)
        start = self._clock()
        try:
            yield
        finally:
            self._holders.discard(holder)
            self.history.append((holder, start, self._clock()))
            self.releases += 1
            self._on_change()

