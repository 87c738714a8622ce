"""On-device keyword spotting for the configured wake phrase (pocketsphinx keyphrase search).

pocketsphinx ships its English acoustic model and a 130k-word pronouncing dictionary in the
wheel, so any phrase made of dictionary words works with no training and no download. It costs
about 15-25 ms of CPU per second of audio, so the detector pipeline feeds it only while the VAD
hears speech (plus the pre-roll), never the silence between utterances.

A hit carries the time the phrase started (from pocketsphinx's word segmentation): the upload
gate accepts it only near the start of an utterance, as the server's transcript gate does
("computer, ..." yes; "I bought a new computer" no).
"""

from __future__ import annotations

from dataclasses import dataclass

from decisions.upload_gate import KeywordHit
from detectors.audio import SAMPLE_WIDTH, Resampler
from detectors.sphinx_words import keyphrase_decoder, known

FRAMES_PER_SECOND = 100  # pocketsphinx's feature frames are 10 ms


class UnknownWakeWord(ValueError):
    """A word of the wake phrase is not in pocketsphinx's dictionary, so it cannot be spotted."""


@dataclass(frozen=True)
class KeywordSpotterSettings:
    phrase: str = "computer"
    # Lower finds more (and fires more on sound-alikes); measured in benchmarks/detector_choice.py.
    threshold: float = 1e-50
    input_rate: int = 24000


class KeywordSpotter:
    """Feed pcm16 mono chunks with the clock time at each chunk's end; `feed` returns a hit or None.

    Call `reset()` whenever the audio fed is not continuous with what came before (the
    pipeline feeds speech stretches only): times are counted from the first chunk after it.
    """

    def __init__(self, settings: KeywordSpotterSettings = KeywordSpotterSettings()) -> None:
        self.settings = settings
        phrase = " ".join(settings.phrase.lower().replace(",", " ").split())
        self._decoder = keyphrase_decoder(phrase, kws_threshold=settings.threshold)
        unknown = [w for w in phrase.split() if not known(w)]
        if unknown:
            raise UnknownWakeWord(
                f"the wake phrase {settings.phrase!r} has words the on-device spotter does not know: {unknown}"
            )
        self.phrase = phrase
        self._resample = Resampler(settings.input_rate)
        self._stream_start: float | None = None  # clock time of the first sample since reset()
        self._in_utterance = False

    def reset(self) -> None:
        if self._in_utterance:
            self._decoder.end_utt()
            self._in_utterance = False
        self._resample.reset()
        self._stream_start = None

    def feed(self, chunk: bytes, end_time: float) -> KeywordHit | None:
        """`end_time`: the clock time (seconds) at the end of `chunk`."""
        if self._stream_start is None:
            self._stream_start = end_time - len(chunk) / SAMPLE_WIDTH / self.settings.input_rate
        if not self._in_utterance:
            self._decoder.start_utt()
            self._in_utterance = True
        self._decoder.process_raw(self._resample(chunk), False, False)
        if self._decoder.hyp() is None:
            return None
        start_frame = min((seg.start_frame for seg in self._decoder.seg()), default=0)
        # Restart the search so one utterance of the phrase is reported once; time keeps counting
        # from the same origin because the audio stays continuous.
        frames_done = self._decoder.n_frames()
        self._decoder.end_utt()
        self._decoder.start_utt()
        hit = KeywordHit(
            phrase=self.phrase,
            start_s=self._stream_start + start_frame / FRAMES_PER_SECOND,
            detected_s=end_time,
        )
        self._stream_start += frames_done / FRAMES_PER_SECOND
        return hit
