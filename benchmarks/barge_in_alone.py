"""Barge-in's losses split honestly (issue 32, session 22): a trial whose user voice the barge-in
wake model does not wake on even alone (no narration, no echo, no room: the voice and the -60 dBFS
floor) is lost to the wake model, not to the echo, the canceller or the hold. flite awb at 200 wpm
is such a voice (PERFORMANCE.md, "Barge-in: where -12 dB's trials are lost"); the corpus keeps it and
the targets stay, but the table says which losses are the wake model's.

`woken_alone(scene)`: did the barge-in detector's wake model (the shipped one, `build_wake_spotter`
with `StopSettings.barge_in_alone_cutoff`) report the user's phrase fed the voice alone, from 1.5 s
before it to 0.2 s after its end. The stop phrase's own search beside it is not asked: this is the
wake model's share of a loss (a "stop" it misses alone may still be found by the stop phrase).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from config.settings import StopSettings, UploadMode, UploadSettings
from detectors.pipeline import build_wake_spotter

if TYPE_CHECKING:
    from benchmarks.barge_in import Scene

_FROM_S = 1.5  # fed from this long before the user's onset (a cold model needs a lead-in)
_AFTER_S = 0.2


def woken_alone(scene: "Scene", phrase: str = "hey jarvis",
                alone_cutoff: float | None = StopSettings().barge_in_alone_cutoff) -> bool:
    from benchmarks.barge_in import CHUNK, LEAD_S, RATE, pcm

    spotter = build_wake_spotter(UploadSettings(mode=UploadMode.ON_DEVICE_WAKE), phrase, alone_cutoff)
    mic = scene.user + scene.noise
    first = int((LEAD_S - _FROM_S) * RATE) // CHUNK
    last = min(len(mic) // CHUNK, int((scene.word_end_s + _AFTER_S) * RATE) // CHUNK + 1)
    for i in range(first, last):
        if spotter.feed(pcm(mic[i * CHUNK:(i + 1) * CHUNK]), (i + 1) * CHUNK / RATE) is not None:
            return True
    return False


class AloneSplit:
    """Per cell: of the trials lost, how many had a voice the wake model does not wake alone."""

    def __init__(self) -> None:
        self.unwoken = 0  # trials whose voice is not woken even alone
        self.lost_unwoken = 0  # ... and lost

    def add(self, scene: "Scene", ok: bool) -> None:
        if not woken_alone(scene):
            self.unwoken += 1
            self.lost_unwoken += not ok

    def cell(self, lost: int) -> str:
        """'lost (of them, the voice not woken even alone: N)'."""
        return f"{lost} ({self.lost_unwoken} of {self.unwoken})"


def voice_of(k: int) -> str:
    """Trial #k's user voice and speed (`build_scenes`' order: the same at every offset)."""
    from benchmarks.barge_in import SPEEDS, USERS

    return f"{USERS[k % len(USERS)].split(':')[-1]} {SPEEDS[(k // len(USERS)) % len(SPEEDS)]}"
