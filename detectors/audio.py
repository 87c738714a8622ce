"""What both detectors need: the 24 kHz uplink audio resampled to the 16 kHz their models take."""

from __future__ import annotations

import warnings

with warnings.catch_warnings():
    # Deprecated in 3.11-3.12, gone in 3.13 where the audioop-lts package provides the same module.
    warnings.simplefilter("ignore", DeprecationWarning)
    import audioop

SAMPLE_WIDTH = 2  # pcm16
MODEL_RATE = 16000  # Silero, webrtcvad and pocketsphinx all work at 16 kHz


class Resampler:
    """pcm16 mono from `input_rate` to 16 kHz, chunk by chunk, keeping the filter state across chunks."""

    def __init__(self, input_rate: int) -> None:
        self.input_rate = input_rate
        self._state: tuple[int, tuple[tuple[int, int], ...]] | None = None  # audioop.ratecv's

    def reset(self) -> None:
        self._state = None

    def __call__(self, chunk: bytes) -> bytes:
        pcm16k, self._state = audioop.ratecv(chunk, SAMPLE_WIDTH, 1, self.input_rate, MODEL_RATE, self._state)
        return pcm16k
