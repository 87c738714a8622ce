"""The interface's audio format (pcm16, mono, 24 kHz) and pure helpers for it.

`SAMPLE_RATE` is the one place the 24 kHz rate is defined: everything else imports it.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

with warnings.catch_warnings():
    # Deprecated in 3.11-3.12, gone in 3.13 where the audioop-lts package provides the same module.
    warnings.simplefilter("ignore", DeprecationWarning)
    import audioop as audioop  # (as: audio_io.volume and .wav take it from here, without the warning)

SAMPLE_RATE = 24000
SAMPLE_WIDTH = 2
CHANNELS = 1
BYTES_PER_SECOND = SAMPLE_RATE * SAMPLE_WIDTH * CHANNELS


def pcm_duration_s(pcm: bytes) -> float:
    """Seconds of audio in interface-format pcm."""
    return len(pcm) / BYTES_PER_SECOND



def check_pcm(pcm: bytes) -> None:
    if len(pcm) % (SAMPLE_WIDTH * CHANNELS):
        raise ValueError(f"pcm16 mono audio has an even number of bytes, got {len(pcm)}")


def check_chunk_ms(chunk_ms: int) -> None:
    if not 1 <= chunk_ms <= 1000:
        raise ValueError(f"chunk_ms must be between 1 and 1000, got {chunk_ms}")


def check_pace(pace: float) -> None:
    if pace < 0 or not math.isfinite(pace):
        raise ValueError(f"pace must be 0 (unpaced) or a positive speed factor, got {pace}")


class PcmConverter:
    """Converts a stream of pcm16 between two rates / channel counts (1 or 2), chunk by chunk.

    The resampler's state is carried from chunk to chunk, so a stream converted in pieces has no
    clicks at the seams. Sync and pure: used on the event loop thread only.
    """

    def __init__(self, in_rate: int, out_rate: int, in_channels: int = 1, out_channels: int = 1) -> None:
        if in_channels not in (1, 2) or out_channels not in (1, 2):
            raise ValueError("only mono and stereo are converted")
        self.in_rate, self.out_rate = in_rate, out_rate
        self.in_channels, self.out_channels = in_channels, out_channels
        self._state: Any = None

    @property
    def is_identity(self) -> bool:
        return self.in_rate == self.out_rate and self.in_channels == self.out_channels

    def convert(self, pcm: bytes) -> bytes:
        if self.in_channels == 2 and self.out_channels == 1:
            pcm = audioop.tomono(pcm, SAMPLE_WIDTH, 0.5, 0.5)
        if self.in_rate != self.out_rate:
            pcm, self._state = audioop.ratecv(pcm, SAMPLE_WIDTH, 1, self.in_rate, self.out_rate, self._state)
        if self.in_channels == 1 and self.out_channels == 2:
            pcm = audioop.tostereo(pcm, SAMPLE_WIDTH, 1, 1)
        return pcm

    def reset(self) -> None:
        """Forget the resampler's history (after a flush the next audio is unrelated)."""
        self._state = None
