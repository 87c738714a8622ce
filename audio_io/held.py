"""The speaker a narration made ahead of time reads into (issue 33): nothing of it is heard until
it is released, and a dropped one is never heard at all."""

from __future__ import annotations

from typing import Callable

from audio_io.interface import SpeakerSink


class HeldSpeaker:
    """Keeps what is played, in order, until `release(speaker)` plays it all there and passes what
    comes after straight on; `drop()` forgets it and plays nothing more."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._held: list[bytes] = []
        self._to: SpeakerSink | None = None
        self.dropped = False
        self._clock = clock
        self.made_at = clock()
        self.first_at: float | None = None  # the first audio came (held or not)

    @property
    def held_bytes(self) -> int:
        return sum(map(len, self._held))

    def release(self, speaker: SpeakerSink) -> None:
        self._to = speaker
        held, self._held = self._held, []
        for pcm in held:
            speaker.play(pcm)

    def drop(self) -> None:
        self.dropped = True
        self._held.clear()

    def play(self, pcm: bytes) -> None:
        if self.dropped:
            return
        if self.first_at is None:
            self.first_at = self._clock()
        if self._to is not None:
            self._to.play(pcm)
        else:
            self._held.append(pcm)

    def flush(self) -> None:
        if self._to is not None:
            self._to.flush()
        else:
            self._held.clear()

    async def drained(self) -> None:
        if self._to is not None:
            await self._to.drained()

    async def start(self) -> None:
        pass

    async def close(self) -> None:
        pass
