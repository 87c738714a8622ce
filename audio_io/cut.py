"""The speaker as one narration sees it: "stop" cuts it at once, and nothing more of that
narration plays (what it still tries to write is counted, for the stop's timings)."""

from __future__ import annotations

from typing import Callable

from audio_io.interface import SpeakerSink


class CutSpeaker:
    """The speaker as one narration sees it: after `cut()` it plays nothing more of it."""

    def __init__(self, speaker: SpeakerSink, clock: Callable[[], float]) -> None:
        self._speaker, self._clock = speaker, clock
        self.cut_done = False
        self.last_write_at: float | None = None
        self.first_write_at: float | None = None  # the narrator's first audio reached the speaker
        self.writes_after_cut = 0

    def cut(self) -> None:
        self.cut_done = True
        self._speaker.flush()

    def play(self, pcm: bytes) -> None:
        if self.cut_done:
            self.writes_after_cut += 1
            return
        self.last_write_at = self._clock()
        if self.first_write_at is None:
            self.first_write_at = self.last_write_at
        self._speaker.play(pcm)

    def flush(self) -> None:
        self._speaker.flush()

    async def drained(self) -> None:
        await self._speaker.drained()

    async def start(self) -> None:
        await self._speaker.start()

    async def close(self) -> None:
        await self._speaker.close()
