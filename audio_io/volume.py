"""The narrator's volume: a speaker wrapper that scales pcm16 before it is played.

0-150 %: above 100 the samples are amplified and clipped at full scale (audioop.mul saturates
instead of wrapping around, so loud audio distorts rather than cracking into noise).
"""

from __future__ import annotations

from audio_io.format import SAMPLE_WIDTH, audioop, check_pcm
from audio_io.interface import SpeakerSink

MAX_VOLUME_PERCENT = 150


def scale_pcm16(pcm: bytes, percent: int) -> bytes:
    """`pcm` at `percent` % of its level, clipped to the pcm16 range."""
    check_pcm(pcm)
    if percent == 100 or not pcm:
        return pcm
    return audioop.mul(pcm, SAMPLE_WIDTH, percent / 100)


class VolumeSpeaker:
    """A SpeakerSink that plays everything through `inner` at `percent` %."""

    def __init__(self, inner: SpeakerSink, percent: int) -> None:
        if not 0 <= percent <= MAX_VOLUME_PERCENT:
            raise ValueError(f"volume must be 0 to {MAX_VOLUME_PERCENT} percent, got {percent}")
        self.inner = inner
        self.percent = percent

    async def start(self) -> None:
        await self.inner.start()

    def play(self, pcm: bytes) -> None:
        self.inner.play(scale_pcm16(pcm, self.percent))

    def flush(self) -> None:
        self.inner.flush()

    async def drained(self) -> None:
        await self.inner.drained()

    async def close(self) -> None:
        await self.inner.close()


def with_volume(speaker: SpeakerSink, percent: int) -> SpeakerSink:
    """`speaker` itself at 100 %, else wrapped so everything it plays is scaled."""
    return speaker if percent == 100 else VolumeSpeaker(speaker, percent)
