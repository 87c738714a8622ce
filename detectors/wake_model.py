"""On-device wake word from a model shipped in a package (microWakeWord, `pymicro-wakeword`).

The same shape as `detectors.keyword.KeywordSpotter` (`feed(chunk, end_time) -> KeywordHit |
None`, `reset()`), so `MicDetectors` and the upload gate take either. The models ("hey jarvis",
"okay nabu", "alexa", "hey mycroft") and their TFLite library are inside the wheel: nothing is
downloaded. About 5 ms of CPU per second of audio fed, and the pipeline feeds it only speech.

A hit is reported when the model's averaged probability passes the cutoff (the model's own,
tuned by its authors, unless WAKE_CUTOFF sets one); after a hit, hits are not reported again for
`refractory_s` (the same phrase is still ringing in the model's window, and a wake is a wake).
The refractory runs on the clock `feed` is given and survives `reset()`, which the pipeline calls
at every speech onset.

numpy and TFLite load only when a spotter is built (`handoff status` and `handoff check` never do).
"""

from __future__ import annotations

from dataclasses import dataclass

from config.wake_phrases import WakeModel
from decisions.upload_gate import KeywordHit
from detectors.audio import SAMPLE_WIDTH, Resampler


@dataclass(frozen=True)
class ModelSpotterSettings:
    model: WakeModel
    cutoff: float | None = None  # None: the model's own probability_cutoff
    refractory_s: float = 3.0
    input_rate: int = 24000


@dataclass(frozen=True)
class Score:
    """The best the model scored on what it heard since the last `take_best()`."""

    probability: float
    at_s: float  # end time of the chunk that scored it


class ModelSpotter:
    """Feed pcm16 mono chunks with the clock time at each chunk's end; `feed` returns a hit or None."""

    def __init__(self, settings: ModelSpotterSettings) -> None:
        from pymicro_wakeword import MicroWakeWord, MicroWakeWordFeatures, Model  # numpy + TFLite: only when used

        self.settings = settings
        self.phrase = settings.model.phrase
        self._model = MicroWakeWord.from_builtin(Model(settings.model.model))
        self._features = MicroWakeWordFeatures()
        self.cutoff = settings.cutoff if settings.cutoff is not None else self._model.probability_cutoff
        self._resample = Resampler(settings.input_rate)
        self._quiet_until = float("-inf")  # the refractory period after the last hit
        self._last_time = float("-inf")
        self._best: Score | None = None

    @property
    def model_cutoff(self) -> float:
        """The cutoff the model ships with."""
        return float(self._model.probability_cutoff)

    def reset(self) -> None:
        """What is fed next does not follow what came before (the refractory period still runs)."""
        self._model.reset()
        self._features.reset()
        self._resample.reset()

    def feed(self, chunk: bytes, end_time: float) -> KeywordHit | None:
        """`end_time`: the clock time (seconds) at the end of `chunk`."""
        if end_time < self._last_time:  # a new clock (another recording): the old refractory means nothing
            self._quiet_until = float("-inf")
        self._last_time = end_time
        hit = None
        for features in self._features.process_streaming(self._resample(chunk)):
            probability = self._model.process_streaming_prob(features)
            if probability is None:
                continue
            if self._best is None or probability > self._best.probability:
                self._best = Score(probability, end_time)
            if probability > self.cutoff and end_time >= self._quiet_until and hit is None:
                self._quiet_until = end_time + self.settings.refractory_s
                hit = KeywordHit(self.phrase, start_s=end_time - self.settings.model.spoken_s, detected_s=end_time)
        return hit

    def take_best(self) -> Score | None:
        """The highest probability since the last call (for `handoff wake-test`), and forget it."""
        best, self._best = self._best, None
        return best


