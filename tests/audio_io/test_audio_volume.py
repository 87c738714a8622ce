"""The narrator volume: a speaker wrapper that scales pcm16 before it plays, clipping safely."""

from __future__ import annotations

import array

import pytest

from audio_io import MemorySpeaker, VolumeSpeaker, scale_pcm16, with_volume
from tests.support.audio_helpers import rms, tone


def samples(pcm: bytes) -> list[int]:
    return array.array("h", pcm).tolist()


def test_volume_scales_and_clips_at_full_scale_instead_of_wrapping() -> None:
    pcm = array.array("h", [30000, -30000, 1000, -1000, 0]).tobytes()
    assert samples(scale_pcm16(pcm, 50)) == [15000, -15000, 500, -500, 0]
    assert samples(scale_pcm16(pcm, 150)) == [32767, -32768, 1500, -1500, 0]
    assert samples(scale_pcm16(pcm, 0)) == [0, 0, 0, 0, 0]
    assert scale_pcm16(pcm, 100) is pcm
    with pytest.raises(ValueError):
        scale_pcm16(b"\x00", 50)  # half a sample is a bug upstream


async def test_the_wrapper_plays_everything_through_the_inner_speaker_at_its_volume() -> None:
    inner = MemorySpeaker()
    speaker = with_volume(inner, 50)
    assert isinstance(speaker, VolumeSpeaker) and with_volume(inner, 100) is inner
    await speaker.start()
    loud = tone(440.0, 0.2)
    speaker.play(loud)
    await speaker.drained()
    assert abs(rms(inner.played) - rms(loud) / 2) <= 2
    speaker.flush()
    assert inner.flush_count == 1
    await speaker.close()
    with pytest.raises(ValueError):
        VolumeSpeaker(inner, 151)
