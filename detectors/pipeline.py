"""The detector path for one microphone stream: VAD on every chunk, the keyword spotter on speech only.

    detectors = MicDetectors(SileroVad(), KeywordSpotter())      # spotter None unless ON_DEVICE_WAKE
    verdict = detectors.feed(chunk, now)                          # now: clock time at the chunk's end
    for piece in gate.feed(chunk, now, verdict.is_speech, verdict.keyword_hit): send(piece)

The spotter costs more than the VAD, so it hears only speech: at each VAD onset it is reset and
given the last `preroll_s` of audio first (the wake word's first syllable comes before the VAD
notices it), then every chunk until `tail_s` after the last speech.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from decisions.upload_gate import KeywordHit
from detectors.keyword import KeywordSpotter
from detectors.vad import SileroVad


@dataclass(frozen=True)
class Verdict:
    is_speech: bool
    probability: float
    keyword_hit: KeywordHit | None = None


class MicDetectors:
    def __init__(
        self, vad: SileroVad, spotter: KeywordSpotter | None = None, preroll_s: float = 0.4, tail_s: float = 0.6
    ) -> None:
        self.vad = vad
        self.spotter = spotter
        self._preroll_s = preroll_s
        self._tail_s = tail_s
        self._recent: deque[tuple[float, bytes]] = deque()  # (end time, chunk), the spotter's pre-roll
        self._spotting_until: float | None = None  # the spotter is fed until this time

    def reset(self) -> None:
        """After a gap in the stream (mute, reconnect)."""
        self.vad.reset()
        if self.spotter is not None:
            self.spotter.reset()
        self._recent.clear()
        self._spotting_until = None

    def feed(self, chunk: bytes, now: float) -> Verdict:
        vad = self.vad.feed(chunk)
        hit = None
        if self.spotter is not None:
            hit = self._spot(chunk, now, vad.is_speech)
        return Verdict(vad.is_speech, vad.probability, hit)

    def _spot(self, chunk: bytes, now: float, is_speech: bool) -> KeywordHit | None:
        assert self.spotter is not None
        hit = None
        spotting = self._spotting_until is not None and now <= self._spotting_until
        if is_speech and not spotting:
            self.spotter.reset()
            for end, old in self._recent:
                hit = hit or self.spotter.feed(old, end)
            self._recent.clear()
            spotting = True
        if is_speech:
            self._spotting_until = now + self._tail_s
        if spotting:
            hit = self.spotter.feed(chunk, now) or hit
        else:
            self._spotting_until = None
            self._recent.append((now, chunk))
            while self._recent and now - self._recent[0][0] > self._preroll_s:
                self._recent.popleft()
        return hit
