"""While the assistant only listens for a wake and says nothing, the microphone's reads with a sound
in them may wait for the next (issue 34: a talking room's wake-ups of the loop); never once someone
is woken (a command, its turn end). The filter's side: tests/detectors/test_waiting_for_wake.py."""

from __future__ import annotations

import dataclasses

from audio_io import MemorySpeaker, PushMicrophone, QuietReads
from assembly.build import assistant
from config.settings import AudioSettings, UploadMode
from tests.commands.test_assemble_sounds import settings_for


def microphone() -> PushMicrophone:
    return PushMicrophone(quiet=QuietReads.of(AudioSettings()))


async def test_a_sound_may_wait_until_a_wake_is_heard(tmp_path):
    settings = settings_for(tmp_path)
    settings = dataclasses.replace(settings, upload=dataclasses.replace(settings.upload, mode=UploadMode.ON_DEVICE_WAKE))
    mic = microphone()
    async with assistant(settings, mic, MemorySpeaker()) as coordinator:
        reads = mic.quiet_reads
        assert reads is not None and reads.unhurried is not None
        assert reads.unhurried()  # waiting for a wake, nothing narrated
        mic_filter = coordinator.parts.mic_filter
        assert mic_filter is not None
        mic_filter.feed(bytes(960), woke_s=0.5)  # a wake another detector heard (a released barge-in's)
        assert not reads.unhurried()  # woken: its command, and the turn's end, go at once

