"""On-device "computer, stop": the wake phrase followed by a stop word, heard while the narrator talks.

    detector = StopPhraseDetector(StopPhraseSettings(wake_phrase="computer", stop_words=("stop", "cancel")))
    hit = detector.feed(chunk)          # one 20 ms chunk of pcm16 mono 24 kHz (any size works)
    if hit is not None: ...             # hit.end_s: when the stop word ended, in seconds of audio fed
    detector.reset()                    # after a gap in the audio (mute, a new narration)

pocketsphinx keyphrase search (its en-us model, dictionary and search all ship in the wheel), one
search for the wake phrase and one for each stop word, each with its own threshold; a hit is
the wake phrase followed by a stop word that starts at most `max_gap_s` after the wake phrase
ended. (Spotting "computer stop" as one keyphrase finds almost nothing on espeak-ng voices at any
threshold: the two words are each found, the pair as one path rarely is. The sequence rule gives
back the specificity: "stop" alone, or "computer" alone, never stops the narrator.) A stop word
is heard at its end, so the hit comes as soon as the phrase is said, and it is reported once.

Times are seconds of audio fed since the last `reset()` (or the `end_time` given with a chunk,
when the caller counts on its own clock). Measured in benchmarks/stop_phrase.py; table in
docs/PERFORMANCE.md ("Stop phrase").
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from detectors.audio import SAMPLE_WIDTH, Resampler
from detectors.keyword import FRAMES_PER_SECOND, UnknownWakeWord
from detectors.sphinx_words import keyphrase_decoder, known
from detectors.stop_word import StopHit


@dataclass(frozen=True)
class StopPhraseSettings:
    wake_phrase: str = "computer"
    stop_words: tuple[str, ...] = ("stop", "cancel")
    # Keyphrase thresholds (lower finds more); chosen in benchmarks/stop_phrase.py.
    wake_threshold: float = 1e-70
    stop_threshold: float = 1e-20
    max_gap_s: float = 1.0  # from the end of the wake phrase to the start of the stop word
    wake_lag_s: float = 0.3  # a wake phrase another detector heard ended up to this long before it said so
    # pocketsphinx reports a keyphrase only this many 10 ms frames after it first scored above
    # the threshold (its `kws_delay`, waiting for a better-scoring end; 10 by default, which held
    # every hit back 100 ms). 2: the hit comes about when the word's sound ends (median 0 ms,
    # max 100 ms), as many found, no more false stops (benchmarks/stop_phrase.py).
    kws_delay_frames: int = 2
    input_rate: int = 24000


def _words(text: str) -> str:
    return " ".join(text.lower().replace(",", " ").split())


class _Spotter:
    """One pocketsphinx keyphrase search over 16 kHz audio; reports (start, end) in audio seconds."""

    def __init__(self, phrase: str, threshold: float, delay_frames: int) -> None:
        self.phrase = phrase
        self._decoder = keyphrase_decoder(phrase, kws_threshold=threshold, kws_delay=delay_frames)
        self._origin_s = 0.0
        self._in_utterance = False

    def reset(self) -> None:
        if self._in_utterance:
            self._decoder.end_utt()
            self._in_utterance = False
        self._origin_s = 0.0

    def feed(self, pcm16k: bytes) -> tuple[float, float] | None:
        if not self._in_utterance:
            self._decoder.start_utt()
            self._in_utterance = True
        self._decoder.process_raw(pcm16k, False, False)
        if self._decoder.hyp() is None:
            return None
        segments = [(seg.start_frame, seg.end_frame) for seg in self._decoder.seg()]
        frames_done = self._decoder.n_frames()
        # Restart the search so each utterance of the phrase is reported once; audio time keeps counting.
        self._decoder.end_utt()
        self._decoder.start_utt()
        origin = self._origin_s
        self._origin_s += frames_done / FRAMES_PER_SECOND
        start = min((a for a, _ in segments), default=frames_done)
        end = max((b + 1 for _, b in segments), default=frames_done)
        return origin + start / FRAMES_PER_SECOND, origin + end / FRAMES_PER_SECOND


class StopPhraseDetector:
    """Sync, no I/O after construction: feed chunks, get a `StopHit` or None."""

    def __init__(self, settings: StopPhraseSettings = StopPhraseSettings()) -> None:
        if not settings.stop_words:
            raise ValueError("StopPhraseSettings.stop_words is empty: there is nothing to listen for")
        self.settings = settings
        self.wake = _words(settings.wake_phrase)
        self.stop_words = tuple(_words(word) for word in settings.stop_words)
        self._wake_spotter = _Spotter(self.wake, settings.wake_threshold, settings.kws_delay_frames)
        words = {w for phrase in (self.wake, *self.stop_words) for w in phrase.split()}
        unknown = sorted(w for w in words if not known(w))
        if unknown:
            raise UnknownWakeWord(
                f"the stop phrase {self.wake!r} + {list(self.stop_words)} has words the on-device spotter does not know: {unknown}"
            )
        self._stop_spotters = [_Spotter(word, settings.stop_threshold, settings.kws_delay_frames) for word in self.stop_words]
        self._resample = Resampler(settings.input_rate)
        self._fed_s = 0.0  # audio fed since reset()
        self._wake: tuple[float, float] | None = None  # (start, end) of the last wake phrase heard, audio time
        # The words spotted lately, phrase or not: (the word, its end on the caller's clock). Cleared
        # by whoever reads it (`detectors.barge_in.EchoVetoListener` on what the speaker played);
        # bounded, since the microphone's detector has no reader.
        self.spotted: deque[tuple[str, float]] = deque(maxlen=16)
        # The wake phrase this search heard in the last `feed` (its start and end on the caller's
        # clock), else None: a barge-in may take it as the wake (`BargeInDetector(search_wakes=True)`).
        self.wake_spotted: tuple[float, float] | None = None

    @property
    def phrases(self) -> tuple[str, ...]:
        return tuple(f"{self.wake} {word}" for word in self.stop_words)

    def reset(self) -> None:
        for spotter in (self._wake_spotter, *self._stop_spotters):
            spotter.reset()
        self._resample.reset()
        self._fed_s = 0.0
        self._wake = None
        self.wake_spotted = None

    def wake_heard(self, start_s: float, detected_s: float, now: float) -> None:
        """Another detector heard the wake phrase (the wake model, which hears it far better than
        this search: `detectors.barge_in`), `start_s` to `detected_s` on the caller's clock, whose
        time is `now` after the last chunk fed: a stop word following it completes the phrase.
        The model reports the phrase up to a few hundred ms after its end: the gap counts from
        `wake_lag_s` before."""
        offset = now - self._fed_s
        self._wake = (start_s - offset, detected_s - offset - self.settings.wake_lag_s)

    def feed(self, chunk: bytes, end_time: float | None = None) -> StopHit | None:
        """`chunk`: pcm16 mono at `input_rate`. `end_time`: the caller's clock at the chunk's end
        (default: seconds of audio fed since `reset()`); the hit's times are on the same clock."""
        self._fed_s += len(chunk) / SAMPLE_WIDTH / self.settings.input_rate
        pcm16k = self._resample(chunk)
        offset = (self._fed_s if end_time is None else end_time) - self._fed_s  # the caller's clock minus audio time
        wake = self._wake_spotter.feed(pcm16k)
        self.wake_spotted = None
        if wake is not None:
            self._wake = wake
            self.spotted.append((self.wake, wake[1] + offset))
            self.wake_spotted = (wake[0] + offset, wake[1] + offset)
        hit = None
        for spotter in self._stop_spotters:
            heard = spotter.feed(pcm16k)
            if heard is not None:
                self.spotted.append((spotter.phrase, heard[1] + offset))
            if heard is None or self._wake is None or hit is not None:
                continue
            if -0.2 <= heard[0] - self._wake[1] <= self.settings.max_gap_s:
                hit = (spotter.phrase, *self._wake)
        if hit is None:
            return None
        stop_word, wake_start, wake_end = hit
        self._wake = None
        now = self._fed_s if end_time is None else end_time
        # end_s: when it had heard the stop word (the end of the chunk that completed it).
        return StopHit(phrase=f"{self.wake} {stop_word}", end_s=now, stop_word=stop_word, start_s=wake_start + offset,
                       wake_end_s=min(wake_end + offset, now))
