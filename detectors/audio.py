"""What both detectors need: the 24 kHz uplink audio resampled to the 16 kHz their models take."""

from __future__ import annotations

import math
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
        # ratecv's state after a run of whole cycles (input_rate / gcd samples: 3 at 24 kHz) is its
        # phase, the same after every cycle, and the last samples: `skip` needs only the last two cycles.
        self._cycle_bytes = input_rate // math.gcd(input_rate, MODEL_RATE) * SAMPLE_WIDTH

    def reset(self) -> None:
        self._state = None

    def __call__(self, chunk: bytes) -> bytes:
        pcm16k, self._state = audioop.ratecv(chunk, SAMPLE_WIDTH, 1, self.input_rate, MODEL_RATE, self._state)
        return pcm16k

    def skip(self, chunk: bytes) -> None:
        """A chunk nobody needs at 16 kHz (silence): the state moves on exactly as `__call__`'s
        would, so the next chunk resamples to the same bytes, for a fraction of the work."""
        if len(chunk) % self._cycle_bytes or len(chunk) < 2 * self._cycle_bytes:
            self(chunk)
            return
        _, self._state = audioop.ratecv(chunk[-2 * self._cycle_bytes:], SAMPLE_WIDTH, 1, self.input_rate,
                                        MODEL_RATE, self._state)
