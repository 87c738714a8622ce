"""Scripted stand-ins for the acoustic stop detector (detectors.stop_word.StopDetector)."""

from __future__ import annotations

from audio_io.format import audioop
from detectors.stop_word import StopHit


class LoudStopDetector:
    """Anything louder than `rms` is "computer, stop": the hit comes with the first quieter chunk
    after it (a keyword spotter, too, reports a word once it has ended), one chunk after the end."""

    def __init__(self, rms: int = 2000, phrase: str = "computer stop") -> None:
        self.rms = rms
        self.phrase = phrase
        self.fed = 0
        self.resets = 0
        self.hits: list[StopHit] = []
        self._loud_until: float | None = None

    def feed(self, chunk: bytes, at: float) -> StopHit | None:
        self.fed += 1
        if audioop.rms(chunk, 2) >= self.rms:
            self._loud_until = at
            return None
        if self._loud_until is None:
            return None
        hit = StopHit(self.phrase, end_s=self._loud_until, detected_s=at)
        self._loud_until = None
        self.hits.append(hit)
        return hit

    def reset(self) -> None:
        self.resets += 1
        self._loud_until = None
