"""Who holds the microphone muted: the upload to the listener is muted while anyone holds it."""

from __future__ import annotations

import contextlib
import time
from collections import deque
from dataclasses import dataclass, field
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


@dataclass
class MutedTail:
    """The chunks a live microphone's mute dropped in its last `keep_s`, with when each was
    captured. The mute lifts when the loop sees the speaker drained, which a busy or slow machine
    sees late: what was captured after the audio ended was read while still muted, yet it is the
    user's (a command said the instant the answer ends), not the narrator's. At the release those
    go up; the rest were said over the narrator, and stay dropped.

    The other way round, a reader behind the room reads after the release what was captured while
    the audio played: `played_over` drops it as the mute would have (the gate alone let a busy
    machine's echo through). Not after a cut: the barge-in that cut the audio was said over it, and
    what the ear held of it goes up after the release."""

    keep_s: float = 0.5
    _held: deque[tuple[float, int, bytes]] = field(default_factory=deque)
    _first_at: float | None = None  # the capture time of this muted stretch's first chunk
    _played_until: float | None = None  # after a release: what was captured before this was played over

    def hold(self, captured: tuple[float, float], offset: int, chunk: bytes) -> list[bytes]:
        """A chunk dropped by the mute, `offset` bytes into the stream, captured between
        `captured` (start, end). Returns the chunks now older than `keep_s`: dropped for good."""
        captured_at, captured_to = captured
        if self._first_at is None:
            self._first_at, self._played_until = captured_at, None
        self._held.append((captured_to, offset, chunk))
        gone = []
        while captured_to - self._held[0][0] > self.keep_s:
            gone.append(self._held.popleft()[2])
        return gone

    def release(self, audio_end: float, cut: bool = False) -> tuple[list[bytes], list[tuple[int, bytes]]]:
        """The mute lifted; the speaker's audio ended at `audio_end` (the same clock; `cut`: it was
        cut short). Returns what stays dropped, and what goes up (stream offset, chunk): captured
        after the audio ended, when it ended during this stretch (a mute over no sound keeps
        everything out). A chunk that ends after the audio may hold the user's first sound; what is
        held has been through the echo gate, which silenced it if it was the echo alone."""
        played = self._first_at is not None and audio_end > self._first_at
        self._played_until = audio_end if played and not cut else None
        dropped: list[bytes] = []
        late: list[tuple[int, bytes]] = []
        for to, offset, chunk in self._held:
            if played and to > audio_end:
                late.append((offset, chunk))
            else:
                dropped.append(chunk)
        self._held.clear()
        self._first_at = None
        return dropped, late

    def played_over(self, captured_to: float, released: bool = False) -> bool:
        """A chunk read after the release that ends at `captured_to`: True when it was captured
        while the audio played (drop it as muted). The first chunk past the audio's end, or a
        barge-in the ear lets through (`released`: the user's), ends this."""
        if self._played_until is not None and captured_to <= self._played_until and not released:
            return True
        self._played_until = None
        return False

    @property
    def judging_reads(self) -> bool:
        """Since the release, reads are judged by `played_over` (until one is past the audio's end)."""
        return self._played_until is not None

    @property
    def holding(self) -> bool:
        """Chunks the mute dropped wait for its release."""
        return bool(self._held)
