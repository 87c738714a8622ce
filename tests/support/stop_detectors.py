"""Scripted stand-ins for the acoustic stop detector (detectors.stop_word.StopDetector)."""

from __future__ import annotations

from audio_io.format import audioop
from detectors.keyword import KeywordSpotter, KeywordSpotterSettings
from detectors.stop_word import StopHit


class LoudStopDetector:
    """Anything louder than `rms` is "computer, stop": the hit comes with the first quieter chunk
    after it (a keyword spotter, too, reports a word once it has ended), one chunk after the end."""

    def __init__(self, rms: int = 2000, phrase: str = "computer stop", command: bool = False) -> None:
        self.rms = rms
        self.phrase = phrase
        self.command = command  # a barge-in: the wake phrase alone (a command follows), once
        self._loud_from: float | None = None
        self.fed = 0
        self.resets = 0
        self.hits: list[StopHit] = []
        self._loud_until: float | None = None

    def feed(self, chunk: bytes, at: float) -> StopHit | None:
        self.fed += 1
        if audioop.rms(chunk, 2) >= self.rms:
            if self._loud_until is None:
                self._loud_from = at - len(chunk) / 48000
            self._loud_until = at
            return None
        if self._loud_until is None or (self.command and self.hits):
            return None
        hit = StopHit(self.phrase, end_s=self._loud_until, detected_s=at, start_s=self._loud_from, command=self.command)
        self._loud_until = None
        self.hits.append(hit)
        return hit

    def reset(self) -> None:
        self.resets += 1
        self._loud_until = None


class SpotterStopDetector:
    """An acoustic stand-in: the on-device wake-word spotter (detectors.keyword, pocketsphinx)
    reporting "computer" as the stop phrase. It really listens (a narration's "computer" fires it
    as surely as the user's), which is what the echo tests need; telling "computer, stop" from
    "computer, ..." is the real stop detector's part."""

    def __init__(self, phrase: str = "computer") -> None:
        self.spotter = KeywordSpotter(KeywordSpotterSettings(phrase=phrase))
        self.fed = 0
        self.hits: list[StopHit] = []

    def feed(self, chunk: bytes, at: float) -> StopHit | None:
        self.fed += 1
        found = self.spotter.feed(chunk, at)
        if found is None:
            return None
        hit = StopHit(found.phrase, end_s=found.detected_s, detected_s=found.detected_s)
        self.hits.append(hit)
        return hit

    def reset(self) -> None:
        self.spotter.reset()


def spotted(pcm: bytes, phrase: str = "computer") -> int:
    """How often the spotter hears `phrase` in `pcm` (24 kHz pcm16)."""
    spotter = KeywordSpotter(KeywordSpotterSettings(phrase=phrase))
    chunk = 960
    return sum(spotter.feed(pcm[i:i + chunk], (i + chunk) / 48000) is not None for i in range(0, len(pcm), chunk))


class HeardTheUser:
    """The spotter, plus an oracle for the user's own words: it also reports "computer stop" once
    it has been fed `share` of the chunks in which the user spoke since `listen_from` (a room
    time; None: not listening; a test sets it back once the stop was heard), which is what a
    recogniser needs to hear a phrase said over the narration (the pocketsphinx stand-in alone
    misses it over the echo one time in three).
    A chunk counts by the time it was captured, not by when it was fed: a listener that replays
    the second before a voice (`detectors.barge_in.PrerollStopListener`) feeds fifty chunks in one
    call, and they are the room's past, not what the user is saying now."""

    STOP = "computer stop"  # the oracle's phrase

    def __init__(self, microphone, share: float = 0.8) -> None:  # a tests.support.room.RoomMicrophone
        self.spotter = SpotterStopDetector()
        self.microphone = microphone
        self.share = share
        self.listen_from: float | None = None
        self.hits: list[StopHit] = []
        self._fed: set[int] = set()  # which of the microphone's chunks were fed (their index in `heard`)

    def feed(self, chunk: bytes, at: float) -> StopHit | None:
        # `at` is the listener's clock at the chunk's end: seconds of microphone audio read, so the
        # chunk is the microphone's chunk number at / its length, less one.
        self._fed.add(round(at * 48000 / len(chunk)) - 1)
        hit = self.spotter.feed(chunk, at) or self._oracle(at)
        if hit is not None:
            self.hits.append(hit)
        if hit is not None and hit.phrase == self.STOP:
            # The oracle reports once. The spotter's bare "computer" (on the user's words too) does
            # not end its listening: the listener may veto that hit (its margins over the echo),
            # and then only the oracle's hears the stop (before, it went deaf after any hit).
            self.listen_from = None
        return hit

    def _oracle(self, at: float) -> StopHit | None:
        if self.listen_from is None:
            return None
        voiced = [k for k, h in enumerate(self.microphone.heard) if h.at >= self.listen_from and any(h.user)]
        fed = sum(k in self._fed for k in voiced)
        if len(voiced) < 25 or fed < self.share * len(voiced):
            return None
        return StopHit(self.STOP, end_s=at, detected_s=at)

    def reset(self) -> None:
        self.spotter.reset()
