"""The stop detector's interface: "computer, stop" on the microphone while the narrator talks.

The coordinator's mic reader feeds it every chunk while a narration plays (muted or not: the
upload stays muted, nothing of this audio leaves the machine) and resets it when the narration
ends. A hit cuts the narration (`decisions.coordinator.StopHeard`). The acoustic detector
(pocketsphinx, the wake phrase followed by one of `StopSettings.words`) implements this
protocol; tests inject scripted fakes.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Protocol

from audio_io import BYTES_PER_SECOND
from audio_io.format import audioop
from detectors.audio import SAMPLE_WIDTH


@dataclass(frozen=True)
class StopHit:
    """What a stop detector reports (the acoustic one, `detectors.stop_phrase`, and the tests' fakes)."""

    phrase: str  # what was heard, e.g. "computer stop"
    end_s: float  # when the stop word ended, on the time scale `feed` was given
    # The `at` of the chunk that completed it (detected_s - end_s: the detector's own delay);
    # None when the detector reports the hit at the stop word's end (the acoustic one does).
    detected_s: float | None = None
    stop_word: str = ""  # which of the stop words, e.g. "stop" ("" when the detector does not say)
    start_s: float | None = None  # where the wake phrase began, when the detector knows
    wake_end_s: float | None = None  # ... and where it was heard to end (None: at `end_s`, or unknown)
    # The wake phrase alone (`detectors.barge_in`): the narration is cut and a command may follow.
    command: bool = False


class StopDetector(Protocol):
    def feed(self, chunk: bytes, at: float) -> StopHit | None:
        """`chunk`: pcm16 mono 24 kHz; `at`: the time at its end, in seconds of microphone audio
        (continuous across calls until `reset`). One hit per utterance of the phrase."""
        ...

    def reset(self) -> None:
        """What is fed next does not follow what came before (a narration ended)."""
        ...


class EchoGatedStopFeed:
    """What the stop detector hears while the narrator talks: the microphone as it is, around what
    the echo gate let through, and nothing elsewhere. The gate passes a chunk only when it beats
    the narrator's echo by its margin (or when no echo is expected), which keeps the narration's
    own voice (its "computer", even its "computer, stop") away from the detector, but also cuts
    the user's quieter sounds out of "computer, stop" said over it (the consonants, the pause
    between the words), and a word with holes is not recognised. So once the gate passes a voice
    (`onset` of the last `window` chunks passed and louder than `voice_rms`: not the quiet gaps
    between the narrator's words, where no echo is expected), the raw microphone is heard for
    `hangover_s` after each such chunk. Nothing (None) for the rest: not even silence, because
    long stretches of digital silence throw a recogniser's normalisation off (pocketsphinx then
    missed the user's "computer" one time in five); the caller resets the detector after each gap.
    Pure; times are the detector's (`at`)."""

    def __init__(self, hangover_s: float = 0.6, onset: int = 3, window: int = 5, voice_rms: int = 300) -> None:
        self.hangover_s = hangover_s
        self.onset = onset
        self.voice_rms = voice_rms  # about -40 dBFS: a voice near the microphone, not a room's murmur
        self._recent: deque[bool] = deque(maxlen=window)
        self._open_until = float("-inf")

    def reset(self) -> None:
        self._recent.clear()
        self._open_until = float("-inf")

    def __call__(self, raw: bytes, passed: bool, at: float) -> bytes | None:
        """`raw`: the chunk from the microphone; `passed`: the echo gate let it through; `at`: its
        end. The chunk to hear, or None (echo alone)."""
        voiced = passed and audioop.rms(raw, SAMPLE_WIDTH) >= self.voice_rms
        self._recent.append(voiced)
        if voiced and (self.open_at(at) or sum(self._recent) >= self.onset):
            self._open_until = at + self.hangover_s
        return raw if passed or self.open_at(at) else None

    def open_at(self, at: float) -> bool:
        """A voice the gate passed keeps the feed open at `at` (its hangover)."""
        return at <= self._open_until


class StopListener:
    """The mic reader's side of "computer, stop": a detector, what it may hear
    (`EchoGatedStopFeed`) and its clock (seconds of microphone audio read). Sync; one call per
    chunk. While a narration plays, the detector hears the microphone where the echo gate heard
    the user, never the narrator's echo alone; after each gap, and when the narration ends, it
    starts afresh."""

    def __init__(self, detector: StopDetector, feed: EchoGatedStopFeed | None = None) -> None:
        self.detector = detector
        self._feed = feed or EchoGatedStopFeed()
        self._mic_audio_s = 0.0
        self._fed = False  # the detector heard something since its last reset

    @property
    def clock(self) -> float:
        """Seconds of microphone audio heard so far: the time scale of the hits."""
        return self._mic_audio_s

    def hear(self, raw: bytes, passed: bool, narrating: bool) -> StopHit | None:
        """`raw`: the chunk from the microphone; `passed`: the echo gate let it through. A hit, or None."""
        self._mic_audio_s += len(raw) / BYTES_PER_SECOND
        if not narrating:
            self._feed.reset()
            self._reset_detector()
            return None
        heard = self._feed(raw, passed, self._mic_audio_s)
        if heard is None:  # the narrator's echo alone: not heard; what comes next starts afresh
            self._reset_detector()
            return None
        self._fed = True
        return self.detector.feed(heard, self._mic_audio_s)

    def _reset_detector(self) -> None:
        if self._fed:
            self.detector.reset()
            self._fed = False


@dataclass
class StopTiming:
    """How fast one "computer, stop" cut a narration. Mic times are seconds of microphone audio;
    clock times the coordinator's clock."""

    hit: StopHit
    heard_at: float  # clock: the detector returned the hit
    flushed_at: float | None = None  # clock: the speaker was flushed (None: nothing was being read)
    last_write_at: float | None = None  # clock: the last PCM of that narration handed to the speaker
    writes_after_cut: int = 0  # PCM the narration tried to play after the flush (dropped)
    done_at: float | None = None  # clock: the narrator's session was closed (before the hit: it had sent everything)

    @property
    def detector_ms(self) -> float | None:
        """From the end of the stop word to the hit (the detector's own delay, in audio time), when
        the detector says (the acoustic one reports the hit at the stop word's end: see its benchmark)."""
        detected = self.hit.detected_s
        return None if detected is None else (detected - self.hit.end_s) * 1000

    @property
    def cut_ms(self) -> float | None:
        """From the hit to the flush (the last PCM written is never later: see writes_after_cut)."""
        return None if self.flushed_at is None else (self.flushed_at - self.heard_at) * 1000
