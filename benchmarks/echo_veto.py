"""Measured variants of the stop listener, not wired into the assistant (issue 32): the detectors
hear every chunk of the echo canceller's output, and a twin detector on what the speaker played
vetoes the narration's own phrases. `benchmarks/barge_in.py --veto N` measures `EchoVetoListener`
against the shipped path (docs/PERFORMANCE.md, "Barge-in: stream delay and the twin veto"): 5.8
times the detectors' CPU, not clearly better. Its default row measures `BargeInListener` (only
the wake model ungated, a twin wake model on what was played; "Barge-in: the stop check after a
cut, the ungated wake model"): found the user far more often, but woke 4 times in an hour of
echo. Neither is switched on, so both stay here beside their benchmark."""

from __future__ import annotations

from collections import deque
from typing import Callable

from audio_io import BYTES_PER_SECOND
from detectors.barge_in import BargeInDetector
from detectors.pipeline import WakeSpotter
from detectors.stop_word import EchoGatedStopFeed, StopDetector, StopHit, StopListener


class _Ungated(EchoGatedStopFeed):
    """Every chunk is heard: the detectors' state runs on through the narration."""

    def __call__(self, raw: bytes, passed: bool, at: float) -> bytes | None:
        return raw


class EchoVetoListener(StopListener):
    """The stop listener for the echo canceller's output: the detectors hear every cancelled chunk
    (no gaps, so nothing restarts them mid-phrase), and a hit is the narrator's own when a twin
    detector fed what the speaker played (`heard_reference`, lined up with the microphone and
    `lead_s` ahead of it) heard the same kind of hit (a stop, or a wake) within `window_s` before
    it: the narration's own "hey jarvis, stop" is then vetoed, however much of it the canceller
    left. Optionally (`min_passed`) a hit also needs that many chunks the gate behind the
    canceller passed since the phrase began. Pure; one call each per chunk."""

    def __init__(self, detector: StopDetector, reference: StopDetector | None = None, min_passed: int = 0,
                 window_s: float = 1.5, lead_s: float = 0.5, keep_s: float = 4.0) -> None:
        super().__init__(detector, _Ungated())
        self.reference = reference
        self.min_passed = min_passed
        self.window_s = window_s
        self.lead_s = lead_s
        self._keep_s = keep_s
        self._passed: deque[float] = deque()  # the end times of chunks the gate passed, lately
        self._echoed: deque[tuple[float, bool]] = deque()  # what the reference said: (end, a wake phrase)
        self._reference_s = 0.0
        self.vetoed = 0  # hits on the echo alone

    def heard_reference(self, chunk: bytes, narrating: bool) -> None:
        """What the speaker played `lead_s` after the microphone chunk `hear` gets next (silence
        where nothing plays), lined up with it by the stream delay."""
        if self.reference is None:
            return
        self._reference_s += len(chunk) / BYTES_PER_SECOND
        if not narrating:
            self.reference.reset()
            return
        hit = self.reference.feed(chunk, self._reference_s)
        if hit is not None and hit.command:
            self._echoed.append((self._reference_s - self.lead_s, True))
        stop = getattr(self.reference, "stop", self.reference)
        spotted = getattr(stop, "spotted", None)
        if spotted:  # each word of the stop phrase the narration said, phrase or not
            wake = getattr(stop, "wake", None)
            self._echoed.extend((end - self.lead_s, word == wake) for word, end in spotted)
            spotted.clear()

    def hear(self, raw: bytes, passed: bool, narrating: bool) -> StopHit | None:
        hit = super().hear(raw, True, narrating)
        now = self.clock
        if passed and narrating:
            self._passed.append(now)
        while self._passed and now - self._passed[0] > self._keep_s:
            self._passed.popleft()
        while self._echoed and now - self._echoed[0][0] > self._keep_s:
            self._echoed.popleft()
        if hit is None:
            return None
        start = hit.start_s if hit.start_s is not None else hit.end_s - 1.0
        # A stop: the narration said a stop word about then. A wake: it said the wake phrase.
        echoed = any(wake == hit.command and hit.end_s - self.window_s <= end <= hit.end_s + self.lead_s
                     for end, wake in self._echoed)
        if not echoed and sum(1 for end in self._passed if end > start) >= self.min_passed:
            return hit
        self.vetoed += 1
        return None


class BargeInListener(StopListener):
    """The stop listener for a `BargeInDetector` whose wake model hears every chunk the canceller
    returns while the narrator talks (the stop phrase's pocketsphinx searches still hear only
    what the gate behind the canceller let through: `EchoGatedStopFeed`), with a twin wake model
    fed what the speaker played as each chunk was captured (`played()`, asked once per chunk: the
    canceller's reference for it, `EchoCanceller.far`): a wake the narration itself said within
    `window_s` before vetoes the microphone's. Sync; one call per chunk."""

    def __init__(self, detector: BargeInDetector, twin: WakeSpotter, played: Callable[[], bytes],
                 window_s: float = 1.5) -> None:
        super().__init__(detector)
        self.barge_in = detector
        self.twin = twin
        self.played = played
        self.window_s = window_s
        self._echoed: deque[float] = deque()  # when the narration said the wake phrase, lately
        self._twin_fed = False  # the wake model and its twin heard something since their last reset
        self.vetoed = 0  # the microphone's wakes the narration had said

    def hear(self, raw: bytes, passed: bool, narrating: bool) -> StopHit | None:
        self._mic_audio_s += len(raw) / BYTES_PER_SECOND
        now = self._mic_audio_s
        if not narrating:
            self._feed.reset()
            self._reset_detector()
            if self._twin_fed:  # the wake model and its twin heard this narration: the next starts afresh
                self.twin.reset()
                self.barge_in.wake.reset()
                self._twin_fed = False
            self._echoed.clear()
            return None
        played = self.played()
        self._twin_fed = True
        if played:
            if self.twin.feed(played, now) is not None:
                self._echoed.append(now)
        while self._echoed and now - self._echoed[0] > self.window_s:
            self._echoed.popleft()
        heard = self._feed(raw, passed, now)
        hit = None
        if heard is None:
            if self._fed:
                self.barge_in.stop.reset()
                self._fed = False
        else:
            self._fed = True
            hit = self.barge_in.stop.feed(heard, now)
        woke = self.barge_in.wake.feed(raw, now)
        if woke is not None and self._echoed:
            self.vetoed += 1
            woke = None
        return self.barge_in.combine(hit, woke, now)

    def _reset_detector(self) -> None:
        if self._fed:
            self.barge_in.reset()
            self._fed = False
