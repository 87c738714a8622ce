"""A second opinion on a wake: openWakeWord's model for the same phrase (`pyopen-wakeword`).

microWakeWord (`detectors.wake_model`) listens all the time at about 2 ms of CPU per second; when
it scores a stretch above a low candidate cutoff, this model hears the last 3 seconds
once and the wake counts only if both agree. Two independently trained models rarely fire on the
same sound-alike, and each catches voices the other misses at its own strict cutoff (measured in
docs/PERFORMANCE.md, "Choosing the wake phrase"). openWakeWord costs 30-60 times microWakeWord's
CPU per second of audio, so it runs only on a candidate, never on the stream.

numpy and TFLite load only when a confirmer is built.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass

SAMPLES_PER_CHUNK = 1280  # 80 ms at 16 kHz: the chunk openWakeWord's features take
BYTES_PER_CHUNK = SAMPLES_PER_CHUNK * 2
PADDED_S = 3.0  # what the model hears at least: about 2 s of warm-up, then a second of scores
PADDED_SAMPLES = int(PADDED_S * 16000)


@dataclass(frozen=True)
class ConfirmSettings:
    # microWakeWord's averaged probability above which the second model is asked.
    candidate_cutoff: float = 0.1
    # openWakeWord's probability above which it agrees (its documented default is 0.5; 0.7 keeps
    # "hey jarvie"-like near misses out, measured).
    threshold: float = 0.7
    # The audio it hears: the last `window_s`, taken `delay_s` after microWakeWord's best score
    # of the candidate (near the phrase's end; openWakeWord scores a phrase a few tenths later).
    window_s: float = 3.0
    delay_s: float = 0.5


def confirm_available() -> bool:
    """pyopen-wakeword is installed (it has no armv7l wheel: there microWakeWord decides alone)."""
    return importlib.util.find_spec("pyopen_wakeword") is not None


class OpenConfirmer:
    """`score(pcm16k)`: openWakeWord's highest probability for its phrase over a stretch of 16 kHz pcm16."""

    def __init__(self, model: str) -> None:
        from pyopen_wakeword import Model, OpenWakeWord, OpenWakeWordFeatures  # numpy + TFLite: only when used

        self._features = OpenWakeWordFeatures.from_builtin()
        self._model = OpenWakeWord.from_builtin(Model(model))

    def score(self, pcm16k: bytes) -> float:
        # A fresh start each time: the stretch is all it should judge. The model needs about 2 s of
        # features before its first score, so a short stretch (the pipeline resets the spotter at
        # each speech onset) is padded in front with silence to `PADDED_S`: reset() pads 8 s,
        # which would cost three times the stretch itself (pyopen-wakeword 1.1.0, pinned).
        self._features.reset()
        self._features.new_audio_samples = max(0, PADDED_SAMPLES - len(pcm16k) // 2)
        self._model.reset()
        best = 0.0
        for i in range(len(pcm16k) % BYTES_PER_CHUNK, len(pcm16k), BYTES_PER_CHUNK):  # the end is what matters
            for embeddings in self._features.process_streaming(pcm16k[i : i + BYTES_PER_CHUNK]):
                for probability in self._model.process_streaming(embeddings):
                    best = max(best, probability)
        return best
