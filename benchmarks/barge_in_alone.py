"""Barge-in's losses split honestly (issue 32, session 22): a trial whose user voice the barge-in
wake model does not wake on even alone (no narration, no echo, no room: the voice and the -60 dBFS
floor) is lost to the wake model, not to the echo, the canceller or the hold. flite awb at 200 wpm
is such a voice (PERFORMANCE.md, "Barge-in: where -12 dB's trials are lost"); the corpus keeps it and
the targets stay, but the table says which losses are the wake model's
(PERFORMANCE.md, "Barge-in: whose losses are the wake model's").

`woken_alone(mic, onset_s, end_s, rate, chunk)`: did the barge-in detector's wake model (the shipped
one, `build_wake_spotter` with `StopSettings.barge_in_alone_cutoff`) report the phrase in `mic` (the
user's voice alone) fed from 1.5 s before `onset_s` to 0.2 s after `end_s`. The stop phrase's own
search beside it is not asked: this is the wake model's share of a loss (a "stop" it misses alone may
still be found by the stop phrase). `benchmarks.barge_in_room.Scene.woken_alone` calls it for a trial.
"""

from __future__ import annotations

import numpy as np

from config.settings import StopSettings, UploadMode, UploadSettings
from detectors.pipeline import build_wake_spotter

_FROM_S = 1.5  # fed from this long before the user's onset (a cold model needs a lead-in)
_AFTER_S = 0.2


def woken_alone(mic: np.ndarray, onset_s: float, end_s: float, rate: int, chunk: int, phrase: str = "hey jarvis",
                alone_cutoff: float | None = StopSettings().barge_in_alone_cutoff) -> bool:
    spotter = build_wake_spotter(UploadSettings(mode=UploadMode.ON_DEVICE_WAKE), phrase, alone_cutoff)
    pcm = np.clip(np.round(mic), -32768, 32767).astype(np.int16)
    first = int((onset_s - _FROM_S) * rate) // chunk
    last = min(len(pcm) // chunk, int((end_s + _AFTER_S) * rate) // chunk + 1)
    for i in range(first, last):
        if spotter.feed(pcm[i * chunk:(i + 1) * chunk].tobytes(), (i + 1) * chunk / rate) is not None:
            return True
    return False


class AloneSplit:
    """Per cell: of the trials lost, how many had a voice the wake model does not wake alone."""

    def __init__(self) -> None:
        self.unwoken = 0  # trials whose voice is not woken even alone
        self.lost_unwoken = 0  # ... and lost

    def add(self, woken: bool, ok: bool) -> None:
        if not woken:
            self.unwoken += 1
            self.lost_unwoken += not ok

    def cell(self, lost: int) -> str:
        """'lost (of them, the voice not woken even alone: N of M such trials)'."""
        return f"{lost} ({self.lost_unwoken} of {self.unwoken})"
